"""Redis (ElastiCache): one client per worker, with short timeouts, because everything
kept there (query embeddings, rate-limit buckets) is worth less than a slow answer."""
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Optional, Sequence

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


# What this request read from Redis before its view ran (http.authenticated reads the keys a
# view will read in the request's first round trip): key -> value, None where absent.
_read_ahead: ContextVar[Optional[dict[str, Optional[bytes]]]] = ContextVar("kb_read_ahead", default=None)
# The keys' generation (auth/keys.py) the same round trip read: what the caller was checked under.
_keys_generation: ContextVar[Optional[str]] = ContextVar("kb_keys_generation", default=None)


@contextmanager
def reading_ahead(values: dict[str, Optional[bytes]], keys_generation: Optional[str] = None) -> Iterator[None]:
    """While the view runs: the values its request read ahead, and the keys' generation it
    read (None when Redis did not answer)."""
    token, generation = _read_ahead.set(dict(values)), _keys_generation.set(keys_generation)
    try:
        yield
    finally:
        _read_ahead.reset(token)
        _keys_generation.reset(generation)


def keys_generation() -> Optional[str]:
    """The keys' generation this request read in its first round trip, handed out once (a
    batch's later searches come after it, and read the database); None outside such a request
    (direct invokes, the pipeline), when Redis did not answer, or once handed out."""
    generation = _keys_generation.get()
    _keys_generation.set(None)
    return generation


def read_ahead(keys: Sequence[str]) -> Optional[list[Optional[bytes]]]:
    """These keys' values if this request read every one of them ahead, else None (read them
    now). Each is handed out once: a second reader in the same request reads Redis again."""
    values = _read_ahead.get()
    if not values or any(k not in values for k in keys):
        return None
    handed = {k: values.pop(k) for k in dict.fromkeys(keys)}
    return [handed[k] for k in keys]
