"""Opaque identifiers with a type prefix (kb_…, doc_…)."""
import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"
