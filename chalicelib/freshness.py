"""Per-knowledge-base generation counters in Redis. Every write that changes what a
search of a knowledge base can answer (chunks stored or deleted, entries, the knowledge
base's settings or deletion) bumps its counter once committed; the results cache
(chalicelib/retrieval/results_cache.py) keeps each answer with the counters it read before
searching, so a bumped counter leaves the older answers unused until they expire.

A bump Redis does not take (Redis away, a time-out) is noted in PostgreSQL instead
(kb_unmarked_changes). Cached answers are served only while the gate key is in Redis; it
lives limits.RESULTS_CACHE_GATE_SECONDS, and the search that finds it gone first moves the
counters of every noted change, then opens it again (reopen). So an answer outlives a write
by at most that long, Redis outage or not, and a cached search still reads the gate in its
one round trip, with no SQL.

Kept out of chalicelib.retrieval: the S3 trigger's function imports this without the
search and embedding code. Redis down: no counters, so no cached answers, never an error."""
import logging

import psycopg
import redis

from chalicelib import limits
from chalicelib.errors import ServiceError
from chalicelib.kv import redis_client
from chalicelib.storage import EVERY_ORGANISATION, acting_for, connection, unmarked_changes

logger = logging.getLogger(__name__)
GATE = "kb:gen:open"


def _key(kb_id: str) -> str:
    return f"kb:gen:{kb_id}"


def keys(kb_ids) -> list[str]:
    """The counters' Redis keys, then the gate's, for a reader that reads them with something
    else (a GET each in one pipeline: they lie in different hash slots)."""
    return [*(_key(k) for k in kb_ids), GATE]


def counted(values) -> tuple[int, ...]:
    """Each knowledge base's counter from the answers to keys(), the gate's left out (0 before
    its first write)."""
    return tuple(int(v or 0) for v in values[:-1])


def is_open(values) -> bool:
    """Whether the gate, read last by keys(), was there: cached answers may be served."""
    return values[-1] is not None


def bump(*kb_ids: str) -> None:
    """After the write has committed: a search that read the old counter stores its answer
    under it, where no later search looks. The counters never expire (one small key per
    knowledge base): one that vanished would read 0 again and reach answers cached at 0."""
    client = redis_client()
    if client is None or not kb_ids:
        return
    try:
        with client.pipeline(transaction=False) as pipe:
            for kb_id in kb_ids:
                pipe.incr(_key(kb_id))
            pipe.execute()
    except redis.RedisError as exc:
        logger.warning("results cache: could not mark %s changed: %s", ", ".join(kb_ids), exc)
        _note(kb_ids)


def _note(kb_ids) -> None:
    try:
        with connection() as conn:
            unmarked_changes.note(conn, kb_ids)
    except (ServiceError, psycopg.Error) as exc:
        logger.error("results cache: %s changed and neither Redis nor the database could note it (%s);"
                     " answers cached before may be served until they expire", ", ".join(kb_ids), exc)


def reopen() -> bool:
    """Moves the counter of every change noted while Redis was away, then opens the gate;
    False when Redis or the database did not answer (the gate stays shut: no cached answers)."""
    client = redis_client()
    if client is None:
        return False
    try:
        with acting_for(EVERY_ORGANISATION), connection() as conn, conn.transaction():
            unmarked = unmarked_changes.take(conn)
            with client.pipeline(transaction=False) as pipe:
                for kb_id in unmarked.kb_ids:
                    pipe.incr(_key(kb_id))
                pipe.set(GATE, "1", ex=limits.RESULTS_CACHE_GATE_SECONDS)
                pipe.execute()
            unmarked_changes.forget(conn, unmarked)  # kept, and marked again later, if this fails
    except (redis.RedisError, ServiceError, psycopg.Error) as exc:
        logger.warning("results cache stays shut: %s", exc)
        return False
    return True
