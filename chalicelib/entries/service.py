from typing import Optional

from chalicelib.auth import Principal
from chalicelib.embeddings import get_provider
from chalicelib.ids import new_id
from chalicelib.ingestion.chunk import chunk_document
from chalicelib.ingestion.extract import TEXT, Extracted, Section
from chalicelib.retrieval import SearchRequest, search
from chalicelib.storage import connection, queries


def entry_url(entry_id: str) -> str:
    return f"knowledge://entries/{entry_id}"


def create_entry(principal: Principal, kb_id: str, *, title: str, content: str,
                 metadata: dict) -> Optional[dict]:
    """Chunk, embed and store an entry within the request. None when the caller
    may not write the knowledge base."""
    with connection() as conn:
        kb = queries.get_writable_knowledge_base(conn, principal, kb_id)
    if kb is None:
        return None
    chunks = chunk_document(Extracted(TEXT, [Section(content)]), kb["chunk_tokens"], kb["chunk_overlap"], metadata)
    vectors = get_provider(kb["embedding_provider"], kb["embedding_model"]).embed_documents(
        [f"{title}\n{c['content']}" for c in chunks])
    for chunk, vector in zip(chunks, vectors):
        chunk.update(embedding=vector, title=title)
    entry_id = new_id("entry")
    with connection() as conn, conn.transaction():
        queries.insert_entry(conn, entry_id=entry_id, kb_id=kb_id, title=title, user_id=principal.user_id,
                             metadata=metadata, size_bytes=len(content.encode("utf-8")))
        queries.replace_document_chunks(conn, doc_id=entry_id, kb_id=kb_id, dim=kb["embedding_dim"],
                                        chunks=chunks, page_count=None)
    return {"id": entry_id, "knowledgeBaseId": kb_id, "title": title, "url": entry_url(entry_id),
            "chunks": len(chunks), "tokens": sum(c["tokenCount"] for c in chunks), "metadata": metadata}


def search_entries(principal: Principal, query: str, max_results: int) -> list[dict]:
    """The caller's own entries, best passage per entry, hybrid-ranked, scores 0..1."""
    with connection() as conn:
        kb_ids = queries.knowledge_bases_with_entries_by(conn, principal)
    if not kb_ids:
        return []
    answer = search(principal, SearchRequest(
        knowledge_base_ids=tuple(kb_ids), query=query, top_k=20, strategy="hybrid",
        filters={"entriesBy": principal.user_id}, max_tokens=100_000))
    best: dict[str, dict] = {}
    for result in answer["results"]:
        best.setdefault(result["documentId"], result)
    return [{"title": r["source"], "url": entry_url(r["documentId"]), "content": r["content"],
             "score": round(min(1.0, max(0.0, r["similarity"])), 6)}
            for r in list(best.values())[:max_results]]
