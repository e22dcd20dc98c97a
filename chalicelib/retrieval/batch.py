"""Seed 003's batch queries: several searches in one request, each answered on its own."""
from dataclasses import dataclass
from typing import Optional, Union

from chalicelib.auth import Principal
from chalicelib.errors import ServiceError
from chalicelib.retrieval.model import SearchRequest, SearchResult
from chalicelib.retrieval.search import search


@dataclass(frozen=True)
class BatchOutcome:
    """One query's answer: its result, or the error it alone met."""
    result: Optional[SearchResult] = None
    error: Optional[ServiceError] = None


def search_batch(principal: Principal, requests: list[Union[SearchRequest, ServiceError]]) -> list[BatchOutcome]:
    """In order, one after the other: a worker holds one database connection (and a second
    for hybrid search), so the searches could not run side by side on it anyway. Each
    goes through the results cache as a single search does."""
    outcomes = []
    for request in requests:
        if isinstance(request, ServiceError):
            outcomes.append(BatchOutcome(error=request))
            continue
        try:
            outcomes.append(BatchOutcome(result=search(principal, request)))
        except ServiceError as err:
            outcomes.append(BatchOutcome(error=err))
    return outcomes
