"""Search answers cached in Redis (seed 003's results cache), for limits.RESULTS_CACHE_TTL_SECONDS.

An answer is keyed by who asked (organisation and user: entry levels make two users of one
organisation read different passages), the knowledge bases with their generation counters
(chalicelib/freshness.py: any write to one of them moves its counter), the query and every
option. Redis down or slow: no cache, never a failed search."""
import hashlib
import json
import logging
from dataclasses import asdict, replace
from typing import Optional

import redis

from chalicelib import freshness, limits
from chalicelib.auth import Principal
from chalicelib.kv import redis_client
from chalicelib.retrieval.model import Passage, Scores, SearchRequest, SearchResult

logger = logging.getLogger(__name__)


def cache_key(principal: Principal, request: SearchRequest) -> Optional[str]:
    """None when the answer is not to be cached: a debug search, or no Redis."""
    if request.debug:
        return None
    counters = freshness.generations(request.knowledge_base_ids)
    if counters is None:
        return None
    asked = {"org": principal.org_id, "user": principal.user_id, "generations": counters,
             "request": asdict(request)}
    digest = hashlib.sha256(json.dumps(asked, sort_keys=True, default=str).encode("utf-8")).hexdigest()
    return f"kb:results:{digest}"


def cached_result(key: Optional[str]) -> Optional[SearchResult]:
    client = redis_client() if key else None
    if client is None:
        return None
    try:
        found = client.get(key)
    except redis.RedisError as exc:
        logger.warning("results cache unavailable: %s", exc)
        return None
    return _decoded(json.loads(found)) if found is not None else None


def store_result(key: Optional[str], result: SearchResult) -> None:
    client = redis_client() if key else None
    if client is None:
        return
    try:
        client.set(key, json.dumps(asdict(result), default=str), ex=limits.RESULTS_CACHE_TTL_SECONDS)
    except redis.RedisError as exc:
        logger.warning("results cache unavailable, answer not stored: %s", exc)


def _decoded(data: dict) -> SearchResult:
    passages = tuple(Passage(**{**p, "scores": Scores(**p["scores"])}) for p in data["passages"])
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "passages"}
    # An answer from this cache computed no embedding: its query's is as good as cached
    # (metadata.cached, which keyword search never sets).
    return replace(SearchResult(**fields, passages=passages), results_cached=True,
                   cached=fields["strategy"] != "keyword")
