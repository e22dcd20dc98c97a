from typing import Optional

from chalicelib.auth import Principal
from chalicelib.config import load_settings
from chalicelib.embeddings import get_provider
from chalicelib.ingestion.chunk import validate_sizes
from chalicelib.ingestion.objects import delete_prefix
from chalicelib.storage import connection, queries

DOCUMENT_STATUSES = ("PENDING", "PROCESSING", "PROCESSED", "FAILED")


def _iso(value) -> Optional[str]:
    return value.isoformat() if value is not None else None


def kb_view(row: dict) -> dict:
    stats = row.get("stats") or {}
    return {
        "id": row["id"], "name": row["name"], "description": row["description"],
        "visibility": row["visibility"], "ownerId": row["owner_id"], "organizationId": row["org_id"],
        "embedding": {"provider": row["embedding_provider"], "model": row["embedding_model"],
                      "dimension": row["embedding_dim"]},
        "chunking": {"chunkTokens": row["chunk_tokens"], "chunkOverlap": row["chunk_overlap"]},
        "stats": {
            "documentCount": stats.get("documentCount", 0), "chunkCount": stats.get("chunkCount", 0),
            "totalTokens": stats.get("totalTokens", 0),
            "documentsByStatus": stats.get("byStatus", {s: 0 for s in DOCUMENT_STATUSES}),
            "lastIngestedAt": stats.get("lastIngestedAt"),
        },
        "createdAt": _iso(row["created_at"]), "updatedAt": _iso(row["updated_at"]),
    }


def document_view(row: dict) -> dict:
    return {
        "id": row["id"], "knowledgeBaseId": row["kb_id"], "filename": row["filename"],
        "s3Key": row["s3_key"], "contentType": row["content_type"], "size": row["size_bytes"],
        "contentHash": row["content_hash"], "status": row["status"],
        "error": ({"code": row["error_code"], "message": row["error_message"]}
                  if row["error_code"] else None),
        "pages": row["page_count"], "chunks": row["chunk_count"], "tokens": row["token_count"],
        "metadata": row["metadata"], "stepDurationsMs": row["step_durations"],
        "createdAt": _iso(row["created_at"]), "updatedAt": _iso(row["updated_at"]),
        "processedAt": _iso(row["processed_at"]),
    }


def create_knowledge_base(principal: Principal, *, name: str, description: str,
                          visibility: str = "private", provider: Optional[str] = None,
                          model: Optional[str] = None, chunk_tokens: Optional[int] = None,
                          chunk_overlap: Optional[int] = None) -> dict:
    """A knowledge base whose embedding model (and so dimension) is fixed for good.
    Raises ValueError naming the field when a setting is not valid."""
    settings = load_settings()
    embedder = get_provider(provider or settings.embedding_provider, model)
    chunk_tokens = settings.default_chunk_tokens if chunk_tokens is None else chunk_tokens
    chunk_overlap = settings.default_chunk_overlap if chunk_overlap is None else chunk_overlap
    validate_sizes(chunk_tokens, chunk_overlap)
    with connection() as conn:
        queries.ensure_vector_index(conn, embedder.dimension)
        kb_id = queries.insert_knowledge_base(
            conn, principal, name=name, description=description, visibility=visibility,
            provider=embedder.name, model=embedder.model, dim=embedder.dimension,
            chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap)
        return kb_view(queries.get_visible_knowledge_base(conn, principal, kb_id))


def get_knowledge_base(principal: Principal, kb_id: str) -> Optional[dict]:
    with connection() as conn:
        row = queries.get_visible_knowledge_base(conn, principal, kb_id)
    return kb_view(row) if row else None


def list_knowledge_bases(principal: Principal, *, limit: int, after: Optional[str]) -> dict:
    with connection() as conn:
        rows = queries.list_visible_knowledge_bases(conn, principal, limit=limit + 1, after=after)
    page = rows[:limit]
    return {"items": [kb_view(r) for r in page],
            "nextToken": page[-1]["id"] if len(rows) > limit else None}


def list_documents(principal: Principal, kb_id: str, status: Optional[str]) -> Optional[list[dict]]:
    """The knowledge base's documents, or None when the caller cannot see it."""
    with connection() as conn:
        if queries.get_visible_knowledge_base(conn, principal, kb_id) is None:
            return None
        return [document_view(r) for r in queries.list_documents(conn, kb_id, status)]


def update_knowledge_base(principal: Principal, kb_id: str, changes: dict) -> Optional[dict]:
    """None when the caller cannot see it or may not change it."""
    with connection() as conn:
        if not queries.update_knowledge_base(conn, principal, kb_id, changes):
            return None
        return kb_view(queries.get_visible_knowledge_base(conn, principal, kb_id))


def delete_knowledge_base(principal: Principal, kb_id: str) -> bool:
    """Deletes the knowledge base, its documents and chunks, then its objects in S3
    (their ObjectRemoved events then find nothing left to delete)."""
    with connection() as conn:
        if not queries.delete_knowledge_base(conn, principal, kb_id):
            return False
    delete_prefix(load_settings().bucket, f"kb/{kb_id}/")
    return True
