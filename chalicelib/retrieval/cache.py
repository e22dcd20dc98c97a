"""Query embeddings cached in Redis (ElastiCache). Redis being down or slow costs a
recomputed embedding and a warning, never a failed search."""
import hashlib
import json
import logging
from typing import Callable

import redis

from chalicelib.config import load_settings
from chalicelib.kv import redis_client
from chalicelib import metrics

logger = logging.getLogger(__name__)


def cache_key(provider: str, model: str, query: str) -> str:
    normalised = " ".join(query.lower().split())
    digest = hashlib.sha256(f"{provider}\x00{model}\x00{normalised}".encode("utf-8")).hexdigest()
    return f"kb:qemb:{digest}"


def cached_embedding(provider: str, model: str, query: str,
                     compute: Callable[[str], list[float]]) -> tuple[list[float], bool]:
    """(embedding, whether it came from the cache)."""
    vector, hit = _lookup_or_compute(provider, model, query, compute)
    metrics.count_lookup(hit, provider)
    return vector, hit


def _lookup_or_compute(provider: str, model: str, query: str,
                       compute: Callable[[str], list[float]]) -> tuple[list[float], bool]:
    key, client = cache_key(provider, model, query), redis_client()
    if client is not None:
        try:
            hit = client.get(key)
            if hit is not None:
                return json.loads(hit), True
        except redis.RedisError as exc:
            logger.warning("query cache unavailable, computing the embedding: %s", exc)
            client = None
    vector = compute(query)
    if client is not None:
        try:
            client.set(key, json.dumps(vector), ex=load_settings().query_cache_ttl_seconds)
        except redis.RedisError as exc:
            logger.warning("query cache unavailable, embedding not stored: %s", exc)
    return vector, False
