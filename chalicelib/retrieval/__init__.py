"""Search over knowledge bases' chunks, with the query-embedding cache and context packing."""
from chalicelib.retrieval.model import PRIORITIES, STRATEGIES, Passage, SearchRequest, SearchResult
from chalicelib.retrieval.request import parse_multi_search_request, parse_search_request
from chalicelib.retrieval.search import search

__all__ = ["PRIORITIES", "STRATEGIES", "Passage", "SearchRequest", "SearchResult", "parse_multi_search_request",
           "parse_search_request", "search"]
