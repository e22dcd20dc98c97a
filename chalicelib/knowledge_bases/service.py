"""Knowledge bases: creation with a fixed embedding model and chunking, reads scoped
to the caller, changes and deletion by their owner or an admin (auth/access.py), each
write audited. Returns storage rows; the API's views shape them."""
from typing import Optional

from chalicelib import limits
from chalicelib.auth import Principal
from chalicelib.auth.access import kb_to_manage, require_writer
from chalicelib.config import load_settings
from chalicelib.embeddings import get_provider
from chalicelib.errors import NotFound
from chalicelib.ingestion.chunk import validate_sizes, validate_strategy
from chalicelib.ingestion.objects import delete_prefix, knowledge_base_prefix
from chalicelib.storage import audit, connection, knowledge_bases

VISIBILITIES = ("private", "org", "public")


def create_knowledge_base(principal: Principal, *, name: str, description: str,
                          visibility: str = "private", provider: Optional[str] = None,
                          model: Optional[str] = None, chunk_tokens: Optional[int] = None,
                          chunk_overlap: Optional[int] = None, chunk_strategy: Optional[str] = None) -> dict:
    """A knowledge base whose embedding model (and so dimension) is fixed for good.
    Raises Invalid naming the field when a setting is not valid."""
    require_writer(principal, "create knowledge bases")
    settings = load_settings()
    embedder = get_provider(provider or settings.embedding_provider, model)
    chunk_tokens = settings.default_chunk_tokens if chunk_tokens is None else chunk_tokens
    chunk_overlap = settings.default_chunk_overlap if chunk_overlap is None else chunk_overlap
    validate_sizes(chunk_tokens, chunk_overlap)
    chunk_strategy = limits.CHUNK_STRATEGIES[0] if chunk_strategy is None else chunk_strategy
    validate_strategy(chunk_strategy)
    with connection() as conn:
        knowledge_bases.ensure_vector_index(conn, embedder.dimension)
        with conn.transaction():
            kb_id = knowledge_bases.insert_knowledge_base(
                conn, principal, name=name, description=description, visibility=visibility,
                provider=embedder.name, model=embedder.model, dim=embedder.dimension,
                chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap, chunk_strategy=chunk_strategy)
            audit.write(conn, principal, "create_knowledge_base", "knowledge_base", kb_id,
                        after={"name": name, "visibility": visibility, "embeddingModel": embedder.model})
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
    """Forbidden when the caller sees it but is neither its owner nor an admin of its organisation."""
    with connection() as conn:
        with conn.transaction():
            before = kb_to_manage(conn, principal, kb_id, "change its settings", for_update=True)
            knowledge_bases.update(conn, principal, kb_id, changes)
            changed = [k for k in changes if before[k] != changes[k]]
            if changed:
                audit.write(conn, principal, "update_knowledge_base", "knowledge_base", kb_id,
                            before={k: before[k] for k in changed}, after={k: changes[k] for k in changed})
        return knowledge_bases.get_visible(conn, principal, kb_id)


def delete_knowledge_base(principal: Principal, kb_id: str) -> None:
    """Deletes the knowledge base, its documents and chunks, then its objects in S3
    (their ObjectRemoved events then find nothing left to delete)."""
    with connection() as conn, conn.transaction():
        kb = kb_to_manage(conn, principal, kb_id, "delete it", for_update=True)
        knowledge_bases.delete(conn, principal, kb_id)
        audit.write(conn, principal, "delete_knowledge_base", "knowledge_base", kb_id,
                    before={"name": kb["name"], "visibility": kb["visibility"], "ownerId": kb["owner_id"]})
    delete_prefix(load_settings().bucket, knowledge_base_prefix(kb_id))
