"""Search answers cached in Redis (seed 003's results cache), for limits.RESULTS_CACHE_TTL_SECONDS.

An answer is keyed by who asked (organisation and user: entry levels make two users of one
organisation read different passages), the knowledge bases, the query and every option, and
kept with the knowledge bases' generation counters it was computed under (chalicelib/freshness.py:
any write to one of them moves its counter): it answers only while they are still current.
Redis down or slow: no cache, never a failed search."""
import hashlib
import json
import logging
from dataclasses import dataclass, is_dataclass, replace
from typing import Optional

import redis

from chalicelib import freshness, kv, limits
from chalicelib.auth import Principal
from chalicelib.kv import redis_client
from chalicelib.retrieval.model import AlsoIn, Passage, Scores, SearchRequest, SearchResult

logger = logging.getLogger(__name__)
# Part of every key: moved when a passage gains fields, so no answer stored before (without
# them) is read back by a worker that answers them.
ANSWER_SHAPE = 2


@dataclass(frozen=True)
class Lookup:
    """One read of the cache: where an answer to this request lives, the counters read with
    it (which an answer stored now is kept under), and the answer found, if still current."""
    key: str
    generations: tuple[int, ...]
    found: Optional[SearchResult]


def lookup(principal: Principal, request: SearchRequest) -> Optional[Lookup]:
    """None when the answer is not to be cached: a debug search, no Redis, or a gate that
    could not be opened (freshness.reopen). The counters, the gate and the stored answer come
    in one round trip: the answer is kept with the counters it was computed under, and one
    stored under others is a miss (a round trip is a large share of a cached search's time,
    bench/api_overhead.py). No round trip of its own when its request read them ahead
    (kv.read_ahead)."""
    client = redis_client() if not request.debug else None
    if client is None:
        return None
    *counter_keys, key = keys_to_read(principal, request)
    read = kv.read_ahead([*counter_keys, key])
    try:
        if read is None:
            read = _read(client, counter_keys, key)
        if not freshness.is_open(read[:-1]):
            # Changes Redis missed may be noted in the database: marked before anything
            # cached is served again, then read anew.
            if not freshness.reopen():
                return None
            read = _read(client, counter_keys, key)
    except redis.RedisError as exc:
        logger.warning("results cache unavailable: %s", exc)
        return None
    *counters, found = read
    generations = freshness.counted(counters)
    stored = json.loads(found) if found is not None else None
    current = stored is not None and tuple(stored["generations"]) == generations
    return Lookup(key=key, generations=generations, found=_decoded(stored["result"]) if current else None)


def _read(client, counter_keys, key) -> list:
    # A GET a counter, not one MGET: on a cluster (ElastiCache Serverless) the knowledge
    # bases' counters lie in different hash slots, where an MGET fails with CROSSSLOT.
    with client.pipeline(transaction=False) as pipe:
        for counter in counter_keys:
            pipe.get(counter)
        return pipe.get(key).execute()


def keys_to_read(principal: Principal, request: SearchRequest) -> tuple[str, ...]:
    """What lookup() reads: the knowledge bases' counters and the gate, then the answer's key; none for a
    search that is not cached."""
    if request.debug:
        return ()
    asked = {"org": principal.org_id, "user": principal.user_id, "request": request, "shape": ANSWER_SHAPE}
    digest = hashlib.sha256(json.dumps(asked, sort_keys=True, default=_plain).encode("utf-8")).hexdigest()
    return (*freshness.keys(request.knowledge_base_ids), f"kb:answer:{digest}")


def store_result(read: Optional[Lookup], result: SearchResult) -> None:
    """Under the counters read before the search: a write since has moved one, so the answer
    is a miss from then on (never stale) and the next search stores the new one."""
    client = redis_client() if read is not None else None
    if client is None:
        return
    value = {"generations": read.generations, "result": result}
    try:
        client.set(read.key, json.dumps(value, default=_plain), ex=limits.RESULTS_CACHE_TTL_SECONDS)
    except redis.RedisError as exc:
        logger.warning("results cache unavailable, answer not stored: %s", exc)


def _plain(value):
    """json.dumps's hook: a record as its fields, anything else as text. The JSON asdict()
    gives, written without asdict's deep copy first (a few times slower), which every search
    this cache misses would pay."""
    return value.__dict__ if is_dataclass(value) else str(value)


def _decoded(data: dict) -> SearchResult:
    passages = tuple(Passage(**{**p, "scores": Scores(**p["scores"]),
                                "also_in": tuple(AlsoIn(**a) for a in p.get("also_in", ()))})
                     for p in data["passages"])
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "passages"}
    # An answer from this cache computed no embedding: its query's is as good as cached
    # (metadata.cached, which keyword search never sets).
    return replace(SearchResult(**fields, passages=passages), results_cached=True,
                   cached=fields["strategy"] != "keyword")
