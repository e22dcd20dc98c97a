"""Search over knowledge bases' chunks, with the query-embedding cache and context packing."""
from chalicelib.retrieval.search import (PRIORITIES, STRATEGIES, KnowledgeBaseNotFound, SearchRequest,
                                         search)

__all__ = ["PRIORITIES", "STRATEGIES", "KnowledgeBaseNotFound", "SearchRequest", "search"]
