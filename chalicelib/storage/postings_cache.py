"""What a worker keeps of BM25's decoded blocks between searches (PostingsCache, CACHE) and
what workers share through Redis (SharedBlocks, SHARED), both under a knowledge base's
blocks version; storage/term_blocks.py reads and fills them."""
import logging
import threading
from collections import OrderedDict
from typing import Hashable, Optional

import redis

from chalicelib import limits
from chalicelib.kv import redis_client
from chalicelib.postings import Postings, narrowest
from chalicelib.storage import db

logger = logging.getLogger(__name__)


class PostingsCache:
    """What a worker keeps between searches: knowledge bases' terms' decoded blocks (never
    the tail, which every search reads in its own snapshot) and directories, under their
    knowledge base's blocks version (migration 0029), which a compaction or rebuild moves on,
    so an entry is read only by a search whose snapshot holds exactly those blocks; and only
    once the search's own statistics, read under row-level security, gave it that version.
    Least recently used out first past `capacity` bytes. Frequencies and lengths are kept in
    the fewest bytes and widened to float64 as read; arrays kept are read-only. Decoding a
    common term's blocks is most of a keyword search's time; a worker's first search of a
    term reads it as before (the benchmark report has the figures)."""

    def __init__(self, capacity: int):
        self.capacity, self.size = capacity, 0
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable):
        """What was kept (postings narrow: postings.widened), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, value) -> None:
        if isinstance(value, Postings):
            value = Postings(value.ids, narrowest(value.tfs), narrowest(value.dls))
        arrays = [getattr(value, f) for f in value.__dataclass_fields__]
        for a in arrays:
            if a.size:  # never the shared empty arrays of EMPTY
                a.flags.writeable = False
        size = sum(a.nbytes for a in arrays) + 200
        if size > self.capacity:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            self.size += size - (old[1] if old is not None else 0)
            self._entries[key] = (value, size)
            while self.size > self.capacity:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.size -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.size = 0



CACHE = PostingsCache(limits.BM25_POSTINGS_CACHE_BYTES)
# Versions come from the database's own sequence: another database (a switchover, a restore,
# tests) can give the same one again.
db.on_new_connection(lambda: CACHE.clear())


class SharedBlocks:
    """Common terms' decoded postings and directories, shared by every worker through Redis
    (ElastiCache), so a worker's first searches read what others decoded instead of SQL's
    blocks: the same entries as CACHE's, under the same knowledge base and blocks version
    (migration 0032 makes versions random, so no other database gives the same one), read
    only by a search whose snapshot gave it that version. Redis unreachable or a value that
    does not decode is a miss: the blocks are read from SQL. The first search of a term
    after a compaction pays for sharing it; the others save decoding it."""

    def __init__(self, min_postings: int, seconds: int):
        self.min_postings, self.seconds = min_postings, seconds

    def get(self, keys: list[str]) -> list[Optional[bytes]]:
        client = redis_client()
        if client is None or not keys:
            return [None] * len(keys)
        try:  # a GET each, in one round trip: the keys lie in different hash slots (a cluster)
            with client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.get(key)
                return pipe.execute()
        except redis.RedisError as exc:
            logger.warning("shared BM25 blocks unavailable, reading SQL's: %s", exc)
            return [None] * len(keys)

    def put(self, values: dict[str, bytes]) -> None:
        client = redis_client()
        if client is None or not values:
            return
        try:
            with client.pipeline(transaction=False) as pipe:
                for key, value in values.items():
                    pipe.set(key, value, ex=self.seconds)
                pipe.execute()
        except redis.RedisError as exc:
            logger.warning("shared BM25 blocks not stored: %s", exc)


SHARED = SharedBlocks(limits.BM25_SHARED_MIN_POSTINGS, limits.BM25_SHARED_SECONDS)


def shared_key(kind: str, kb_id: str, version: int, term: str) -> str:
    """Named by postings.to_shared's layout too (1), so a deployment that changes it reads none of the old."""
    return f"kb:bm25:1:{kb_id}:{version}:{kind}:{term}"

