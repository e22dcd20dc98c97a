"""Rate limits in Redis: a token bucket per API key and one per organisation, taken
together by one script (atomic: concurrent workers cannot both spend the last token),
and a count of bad keys per source address so guessing keys slows down.

A request is checked before any expensive work, in one Redis round trip (check): the
key's bucket is named by a hash of the presented key, and what the bucket needs to know
(the key's rate and its organisation) comes from the caller this worker remembers for the
key (auth/keys.py), or else from Redis, where it is remembered from the key's last
authentication (a second round trip); a key not seen for a while is authenticated first
and then takes its token.

Redis down or slow means no limit, with a warning: the limiter protects the service, it
must not become the reason a search fails (each worker would otherwise need a bucket of
its own, and a cold burst starts a worker per request, each with a full bucket)."""
import hashlib
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

import redis

from chalicelib import config, limits
from chalicelib.auth.principal import Principal
from chalicelib.errors import Throttled
from chalicelib.kv import redis_client

logger = logging.getLogger(__name__)

# KEYS: the key's bucket and its organisation's, in one hash slot ({org}: ElastiCache
# Serverless is a cluster, where a script may only touch keys of one slot). ARGV: the
# key's rate and burst, then the organisation's. Tokens refill at `rate` per second up
# to `burst`; a request takes one from each bucket or from neither. The clock is
# Redis's, so every worker shares one. Answers {allowed, milliseconds until a token,
# which bucket refused}.
_BUCKETS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function level(bucket, rate, burst)
  local state = redis.call('HMGET', bucket, 'tokens', 'at')
  local tokens, at = tonumber(state[1]) or burst, tonumber(state[2]) or now
  return math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
end
local rates = {tonumber(ARGV[1]), tonumber(ARGV[3])}
local bursts = {tonumber(ARGV[2]), tonumber(ARGV[4])}
local tokens = {level(KEYS[1], rates[1], bursts[1]), level(KEYS[2], rates[2], bursts[2])}
local allowed, wait, refused = 1, 0, ''
for i = 1, 2 do
  if allowed == 1 and tokens[i] < 1 then
    allowed, refused = 0, i == 1 and 'key' or 'organisation'
    wait = math.ceil((1 - tokens[i]) * 1000 / rates[i])
  end
end
for i = 1, 2 do
  if allowed == 1 then tokens[i] = tokens[i] - 1 end
  redis.call('HSET', KEYS[i], 'tokens', tostring(tokens[i]), 'at', now)
  redis.call('PEXPIRE', KEYS[i], math.ceil(bursts[i] * 1000 / rates[i]) + 1000)
