"""Per-knowledge-base generation counters in Redis. Every write that changes what a
search of a knowledge base can answer (chunks stored or deleted, entries, the knowledge
base's settings or deletion) bumps its counter once committed; the results cache
(chalicelib/retrieval/results_cache.py) keeps each answer with the counters it read before
searching, so a bumped counter leaves the older answers unused until they expire.

Kept out of chalicelib.retrieval: the S3 trigger's function imports this without the
search and embedding code. Redis down: no counters, so no cached answers, never an error."""
import logging

import redis

from chalicelib.kv import redis_client

logger = logging.getLogger(__name__)


def _key(kb_id: str) -> str:
    return f"kb:gen:{kb_id}"


def keys(kb_ids) -> list[str]:
    """The counters' Redis keys, for a reader that reads them with something else (a GET each
    in one pipeline: they lie in different hash slots)."""
    return [_key(k) for k in kb_ids]


def counted(values) -> tuple[int, ...]:
    """Each knowledge base's counter from the answers to keys() (0 before its first write)."""
    return tuple(int(v or 0) for v in values)


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
        # The cached answers of these knowledge bases may be stale for up to their TTL.
        logger.warning("results cache: could not mark %s changed: %s", ", ".join(kb_ids), exc)
