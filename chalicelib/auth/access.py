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
from chalicelib.auth.principal import Principal
from chalicelib.errors import Forbidden, NotFound
from chalicelib.storage import knowledge_bases


def require_writer(principal: Principal, action: str) -> None:
    if principal.role == "viewer":
        raise Forbidden(f"a viewer cannot {action}; an admin can make you an editor")


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
