"""Seed 002's worker query over every knowledge base the caller may read in its
organisation. One search over them all, as /search does; when a knowledge base's embedding
provider fails (not set up in this deployment, not answering, answering nonsense), the
knowledge bases of the other providers still answer, so one broken knowledge base does not
silence the worker's tool. The failure is logged; it is raised only when every provider fails."""
import logging
from dataclasses import replace

from chalicelib.auth import Principal
from chalicelib.errors import BadUpstream, Unavailable
from chalicelib.retrieval.model import Passage, SearchRequest
from chalicelib.retrieval.search import search
from chalicelib.storage import connection, knowledge_bases

logger = logging.getLogger(__name__)


def readable_kb_ids(principal: Principal) -> dict[tuple, list[str]]:
    """The ids of the readable knowledge bases of the caller's organisation, by embedding."""
    with connection() as conn:
        rows = knowledge_bases.readable_in_own_org(conn, principal)
    groups: dict[tuple, list[str]] = {}
    for row in rows:
        groups.setdefault((row["embedding_provider"], row["embedding_model"], row["embedding_dim"]), []).append(row["id"])
    return groups


def search_readable(principal: Principal, request: SearchRequest, groups: dict[tuple, list[str]]) -> list[Passage]:
    """The passages of a search over every group's knowledge bases, best first."""
    every = tuple(k for ids in groups.values() for k in ids)
    try:
        return list(search(principal, replace(request, knowledge_base_ids=every)).passages)
    except (BadUpstream, Unavailable):
        if len(groups) == 1:
            raise
    found, failures = [], []
    for (provider, model, _), ids in groups.items():
        try:
            found += search(principal, replace(request, knowledge_base_ids=tuple(ids))).passages
        except (BadUpstream, Unavailable) as err:
            logger.warning("worker query: left out %d knowledge bases of %s/%s: %s", len(ids), provider, model,
                           err.message)
            failures.append(err)
    if len(failures) == len(groups):
        raise failures[0]
    found.sort(key=lambda p: p.similarity, reverse=True)  # as search() orders the groups' candidates
    return [replace(p, rank=i + 1) for i, p in enumerate(found[: request.top_k])]
