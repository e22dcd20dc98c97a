"""The organisation's audit log: every write through the API, for its admins, without the
names of what they may not see (agents/redact.py)."""
from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from chalicelib.agents import redact
from chalicelib.auth import Principal
from chalicelib.auth.access import require_admin
from chalicelib.errors import Invalid
from chalicelib.storage import audit, connection

TARGET_TYPES = ("knowledge_base", "document", "agent", "api_key")


@dataclass(frozen=True)
class AuditQuery:
    target_type: Optional[str] = None
    target_id: Optional[str] = None
    user_id: Optional[str] = None
    since: Optional[datetime] = None
    until: Optional[datetime] = None
    limit: int = 50
    before_id: Optional[int] = None


def audit_log(principal: Principal, query: AuditQuery) -> tuple[list[dict], Optional[str]]:
    """(a page, newest first; the token of the next page or None)."""
    require_admin(principal, "read the organisation's audit log")
    if query.target_type is not None and query.target_type not in TARGET_TYPES:
        raise Invalid.field("targetType", f"must be one of {', '.join(TARGET_TYPES)}")
    with connection() as conn:
        rows = audit.search(conn, principal, target_type=query.target_type, target_id=query.target_id,
                            user_id=query.user_id, since=query.since, until=query.until,
                            before_id=query.before_id, limit=query.limit + 1)
        page = redact.audit_rows(conn, principal, rows[:query.limit])
    return page, (str(page[-1]["id"]) if len(rows) > query.limit else None)
