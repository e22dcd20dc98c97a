"""Tenant scoping, shared by every table's SQL: a caller reaches a knowledge base
only through VISIBLE_KB (read) or WRITABLE_KB (write), so another tenant's rows
never leave the database."""

# A knowledge base is visible to its owner, to its organisation when shared with
# it, and to everyone when public.
VISIBLE_KB = """(kb.owner_id = %(user_id)s
     OR (kb.visibility = 'org' AND kb.org_id = %(org_id)s)
     OR kb.visibility = 'public')"""
WRITABLE_KB = """(kb.owner_id = %(user_id)s
     OR (kb.visibility = 'org' AND kb.org_id = %(org_id)s))"""


def scope(principal, **params) -> dict:
    """The caller's identity as named parameters for VISIBLE_KB/WRITABLE_KB, plus params."""
    return {"user_id": principal.user_id, "org_id": principal.org_id, **params}
