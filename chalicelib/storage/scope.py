"""Tenant scoping, shared by every table's SQL: a caller reaches a knowledge base
only through VISIBLE_KB and an agent only through OWN_AGENT, so another tenant's rows
never leave the database. Within what is visible, chalicelib/auth/access.py decides
who may change what."""

# A knowledge base is visible to its owner, to its organisation when shared with
# it (narrowed by its read lists, migration 0018, which the policies state too), and to
# everyone when public.
VISIBLE_KB = """(kb.owner_id = %(user_id)s
     OR (kb.visibility = 'org' AND kb.org_id = %(org_id)s
         AND kb_access_allows(kb.read_roles, kb.read_users, kb.owner_id, kb.org_id, %(user_id)s))
     OR kb.visibility = 'public')"""
# Whether the caller passes the knowledge base's write lists (migration 0018).
WRITES_BY_ACCESS = "kb_access_allows(kb.write_roles, kb.write_users, kb.owner_id, kb.org_id, %(user_id)s)"


def readable(alias: str) -> str:
    """A document or chunk (alias) by its audience (migration 0014, seed 003's levels):
    NULL (files, public entries) reaches whoever sees its knowledge base; an entry below
    public only its writer ('user:<id>': individual ones, and those posted without a
    level) or its knowledge base's organisation ('org:<id>'). The policies state the same."""
    return f"({alias}.audience IS NULL OR {alias}.audience = ANY(%(audiences)s))"


READABLE_DOCUMENT = readable("d")
READABLE_CHUNK = readable("c")
# The entries (documents of kind 'entry', alias e) the caller may read.
VISIBLE_ENTRY = f"(e.kind = 'entry' AND {readable('e')})"
# An agent belongs to its owner; the organisation's admins manage them all.
OWN_AGENT = """(a.org_id = %(org_id)s AND (a.owner_id = %(user_id)s OR %(role)s = 'admin'))"""


def scope(principal, **params) -> dict:
    """The caller's identity as named parameters for the conditions above, plus params."""
    return {"user_id": principal.user_id, "org_id": principal.org_id, "role": principal.role,
            "audiences": audiences(principal), **params}


def audiences(principal) -> list[str]:
    """The audiences beyond NULL that the caller belongs to (migration 0014)."""
    return [f"user:{principal.user_id}", f"org:{principal.org_id}"]
