"""Who may do what inside an organisation: the role and ownership rules, in one place.

Reads go through the tenant scope in SQL (storage/scope.py): what a caller cannot see
is a 404. What it can see but may not change is a 403 FORBIDDEN, decided here.
- viewer: searches and reads;
- editor: also creates knowledge bases and agents, and writes documents and entries
  into its own knowledge bases and those shared with its organisation (org or public);
- admin: also manages every agent, key and shared knowledge base of its organisation,
  and reads its audit log.
A knowledge base's settings (name, description, visibility) and its deletion belong to
its owner and the organisation's admins; an agent belongs to its owner and the admins.
Ownership never outranks the role: an owner who is now a viewer changes nothing.
"""
import time
from dataclasses import replace
from typing import Optional, Sequence

from chalicelib import kv, limits
from chalicelib.auth.principal import Principal
from chalicelib.errors import Forbidden, NotFound
from chalicelib.storage import connection, db, knowledge_bases, tenants


def require_writer(principal: Principal, action: str) -> None:
    if principal.role == "viewer":
        raise Forbidden(f"a viewer cannot {action}; an admin can make you an editor")


def current_principal(principal: Principal) -> Principal:
    """The caller with the role their user holds now (a viewer's, once the user is gone): what
    work that outlives its request (a job) decides by when it acts."""
    with connection() as conn:
        role = tenants.user_role(conn, principal.user_id)
    return replace(principal, role=role or "viewer")


def require_admin(principal: Principal, action: str) -> None:
    if not principal.is_admin:
        raise Forbidden(f"only an admin of the organisation can {action}")


def may_write_kb(principal: Principal, kb: dict) -> bool:
    """Documents and entries: the owner, and the organisation's editors and admins
    when it is shared with the organisation (org, or public which includes it), who pass
    its write lists if it has them. kb: a row of kb_to_read's."""
    if principal.role == "viewer" or not kb["writes_by_access"]:  # its write lists (migration 0018)
        return False
    return kb["owner_id"] == principal.user_id or (
        kb["org_id"] == principal.org_id and kb["visibility"] in ("org", "public"))


ENTRY_LEVELS = ("individual", "organisation", "public")  # seed 003's, narrowest first
LEVEL_ALIASES = {"organization": "organisation", "org": "organisation", "personal": "individual"}


def canonical_level(value) -> Optional[str]:
    """An entry level as stored (one of ENTRY_LEVELS) from any case and the American and
    short spellings clients and models write ("Organization", "org"); None if it is none."""
    if not isinstance(value, str):
        return None
    level = value.strip().lower()
    level = LEVEL_ALIASES.get(level, level)
    return level if level in ENTRY_LEVELS else None


def widest_entry_level(principal: Principal) -> str:
    """The widest level of knowledge the caller may write: an editor's reaches its
    organisation, only an admin publishes knowledge (a viewer writes none: may_write_kb)."""
    return "public" if principal.is_admin else "organisation"


def may_manage_kb(principal: Principal, kb: dict) -> bool:
    """Rename, change visibility, delete: the owner and the organisation's admins. Ownership
    never outranks the role: an owner made a viewer changes nothing."""
    if principal.role == "viewer":
        return False
    return kb["owner_id"] == principal.user_id or (principal.is_admin and kb["org_id"] == principal.org_id)


def kb_to_read(conn, principal: Principal, kb_id: str) -> dict:
    """The knowledge base the caller may read, without its stats (an access check, before
    a page of documents, an upload, a reindex: none of them shows the counts)."""
    kb = knowledge_bases.get_visible(conn, principal, kb_id, stats=False)
    if kb is None:
        raise NotFound.thing("knowledge base", kb_id)
    return kb


def kb_to_write(conn, principal: Principal, kb_id: str, action: str) -> dict:
    kb = kb_to_read(conn, principal, kb_id)
    if not may_write_kb(principal, kb):
        require_writer(principal, action)
        if kb["org_id"] == principal.org_id and not kb["writes_by_access"]:
            raise Forbidden(f"knowledge base {kb_id} lets only the roles, groups and users of its access.writeRoles"
                            f" and access.writeUsers {action}; its owner or an admin can add you")
        # Visible, not private to someone else, not ours to write: another organisation's public one.
        raise Forbidden(f"knowledge base {kb_id} is another organisation's; you may search it, not {action}")
    return kb


def kb_to_manage(conn, principal: Principal, kb_id: str, action: str, *, for_update: bool = False) -> dict:
    kb = kb_to_read(conn, principal, kb_id)
    if not may_manage_kb(principal, kb):
        require_writer(principal, action)
        raise Forbidden(f"only the owner of knowledge base {kb_id} or an admin of its organisation can {action}")
    # Locked only now: the database lets no one lock another organisation's rows.
    return knowledge_bases.get_visible(conn, principal, kb_id, for_update=True) if for_update else kb


# (organisation, user, role, knowledge bases, their counters, the keys' generation) -> (the
# caller's view of them, until when); see searchable().
_searchable: dict[tuple, tuple[tuple[dict, ...], float]] = {}
_SEARCHABLE_MAX = 1000  # views a worker remembers; beyond, it starts over


def forget_views() -> None:
    """This worker's remembered views, all (the others see the keys' generation move)."""
    _searchable.clear()


db.on_new_connection(forget_views)


def searchable(principal: Principal, kb_ids: Sequence[str], counters: Optional[tuple[int, ...]]) -> list[dict]:
    """The knowledge bases of kb_ids the caller sees (the rest left out), as a search reads
    them. With the knowledge bases' counters (freshness) and the keys' generation that this
    request read from Redis (its first search only: kv.keys_generation is handed out once, so
    a batch's later searches read the database), a view in which the caller saw them all is
    remembered by the worker for limits.KEY_REMEMBERED_SECONDS under both: a change of a
    knowledge base's visibility or access lists, or its deletion, moves its counter, and a
    change of a user's role or groups (which kb_access_allows reads) moves the generation,
    once committed; so it is seen from the next request in every worker, as a revoked key is.
    A change made while Redis was unreachable, or outside the service, is seen within the
    remembered time. A cached search then asks the database nothing (bench/api_overhead.py
    measures what that saves)."""
    generation = kv.keys_generation()
    key = None
    if counters is not None and generation is not None:
        key = (principal.org_id, principal.user_id, principal.role, tuple(kb_ids), counters, generation)
        found = _searchable.get(key)
        if found is not None and found[1] > time.monotonic():
            return [dict(kb) for kb in found[0]]
    with connection() as conn:
        kbs = knowledge_bases.visible_by_ids(conn, principal, list(kb_ids))
    if key is not None and len(kbs) == len(set(kb_ids)):
        if len(_searchable) >= _SEARCHABLE_MAX:
            _searchable.clear()
        _searchable[key] = (tuple(dict(kb) for kb in kbs), time.monotonic() + limits.KEY_REMEMBERED_SECONDS)
    return kbs
