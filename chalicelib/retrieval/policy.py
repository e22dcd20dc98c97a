"""How a query becomes SQL: the full-text query and the HNSW candidate list. Storage
runs what this decides; BM25's own policy is in bm25.py."""
import re
from typing import Optional

from chalicelib.storage.chunks import TextQuery

# HNSW's candidate list: 40 (pgvector's default) lost a quarter of the true top 10 at 100k
# chunks in bench/retrieval.py. With graphs of m 24 and ef_construction 128 (migration 0013)
# a wider list keeps more of the true top 10 for a few milliseconds more a scan, the more
# so the larger the index (the benchmark report's recall table). By the index's rows:
HNSW_EF_SEARCH_BY_SIZE = ((200_000, 100), (2_000_000, 200))
HNSW_EF_SEARCH_LARGEST = 400
# Knowledge bases holding this many chunks or fewer are searched by an exact scan of
# their rows, never through the graph: in an index that mostly holds other knowledge
# bases' vectors, the iterative scan would read up to 20,000 of them to find a small
# one's top 10. Above it the graph always serves (storage.chunks.semantic_search).
VECTOR_EXACT_MAX = 2_000
_WEB_SYNTAX = re.compile(r'"|\bOR\b|(^|\s)-\w')


# Hybrid search fuses lists this many times deeper than asked, never shallower than the
# floor. Was 4x and 40: on the SciFact train questions a pool of 20 ranked as well or
# better (nDCG@10, recall@10; alone and inside a million synthetic chunks), and the keyword
# list at 40 was most of hybrid's time.
FUSION_POOL_FACTOR = 2
FUSION_POOL_MIN = 20
# A reranked search sends the reranker this deep a list (limits.RERANK_CANDIDATES at most).
RERANK_POOL_FACTOR = 4
RERANK_POOL_MIN = 40


# A list read alone holds this many more than asked: what replaces passages that repeat a
# better one's text (retrieval/dedupe.py).
DEDUPE_SPARE = 5


def candidate_pool(top_k: int, strategy: str, rerank: bool) -> int:
    """How deep each list is read: a few more than top_k, or deeper when the lists are fused
    or reranked."""
    if rerank:
        return max(top_k * RERANK_POOL_FACTOR, RERANK_POOL_MIN)
    if strategy == "hybrid":
        return max(top_k * FUSION_POOL_FACTOR, FUSION_POOL_MIN)
    return top_k + DEDUPE_SPARE


def ef_search_for(top_k: int, index_rows: float = 0) -> int:
    """The candidate list for a search of top_k in an HNSW index of index_rows vectors
    (every knowledge base of the dimension shares it)."""
    base = next((ef for rows, ef in HNSW_EF_SEARCH_BY_SIZE if index_rows <= rows), HNSW_EF_SEARCH_LARGEST)
    return min(1000, max(base, top_k * 4))


def exact_vector_scan(kb_chunks: int) -> bool:
    return kb_chunks <= VECTOR_EXACT_MAX


def web_query(query: str) -> Optional[TextQuery]:
    """A question in web-search syntax ("phrase", OR, -word) is held to it: only the
    chunks it matches are ranked. Any other question is a bag of words for BM25."""
    return TextQuery("websearch_to_tsquery", query) if _WEB_SYNTAX.search(query) else None
