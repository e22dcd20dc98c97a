"""Tenant scoping, shared by every table's SQL: a caller reaches a knowledge base
only through VISIBLE_KB and an agent only through OWN_AGENT, so another tenant's rows
never leave the database. Within what is visible, chalicelib/auth/access.py decides
who may change what."""

# A knowledge base is visible to its owner, to its organisation when shared with
# it, and to everyone when public.
VISIBLE_KB = """(kb.owner_id = %(user_id)s
     OR (kb.visibility = 'org' AND kb.org_id = %(org_id)s)
     OR kb.visibility = 'public')"""
# An entry (a document of kind 'entry', alias e) by its level (seed 003): individual
# ones (and those posted directly, without a level) reach the user who wrote them,
# organisation ones the organisation, public ones whoever sees their knowledge base.
VISIBLE_ENTRY = """(e.kind = 'entry' AND (e.created_by = %(user_id)s
     OR (e.level = 'organisation' AND e.kb_id IN (SELECT o.id FROM knowledge_bases o WHERE o.org_id = %(org_id)s))
     OR e.level = 'public'))"""
# An agent belongs to its owner; the organisation's admins manage them all.
OWN_AGENT = """(a.org_id = %(org_id)s AND (a.owner_id = %(user_id)s OR %(role)s = 'admin'))"""


def scope(principal, **params) -> dict:
    """The caller's identity as named parameters for VISIBLE_KB/OWN_AGENT, plus params."""
    return {"user_id": principal.user_id, "org_id": principal.org_id, "role": principal.role, **params}
