"""Redis (ElastiCache): one client per worker, with short timeouts, because everything
kept there (query embeddings, rate-limit buckets) is worth less than a slow answer."""
from typing import Optional

import redis

from chalicelib.config import load_settings

_clients: dict[str, redis.Redis] = {}


def redis_client() -> Optional[redis.Redis]:
    """None when no Redis is configured."""
    url = load_settings().redis_url
    if not url:
        return None
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, socket_timeout=0.25, socket_connect_timeout=0.25)
    return _clients[url]
