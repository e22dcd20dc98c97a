"""Knowledge bases: creation with a fixed embedding model and chunking, reads scoped
to the caller, changes and deletion by their owner or an admin (auth/access.py), each
write audited. Returns storage rows; the API's views shape them."""
import re
from typing import Optional

from chalicelib import limits
from chalicelib.auth import Principal
from chalicelib.auth.access import kb_to_manage, require_writer
from chalicelib.config import load_settings, reranker_configured
from chalicelib.embeddings import get_provider
from chalicelib import freshness, limits
from chalicelib.errors import Invalid, NotFound
from chalicelib.ingestion.context import CHUNKING_FIELDS, default_chunking, settle_chunking
from chalicelib.ingestion.objects import delete_prefix, knowledge_base_prefix
from chalicelib.sources import SourceConfig
from chalicelib.storage import audit, connection, knowledge_bases
from chalicelib.validate import refuse_unknown

VISIBILITIES = ("private", "org", "public")
ACCESS_FIELDS = tuple(knowledge_bases.ACCESS_COLUMNS.values())  # readRoles, readUsers, writeRoles, writeUsers
_ACCESS_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]*")


def parse_access(value) -> dict:
    """An `access` object → {each access column: a list of names or None}; null or {} is
    no narrowing. Names are organisation roles (admin, editor, viewer), groups, or user names."""
    parsed = dict.fromkeys(knowledge_bases.ACCESS_COLUMNS)
    if value is None:
        return parsed
    if not isinstance(value, dict):
        raise Invalid.field("access", f"must be an object with any of {', '.join(ACCESS_FIELDS)}")
    unknown = sorted(set(value) - set(ACCESS_FIELDS))
    if unknown:
        raise Invalid.field(f"access.{unknown[0]}", f"is not an access list; use {', '.join(ACCESS_FIELDS)}")
    for column, field in knowledge_bases.ACCESS_COLUMNS.items():
        names = value.get(field)
        if names is None:
            continue
        if (not isinstance(names, list) or len(names) > limits.ACCESS_LIST_MAX_NAMES
                or not all(isinstance(n, str) and len(n) <= limits.ACCESS_NAME_MAX_CHARS
                           and _ACCESS_NAME.fullmatch(n) for n in names)):
            raise Invalid.field(f"access.{field}", f"must be a list of up to {limits.ACCESS_LIST_MAX_NAMES} names"
                                f" (roles, groups or users: letters, digits, _ . @ -, up to"
                                f" {limits.ACCESS_NAME_MAX_CHARS} characters)")
        parsed[column] = sorted(set(names))
    return parsed


def check_access(visibility: str, access: dict) -> None:
    """Read lists narrow who in the organisation reads an org knowledge base (a private one
    is its owner's alone, a public one everybody's); write lists need it shared (org or public)."""
    if visibility != "org" and (access.get("read_roles") is not None or access.get("read_users") is not None):
        raise Invalid.field("access.readRoles", f"narrows who in the organisation reads a knowledge base of"
                                                f" visibility org; this one is {visibility}")
    if visibility == "private" and (access.get("write_roles") is not None or access.get("write_users") is not None):
        raise Invalid.field("access.writeRoles", "narrows who in the organisation writes a shared knowledge base"
                                                 " (visibility org or public); a private one is its owner's alone")


