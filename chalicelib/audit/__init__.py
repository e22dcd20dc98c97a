"""The organisation's audit log (log.py)."""
from chalicelib.audit.log import TARGET_TYPES, AuditQuery, audit_log

__all__ = ["TARGET_TYPES", "AuditQuery", "audit_log"]
