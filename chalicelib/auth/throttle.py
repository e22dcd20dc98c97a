"""Rate limits in Redis: a token bucket per API key, and a count of bad keys per source
address so guessing keys slows down. Redis down means no limit (and a warning): the
limiter protects the service, it must not become the reason a search fails."""
import logging
import time
from typing import Optional

import redis

from chalicelib import limits
from chalicelib.config import load_settings
from chalicelib.auth.principal import Principal
from chalicelib.errors import Throttled
from chalicelib.kv import redis_client

logger = logging.getLogger(__name__)

# Tokens refill at `rate` per second up to `burst`; a request takes one. The clock is
# Redis's, so every worker shares one. Answers {allowed, milliseconds until a token}.
_BUCKET = """
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(state[1]) or burst, tonumber(state[2]) or now
tokens = math.min(burst, tokens + (now - at) * rate / 1000)
local allowed, wait = 0, 0
if tokens >= 1 then
  tokens, allowed = tokens - 1, 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait}
"""


def _unavailable(exc: Exception) -> None:
    logger.warning("rate limiter unavailable, not limiting: %s", exc)


def take(principal: Principal) -> None:
    """One request of this key; Throttled (429, Retry-After) when its bucket is empty."""
    client = redis_client()
    if client is None:
        return
    rate = principal.rate_per_second or load_settings().key_rate_per_second
    burst = rate * limits.KEY_BURST_SECONDS
    try:
        allowed, wait_ms = client.eval(_BUCKET, 1, f"kb:rate:{principal.key_id or principal.user_id}", rate, burst)
    except redis.RedisError as exc:
        return _unavailable(exc)
    if not allowed:
        raise Throttled(f"this API key may make {rate} requests per second (bursts of {burst}); slow down",
                        retry_after=max(1, -(-int(wait_ms) // 1000)))


def _bad_key_window(source: str) -> tuple[str, int]:
    window = int(time.time()) // 60
    return f"kb:badkeys:{source}:{window}", 60 - int(time.time()) % 60


def refuse_if_guessing(source: Optional[str]) -> None:
    """Throttled when this address sent too many bad keys this minute."""
    client = redis_client()
    if client is None or not source:
        return
    key, left = _bad_key_window(source)
    try:
        seen = int(client.get(key) or 0)
    except redis.RedisError as exc:
        return _unavailable(exc)
    if seen >= load_settings().bad_keys_per_minute:
        raise Throttled(f"too many requests with keys that are not valid from this address;"
                        f" try again in {left} s", retry_after=left)


def count_bad_key(source: Optional[str]) -> None:
    client = redis_client()
    if client is None or not source:
        return
    key, _ = _bad_key_window(source)
    try:
        client.pipeline().incr(key).expire(key, 120).execute()
    except redis.RedisError as exc:
        _unavailable(exc)