def parse_chunking(value) -> dict:
    """A `chunking` object's fields ({} for null), unknown ones refused; their values are checked
    against the embedding model by ingestion.context.settle_chunking."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid.field("chunking", "must be an object {strategy, chunkTokens, chunkOverlap} or"
                                        " {strategy: hierarchical, parentTokens, childTokens, chunkOverlap}")
    refuse_unknown(value, CHUNKING_FIELDS, f"is not a chunking setting; use {', '.join(CHUNKING_FIELDS)}",
                   prefix="chunking.")
    return {k: v for k, v in value.items() if v is not None}


SEARCH_SETTINGS = ("rerank",)


def parse_search_settings(value) -> dict:
    """A `search` object → the columns it sets ({} for null): rerank, whether a search that does
    not say reranks (every surface: the API, tools, MCP, /v1 and Bedrock's retrieve)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Invalid.field("search", "must be an object {rerank}")
    refuse_unknown(value, SEARCH_SETTINGS, f"is not a search setting; use {', '.join(SEARCH_SETTINGS)}",
                   prefix="search.")
    changes = {}
    if "rerank" in value:
        if not isinstance(value["rerank"], bool):
            raise Invalid.field("search.rerank", "must be true or false")
        if value["rerank"] and not reranker_configured():
            raise Invalid.field("search.rerank", "this deployment has no reranker (RERANKER is none);"
                                                 " leave it false", code="RERANK_UNAVAILABLE")
        changes["default_rerank"] = value["rerank"]
    return changes


def create_knowledge_base(principal: Principal, *, name: str, description: str,
                          visibility: str = "private", provider: Optional[str] = None,
                          model: Optional[str] = None, chunking: Optional[dict] = None,
                          access: Optional[dict] = None, source: Optional[SourceConfig] = None,
                          search: Optional[dict] = None) -> dict:
    """A knowledge base whose embedding model (and so dimension) is fixed for good.
    chunking: the API's `chunking` fields (none: the provider's default, limits.DEFAULT_CHUNKING);
    access: parse_access's; search: parse_search_settings'. Raises Invalid naming the field when a
    setting is not valid."""
    require_writer(principal, "create knowledge bases")
    access = access or parse_access(None)
    check_access(visibility, access)
    settings = load_settings()
    embedder = get_provider(provider or settings.embedding_provider, model)
    settled = settle_chunking(parse_chunking(chunking), embedder.name, base=default_chunking(embedder.name),
                              sizes=(settings.default_chunk_tokens, settings.default_chunk_overlap))
    with connection() as conn:
        knowledge_bases.ensure_vector_index(conn, embedder.dimension)
        with conn.transaction():
            kb_id = knowledge_bases.insert_knowledge_base(
                conn, principal, name=name, description=description, visibility=visibility,
                provider=embedder.name, model=embedder.model, dim=embedder.dimension,
                chunk_tokens=settled.chunk_tokens, chunk_overlap=settled.chunk_overlap,
                chunk_strategy=settled.strategy, child_tokens=settled.child_tokens, access=access, source=source.as_json() if source else None,
                default_rerank=(search or {}).get("default_rerank", False))
            audit.write(conn, principal, "create_knowledge_base", "knowledge_base", kb_id,
                        after={"name": name, "visibility": visibility, "embeddingModel": embedder.model,
                               **({"access": access} if any(access.values()) else {}),
                               **({"source": source.kind} if source else {}),
                               **({"searchRerank": True} if (search or {}).get("default_rerank") else {})})
        return knowledge_bases.get_visible(conn, principal, kb_id)


def get_knowledge_base(principal: Principal, kb_id: str) -> dict:
    with connection() as conn:
        row = knowledge_bases.get_visible(conn, principal, kb_id)
    if row is None:
        raise NotFound.thing("knowledge base", kb_id)
    return row


def list_knowledge_bases(principal: Principal, *, limit: int, after: Optional[str]) -> tuple[list[dict], Optional[str]]:
    """(a page of rows, the token of the next page or None)."""
    with connection() as conn:
        rows = knowledge_bases.list_visible(conn, principal, limit=limit + 1, after=after)
    page = rows[:limit]
    return page, (page[-1]["id"] if len(rows) > limit else None)


def update_knowledge_base(principal: Principal, kb_id: str, changes: dict) -> dict:
    """Forbidden when the caller sees it but is neither its owner nor an admin of its organisation.
    changes: name, description, visibility, the access lists (parse_access's columns,
    every one of them when `access` was given: it replaces the lists whole), source, and
    default_rerank (parse_search_settings')."""
    with connection() as conn:
        with conn.transaction():
            before = kb_to_manage(conn, principal, kb_id, "change its settings", for_update=True)
            check_access(changes.get("visibility", before["visibility"]),
                         {c: changes.get(c, before[c]) for c in knowledge_bases.ACCESS_COLUMNS})
            knowledge_bases.update(conn, principal, kb_id, changes)
            changed = [k for k in changes if before[k] != changes[k]]
            if changed:
                audit.write(conn, principal, "update_knowledge_base", "knowledge_base", kb_id,
                            before={k: before[k] for k in changed}, after={k: changes[k] for k in changed})
        freshness.bump(kb_id)  # its name is in every answer; its access lists decide who reads; its rerank how
        return knowledge_bases.get_visible(conn, principal, kb_id)


def delete_knowledge_base(principal: Principal, kb_id: str) -> None:
    """Deletes the knowledge base, its documents and chunks, then its objects in S3
    (their ObjectRemoved events then find nothing left to delete)."""
    with connection() as conn, conn.transaction():
        kb = kb_to_manage(conn, principal, kb_id, "delete it", for_update=True)
        knowledge_bases.delete(conn, principal, kb_id)
        audit.write(conn, principal, "delete_knowledge_base", "knowledge_base", kb_id,
                    before={"name": kb["name"], "visibility": kb["visibility"], "ownerId": kb["owner_id"]})
    freshness.bump(kb_id)
    delete_prefix(load_settings().bucket, knowledge_base_prefix(kb_id))