end
return {allowed, wait, refused}
"""
_scripts: dict[int, "redis.commands.core.Script"] = {}
_BUCKETS_SHA = hashlib.sha1(_BUCKETS.encode("utf-8")).hexdigest()


def _unavailable(exc: Exception) -> None:
    logger.warning("rate limiter unavailable, not limiting: %s", exc)


def token_digest(token: str) -> str:
    """What names a presented key's bucket: not the hash the database stores, so what
    Redis holds cannot be matched against the keys table."""
    return hashlib.sha256(b"kb-rate\x00" + token.encode("utf-8", "surrogatepass")).hexdigest()


def _limits_key(digest: str) -> str:
    return f"kb:rate:who:{digest}"


def _buckets(digest: str, org_id: str, rate: float) -> tuple[list[str], list[float]]:
    """The script's KEYS and ARGV for this key's request."""
    burst = rate * limits.KEY_BURST_SECONDS
    # A key the operator granted more than the organisation's default (`make key RATE=`, the
    # benchmarks' keys) lifts its organisation's bucket to its own rate: the grant would mean
    # nothing otherwise.
    org_rate = max(limits.ORG_RATE_PER_SECOND, rate)
    return ([f"kb:rate:{{{org_id}}}:key:{digest}", f"kb:rate:{{{org_id}}}:org"],
            [rate, burst, org_rate, org_rate * limits.ORG_BURST_SECONDS])


def _take(client: redis.Redis, digest: str, org_id: str, rate: float) -> None:
    keys, args = _buckets(digest, org_id, rate)
    script = _scripts.get(id(client))
    if script is None:
        script = _scripts[id(client)] = client.register_script(_BUCKETS)  # EVALSHA, EVAL on NOSCRIPT
    _refuse_unless(script(keys=keys, args=args), args)


def _refuse_unless(answer, args: list[float]) -> None:
    """Throttled unless the script's answer allowed the request."""
    allowed, wait_ms, refused = answer
    rate, burst, org_rate, org_burst = args
    if not allowed:
        retry_after = max(1, -(-int(wait_ms) // 1000))
        if refused in (b"organisation", "organisation"):
            raise Throttled(f"this organisation may make {org_rate} requests per second (bursts of {org_burst})"
                            " across its keys; slow down", retry_after=retry_after)
        raise Throttled(f"this API key may make {rate:g} requests per second (bursts of {burst:g}); slow down",
                        retry_after=retry_after)


@dataclass(frozen=True)
class Checked:
    """What a request's first Redis round trip said."""
    taken: bool  # its token taken (or Redis unreachable: not limited); False: take it once authenticated
    keys_generation: Optional[str]  # keys.GENERATION_KEY's value ("" unset); None when Redis did not answer
    ahead: dict[str, Optional[bytes]] = field(default_factory=dict)  # keys the view will read -> values (None: absent)


def check(token: Optional[str], source: Optional[str], known: Optional[Principal],
          ahead: Sequence[str] = ()) -> Checked:
    """Everything a request asks Redis before its view, in one round trip: whether its address
    sent too many bad keys this minute, the keys' generation (auth/keys.py), and, when this
    worker remembers the key's caller (known), its token from its buckets; Throttled when
    refused. Without a known caller, the key's limits remembered in Redis (take's) are read
    in the same round trip and its token taken in a second one. `ahead`: keys the view will
    read (a GET each), read in the same round trip; Checked.ahead holds them only when the
    request was allowed."""
    client = redis_client(limits.RATE_LIMIT_REDIS_TIMEOUT_SECONDS)
    if client is None:
        return Checked(taken=False, keys_generation=None)
    from chalicelib.auth.keys import GENERATION_KEY

    digest = token_digest(token) if token else None
    pipe = client.pipeline(transaction=False)
    now = time.time()
    if source:  # two GETs, not an MGET: the two minutes' keys lie in different hash slots
        for key in _bad_key_windows(source, now):
            pipe.get(key)
    pipe.get(GENERATION_KEY)
    if digest and known is not None:
        keys, args = _buckets(digest, known.org_id, known.rate_per_second or config.key_rate_per_second())
        pipe.evalsha(_BUCKETS_SHA, len(keys), *keys, *args)
    elif digest:
        pipe.hmget(_limits_key(digest), "org", "rate")
    for key in ahead:
        pipe.get(key)
    try:
        answers = pipe.execute(raise_on_error=False)
    except redis.RedisError as exc:
        _unavailable(exc)
        return Checked(taken=True, keys_generation=None)
    # What a view reads ahead is no part of the check: a key that failed is left for the view to read.
    answers, ahead_answers = answers[:len(answers) - len(ahead)], answers[len(answers) - len(ahead):]
    read = {key: value for key, value in zip(ahead, ahead_answers) if not isinstance(value, redis.RedisError)}
    failed = next((a for a in answers if isinstance(a, redis.RedisError) and not _no_script(a)), None)
    if failed is not None:
        _unavailable(failed)
        return Checked(taken=True, keys_generation=None)
    if source:
        _refuse_if_over(int(answers.pop(0) or 0), int(answers.pop(0) or 0), now)
    generation = (answers.pop(0) or b"").decode()
    if not digest:
        return Checked(taken=False, keys_generation=generation, ahead=read)
    try:
        if known is not None:
            answer = answers[0]
            if _no_script(answer):  # a Redis that restarted or flushed its scripts: loaded again, once
                client.script_load(_BUCKETS)
                answer = client.evalsha(_BUCKETS_SHA, len(keys), *keys, *args)
            _refuse_unless(answer, args)
            return Checked(taken=True, keys_generation=generation, ahead=read)
        org, rate = answers[0]
        if org is None or rate is None:
            return Checked(taken=False, keys_generation=generation, ahead=read)
        _take(client, digest, org.decode(), float(rate))
    except redis.RedisError as exc:
        _unavailable(exc)
    return Checked(taken=True, keys_generation=generation, ahead=read)


def _no_script(answer) -> bool:
    return isinstance(answer, redis.exceptions.NoScriptError)


def take(principal: Principal, token: Optional[str] = None) -> None:
    """One request of this key; Throttled (429, Retry-After) when its bucket or its
    organisation's is empty. With the presented key, its limits are remembered so its
    next requests are checked before authentication."""
    client = redis_client(limits.RATE_LIMIT_REDIS_TIMEOUT_SECONDS)
    if client is None:
        return
    rate = principal.rate_per_second or config.key_rate_per_second()
    digest = token_digest(token) if token else f"id:{principal.key_id or principal.user_id}"
    try:
        if token:  # remembered for a while: a key's changed rate applies within that time
            client.pipeline().hset(_limits_key(digest), mapping={"org": principal.org_id, "rate": rate}).expire(
                _limits_key(digest), limits.KEY_LIMITS_REMEMBERED_SECONDS).execute()
        _take(client, digest, principal.org_id, rate)
    except redis.RedisError as exc:
        _unavailable(exc)


def _bad_key_windows(source: str, now: float) -> tuple[str, str]:
    """This minute's counter of the address's bad keys, and the last minute's."""
    window = int(now) // 60
    return f"kb:badkeys:{source}:{window}", f"kb:badkeys:{source}:{window - 1}"


def bad_keys_seen(current: int, previous: int, now: float) -> tuple[float, int]:
    """The address's bad keys in the sliding minute before now, estimated from this minute's
    count and the last one's share still inside it; and the seconds until that estimate falls
    below the limit. A fixed minute alone let 20 guesses at 12:00:59 and 20 more at 12:01:00
    through (and made the e2e test of this limit fail when its guesses crossed a minute)."""
    limit = config.bad_keys_per_minute()
    into = now % 60
    seen = current + previous * (60 - into) / 60
    if current >= limit:  # past this minute's end, this minute's count is the one that slides out
        wait = (60 - into) + 60 * (1 - limit / current) if current else 60 - into
    elif previous:
        wait = 60 * (1 - (limit - current) / previous) - into
    else:
        wait = 0
    return seen, max(1, math.floor(wait) + 1)  # at `wait` itself the estimate is the limit: still refused


def _refuse_if_over(current: int, previous: int, now: float) -> None:
    seen, wait = bad_keys_seen(current, previous, now)
    if seen >= config.bad_keys_per_minute():
        raise Throttled(f"too many requests with keys that are not valid from this address;"
                        f" try again in {wait} s", retry_after=wait)


def count_bad_key(source: Optional[str]) -> None:
    client = redis_client(limits.RATE_LIMIT_REDIS_TIMEOUT_SECONDS)
    if client is None or not source:
        return
    key, _ = _bad_key_windows(source, time.time())
    try:
        client.pipeline().incr(key).expire(key, 120).execute()
    except redis.RedisError as exc:
        _unavailable(exc)
