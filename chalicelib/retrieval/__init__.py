"""Search over a knowledge base's chunks, with the query-embedding cache."""
from chalicelib.retrieval.search import SearchRequest, search_knowledge_base

__all__ = ["SearchRequest", "search_knowledge_base"]
