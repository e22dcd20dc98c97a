"""Redis (ElastiCache): one client per worker, with short timeouts, because everything
kept there (query embeddings, rate-limit buckets) is worth less than a slow answer."""
from typing import Optional

import redis

from chalicelib.config import redis_url

_clients: dict[tuple[str, float], redis.Redis] = {}


def redis_client(timeout: float = 0.25) -> Optional[redis.Redis]:
    """None when no Redis is configured. `timeout` bounds connecting and each answer."""
    url = redis_url()
    if not url:
        return None
    if (url, timeout) not in _clients:
        _clients[(url, timeout)] = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    return _clients[(url, timeout)]
