"""Text entries: prior answers kept as knowledge, searchable as soon as they are written."""
from dataclasses import dataclass, replace

from chalicelib import limits
from chalicelib.auth import Principal
from chalicelib.auth.access import kb_to_write
from chalicelib.embeddings import get_provider
from chalicelib.ids import new_id
from chalicelib.ingestion.chunk import chunk_document
from chalicelib.ingestion.extract import TEXT, Extracted, Section
from chalicelib.retrieval import Passage, SearchRequest, search
from chalicelib.storage import chunks as chunk_rows
from chalicelib.storage import audit, connection, documents, knowledge_bases
from chalicelib.storage.filters import SearchFilters


@dataclass(frozen=True)
class Entry:
    id: str
    knowledge_base_id: str
    title: str
    chunks: int
    tokens: int
    metadata: dict


def entry_url(entry_id: str) -> str:
    return f"knowledge://entries/{entry_id}"


def create_entry(principal: Principal, kb_id: str, *, title: str, content: str, metadata: dict) -> Entry:
    """Chunk, embed and store an entry within the request (access.kb_to_write says who may)."""
    with connection() as conn:
        kb = kb_to_write(conn, principal, kb_id, "write entries")
    chunks = chunk_document(Extracted(TEXT, [Section(content)]), kb["chunk_tokens"], kb["chunk_overlap"], metadata)
    vectors = get_provider(kb["embedding_provider"], kb["embedding_model"]).embed_documents(
        [f"{title}\n{c.content}" for c in chunks])
    chunks = [replace(c, embedding=v, title=title) for c, v in zip(chunks, vectors)]
    entry_id = new_id("entry")
    with connection() as conn, conn.transaction():
        documents.insert_entry(conn, entry_id=entry_id, kb_id=kb_id, title=title, user_id=principal.user_id,
                               metadata=metadata, size_bytes=len(content.encode("utf-8")))
        chunk_rows.replace_document_chunks(conn, doc_id=entry_id, kb_id=kb_id, dim=kb["embedding_dim"],
                                           chunks=chunks, page_count=None)
        audit.write(conn, principal, "create_entry", "document", entry_id,
                    after={"knowledgeBaseId": kb_id, "title": title})
    return Entry(id=entry_id, knowledge_base_id=kb_id, title=title, chunks=len(chunks),
                 tokens=sum(c.token_count for c in chunks), metadata=metadata)


def search_entries(principal: Principal, query: str, max_results: int) -> list[Passage]:
    """The caller's own entries, the best passage per entry, hybrid-ranked."""
    with connection() as conn:
        kb_ids = knowledge_bases.with_entries_by(conn, principal)
    if not kb_ids:
        return []
    answer = search(principal, SearchRequest(
        knowledge_base_ids=tuple(kb_ids), query=query, top_k=int(limits.TOP_K.high), strategy="hybrid",
        filters=SearchFilters(entries_by=principal.user_id), max_tokens=int(limits.MAX_TOKENS.high)))
    best: dict[str, Passage] = {}
    for passage in answer.passages:
        best.setdefault(passage.document_id, passage)
    return list(best.values())[:max_results]
