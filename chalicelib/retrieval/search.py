import time
from dataclasses import dataclass

from chalicelib.auth import Principal
from chalicelib.embeddings import get_provider
from chalicelib.retrieval.cache import cached_embedding
from chalicelib.storage import connection, queries


class KnowledgeBaseNotFound(Exception):
    pass


@dataclass(frozen=True)
class SearchRequest:
    knowledge_base_id: str
    query: str
    top_k: int = 5


def search_knowledge_base(principal: Principal, request: SearchRequest) -> dict:
    started = time.monotonic()
    with connection() as conn:
        kb = queries.get_visible_knowledge_base(conn, principal, request.knowledge_base_id)
    if kb is None:
        raise KnowledgeBaseNotFound(request.knowledge_base_id)
    provider = get_provider(kb["embedding_provider"], kb["embedding_model"])
    vector, cached = cached_embedding(provider.name, kb["embedding_model"], request.query,
                                      provider.embed_query)
    with connection() as conn:
        rows = queries.semantic_search(conn, principal, kb_id=kb["id"], dim=kb["embedding_dim"],
                                       query_vector=vector, top_k=request.top_k)
    results = [
        {"rank": i + 1, "content": r["content"], "source": r["filename"],
         "documentId": r["document_id"], "chunkIndex": r["chunk_index"], "page": r["page"],
         "headers": r["headers"], "similarity": round(float(r["similarity"]), 6),
         "metadata": r["metadata"]}
        for i, r in enumerate(rows)
    ]
    return {
        "query": request.query, "knowledgeBaseId": kb["id"], "knowledgeBaseName": kb["name"],
        "resultCount": len(results), "results": results,
        "metadata": {"cached": cached, "strategy": "semantic",
                     "tookMs": int((time.monotonic() - started) * 1000)},
    }
