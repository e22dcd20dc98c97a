"""How a query becomes SQL: the full-text query and the HNSW candidate list. Storage
runs what this decides; BM25's own policy is in bm25.py."""
import re
from typing import Optional

from chalicelib.storage.chunks import TextQuery

# HNSW's candidate list: 40 (pgvector's default) lost a quarter of the true top 10
# at 100k chunks in bench/retrieval.py; 200 kept 94% of it, for about 4 ms more a query.
# With graphs of m 24 and ef_construction 128 (migration 0013) on bench/retrieval.py's
# synthetic chunks: at 100k, 100 kept 99.5% (4.0 ms a scan, 200: 6.7 ms); at a million,
# 100 kept 95.4%, 200 98.0% and 400 99.0%, at p95 5.5, 11.0 and 21.9 ms with the index in
# shared buffers. By the index's rows:
HNSW_EF_SEARCH_BY_SIZE = ((200_000, 100), (2_000_000, 200))
HNSW_EF_SEARCH_LARGEST = 400
# Knowledge bases holding this many chunks or fewer are searched by an exact scan of
# their rows, never through the graph: in an index that mostly holds other knowledge
# bases' vectors, the iterative scan would read up to 20,000 of them to find a small
# one's top 10. Above it the graph always serves (storage.chunks.semantic_search).
VECTOR_EXACT_MAX = 2_000
_WEB_SYNTAX = re.compile(r'"|\bOR\b|(^|\s)-\w')


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
