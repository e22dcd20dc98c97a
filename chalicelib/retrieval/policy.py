"""How a query becomes SQL: the full-text query and the HNSW candidate list. Storage
runs what this decides."""
import re
from typing import Optional

from chalicelib.storage.chunks import TextQuery

# HNSW's candidate list: 40 (pgvector's default) lost a quarter of the true top 10
# at 100k chunks in bench/retrieval.py; 200 kept 94% of it, for about 4 ms more a query.
HNSW_EF_SEARCH_MIN = 200
_WEB_SYNTAX = re.compile(r'"|\bOR\b|(^|\s)-\w')


def ef_search_for(top_k: int) -> int:
    return min(1000, max(HNSW_EF_SEARCH_MIN, top_k * 4))


def text_query(query: str) -> Optional[TextQuery]:
    """Natural-language questions rarely contain every word of the passage that
    answers them, so a plain query matches any of its words and the rank sorts it
    out; a query written in web-search syntax ("phrase", OR, -word) keeps it.
    None when nothing in the query could match a full-text index."""
    if _WEB_SYNTAX.search(query):
        return TextQuery("websearch_to_tsquery", query)
    words = re.findall(r"[^\W_]+", query)
    if not words:
        return None
    return TextQuery("to_tsquery", " | ".join(words))
