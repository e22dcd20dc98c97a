"""term_blocks, chunk_terms, kb_terms, kb_text_stats: what BM25 needs (migrations 0011,
0026, 0027 and 0028). Triggers on chunks write them, and a compaction folds the tail (chunk_terms)
into the blocks; the service reads a question's terms, their statistics and postings.
chalicelib/retrieval/bm25.py owns what they mean."""
import logging
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Hashable, Mapping, Optional, Sequence

import numpy as np
import psycopg
import redis

from chalicelib import limits
from chalicelib.kv import redis_client
from chalicelib.storage import db

logger = logging.getLogger(__name__)
# Postings a block holds (migration 0026's kb_bm25_rebuild default; tests/unit/test_bm25.py
# checks they agree): a block of 128 stays inline in its row, and smaller blocks bound a
# chunk's score more closely where a common term is read only where it could count.
BLOCK = 128


@dataclass(frozen=True)
class TermStatistics:
    """Over the knowledge bases searched together: chunks, their summed length, and per
    term (those no chunk holds are left out) how many chunks hold it and the highest
    frequency and shortest chunk it occurs with (together, its bound); and each knowledge
    base's blocks version (migration 0029), which decoded blocks are kept under."""
    chunks: int
    length: float
    document_frequency: dict[str, int]
    extremes: dict[str, tuple[float, float]]
    blocks_versions: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Postings:
    """A term's postings: chunk ids ascending, with each one's term frequency and length."""
    ids: np.ndarray
    tfs: np.ndarray
    dls: np.ndarray




def query_terms(conn: psycopg.Connection, text: str) -> list[str]:
    """The question's terms as chunks' tsv holds them (stemmed, no stop words), in order."""
    rows = conn.execute("SELECT lexeme FROM unnest(to_tsvector('english', %s)) ORDER BY positions[1]",
                        (text,)).fetchall()
    return [r["lexeme"] for r in rows]


def chunk_count(conn: psycopg.Connection, kb_ids: list[str]) -> int:
    """How many chunks the knowledge bases hold (kept by the triggers, one row each)."""
    return int(conn.execute("SELECT coalesce(sum(chunks), 0) AS n FROM kb_text_stats WHERE kb_id = ANY(%s)",
                            (kb_ids,)).fetchone()["n"])


def statistics(conn: psycopg.Connection, kb_ids: list[str], terms: list[str]) -> TermStatistics:
    sizes = conn.execute("SELECT coalesce(sum(chunks), 0) AS chunks, coalesce(sum(length), 0) AS length,"
                         "       coalesce(array_agg(kb_id), '{}') AS kbs, coalesce(array_agg(blocks_version), '{}') AS versions,"
                         "       current_setting('transaction_isolation') AS isolation"
                         "  FROM kb_text_stats WHERE kb_id = ANY(%s)", (kb_ids,)).fetchone()
    frequencies = conn.execute(
        "SELECT term, sum(df) AS df, max(max_tf) AS max_tf, min(min_dl) AS min_dl"
        "  FROM kb_terms WHERE kb_id = ANY(%s) AND term = ANY(%s) GROUP BY term HAVING sum(df) > 0",
        (kb_ids, terms)).fetchall()
    return TermStatistics(chunks=int(sizes["chunks"]), length=float(sizes["length"]),
                          document_frequency={r["term"]: int(r["df"]) for r in frequencies},
                          extremes={r["term"]: (float(r["max_tf"]), float(r["min_dl"])) for r in frequencies},
                          blocks_versions=_versions(sizes))


def _versions(sizes: dict) -> dict[str, int]:
    """Each knowledge base's blocks version, only where every statement of the transaction
    reads one snapshot: under read committed (a caller's own transaction) a compaction could
    commit between the version's read and the blocks' or the tail's."""
    if sizes["isolation"] not in ("repeatable read", "serializable"):
        return {}
    return dict(zip(sizes["kbs"], map(int, sizes["versions"])))


@dataclass(frozen=True)
class Directory:
    """A term's blocks, by range: first and last chunk id, and the highest frequency and
    shortest chunk in each (its bound); ordered by first id."""
    first: np.ndarray
    last: np.ndarray
    max_tf: np.ndarray
    min_dl: np.ndarray


# A term's blocks joined into one value per column, in id order: one row (and a few numpy
# passes) a term instead of one a block; at a million chunks a question's 5,700 blocks cost
# 13 ms of frombuffer calls and row handling. Blocks are packed (migration 0027): each
# id as its difference from the one before, each column in its own width a block.
_JOINED = ("string_agg(int8send(first_id), ''::bytea ORDER BY first_id) AS firsts,"
           " string_agg(int2send(n::smallint) || int2send(id_bytes) || int2send(tf_bytes) || int2send(dl_bytes),"
           "            ''::bytea ORDER BY first_id) AS layout,"
           " string_agg(ids, ''::bytea ORDER BY first_id) AS ids, string_agg(tfs, ''::bytea ORDER BY first_id) AS tfs,"
           " string_agg(dls, ''::bytea ORDER BY first_id) AS dls")
# Per block: postings, then the bytes an id step, a frequency and a length take.
_LAYOUT = np.dtype([("n", ">i2"), ("id", ">i2"), ("tf", ">i2"), ("dl", ">i2")])


def _values(data: bytes, counts: np.ndarray, widths: np.ndarray, dtype=np.int64) -> np.ndarray:
    """Big-endian unsigned values, each block's `counts` of them in its own width in bytes."""
    if len(widths) and (widths == widths[0]).all():  # the common case: one width throughout
        width = int(widths[0])
        return np.frombuffer(data, dtype=">i8" if width == 8 else f">u{width}").astype(dtype)
    # Every value's first byte, then its next ones for the values that have them, by index:
    # at a million chunks half the 'dose' blocks' ids take 2 bytes, and few blocks' lengths
    # do ('patient': 0.45 ms against 0.98 with np.where over every value, 2-4 times less
    # than a boolean mask's assignment).
    raw = np.frombuffer(data + bytes(8), dtype=np.uint8)
    each = np.repeat(widths.astype(np.int64), counts)
    at = np.cumsum(each) - each
    out = raw[at].astype(np.int64)
    for byte in range(1, int(widths.max(initial=0))):
        wide = np.flatnonzero(each > byte)
        out[wide] = (out[wide] << 8) | raw[at[wide] + byte]
    return out.astype(dtype, copy=False)


def unpacked(firsts: bytes, layout: bytes, ids: bytes, tfs: bytes, dls: bytes) -> Postings:
    """Blocks joined by _JOINED (one knowledge base's, in id order) as postings."""
    first = np.frombuffer(firsts, dtype=">i8").astype(np.int64)
    blocks = np.frombuffer(layout, dtype=_LAYOUT)
    counts = blocks["n"].astype(np.int64)
    starts = np.cumsum(counts) - counts  # a block's first step is 0: its id is first_id
    whole = blocks["id"] == 0  # 0026's layout, not yet repacked (0028): each id whole, in 8 bytes
    values = _values(ids, counts, np.where(whole, 8, blocks["id"]))
    if whole.any():
        stepped = np.diff(values, prepend=0)
        stepped[starts] = 0
        values = np.where(np.repeat(whole, counts), stepped, values)
    steps = np.cumsum(values)
    return Postings(np.repeat(first - steps[starts], counts) + steps,
                    _values(tfs, counts, blocks["tf"], np.float64), _values(dls, counts, blocks["dl"], np.float64))


def _directories(rows: list[dict]) -> dict[tuple[str, str], Directory]:
    """Directories by knowledge base and term (a row each, as _read_directory joins them)."""
    return {(r["kb_id"], r["term"]): Directory(
        np.frombuffer(r["first"], dtype=">i8").astype(np.int64), np.frombuffer(r["last"], dtype=">i8").astype(np.int64),
        np.frombuffer(r["max_tf"], dtype=">f4").astype(np.float64), np.frombuffer(r["min_dl"], dtype=">f4").astype(np.float64))
        for r in rows}


def _decoded(rows: list[dict]) -> dict[tuple[str, str], Postings]:
    """Joined blocks by knowledge base and term (a row each)."""
    return {(b["kb_id"], b["term"]): unpacked(b["firsts"], b["layout"], b["ids"], b["tfs"], b["dls"]) for b in rows}


class PostingsCache:
    """What a worker keeps between searches: knowledge bases' terms' decoded blocks (never
    the tail, which every search reads in its own snapshot) and directories, under their
    knowledge base's blocks version (migration 0029), which a compaction or rebuild moves on,
    so an entry is read only by a search whose snapshot holds exactly those blocks; and only
    once the search's own statistics, read under row-level security, gave it that version.
    Least recently used out first past `capacity` bytes. Frequencies and lengths are kept in
    the fewest bytes and widened to float64 as read; arrays kept are read-only.

    At a million chunks, 60 questions asked three times, the first pass untimed (search() as
    kb_app, A/B alternating with an empty cache in one process, the same answers): keyword
    p50 22.5 -> 12.3 and p95 34.7 -> 17.3 ms, hybrid (embedding cached) p95 43.1 -> 27.0 ms,
    with 66 MB kept (494 terms). A worker's first search of a term reads it as before."""

    def __init__(self, capacity: int):
        self.capacity, self.size = capacity, 0
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable):
        """What was kept (postings narrow: _widened), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, value) -> None:
        if isinstance(value, Postings):
            value = Postings(value.ids, _narrowest(value.tfs), _narrowest(value.dls))
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


def _widened(p: Postings) -> Postings:
    """Kept postings as bm25 reads them: frequencies and lengths in float64."""
    return Postings(p.ids, p.tfs.astype(np.float64), p.dls.astype(np.float64))


def _narrowest(values: np.ndarray) -> np.ndarray:
    """Whole numbers (frequencies, lengths) in the fewest bytes that hold them."""
    return values.astype(_narrowest_type(values))


def _narrowest_type(values: np.ndarray) -> np.dtype:
    top = float(values.max()) if len(values) else 0.0
    return np.dtype(next((d for d in (np.uint8, np.uint16, np.uint32) if top <= np.iinfo(d).max), np.float64))


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
    does not decode is a miss: the blocks are read from SQL.

    At a million chunks, as kb_app, a worker that has kept nothing, 60 questions, the two
    alternating in one process (4-6 rounds, two runs): keyword p50 / p95 29.7 / 44.7 and
    32.5 / 48.7 ms with Redis empty, 16.8 / 25.4 and 20.3 / 29.6 with what earlier searches
    shared. The first search of a term after a compaction pays for sharing it: with Redis
    emptied before every question, 33.7 / 51.2 against 30.0 / 45.6 ms with nothing shared."""

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


def _shared_key(kind: str, kb_id: str, version: int, term: str) -> str:
    """Named by _to_shared's layout too (1), so a deployment that changes it reads none of the old."""
    return f"kb:bm25:1:{kb_id}:{version}:{kind}:{term}"


# A term's postings as shared: first id, count and the three arrays' dtypes, then the ids as
# steps from the one before (2 bytes each where every step fits), frequencies and lengths in
# their fewest bytes, little-endian: ~5 bytes a posting, read back as views but for the ids.
_SHARED_HEAD = struct.Struct("<qq3s3s3s")


def _to_shared(p: Postings) -> memoryview:
    """Written straight into one buffer: for a term of 372,195 postings 1.6 ms, where joining
    each array's bytes cost 2.9."""
    n, first = len(p.ids), int(p.ids[0]) if len(p.ids) else 0
    steps = np.diff(p.ids)
    top = int(steps.max(initial=0))
    dtypes = [np.dtype("<u2" if top < 1 << 16 else "<u4" if top < 1 << 32 else "<i8"),
              *(_narrowest_type(a).newbyteorder("<") for a in (p.tfs, p.dls))]
    out = bytearray(_SHARED_HEAD.size + n * sum(d.itemsize for d in dtypes))
    _SHARED_HEAD.pack_into(out, 0, first, n, *(d.str.encode() for d in dtypes))
    at = _SHARED_HEAD.size
    for dtype, values in zip(dtypes, (steps, p.tfs, p.dls)):
        view = np.frombuffer(out, dtype, n, at)
        if values is steps:
            view[:1] = 0  # the first id is the head's
            view[1:] = values
        else:
            view[:] = values
        at += view.nbytes
    return memoryview(out)


def _from_shared(data: bytes) -> Postings:
    """Postings as _to_shared wrote them (narrow, as CACHE keeps them); ValueError if they
    are not whole."""
    first, n, *dtypes = _SHARED_HEAD.unpack_from(data)
    arrays, at = [], _SHARED_HEAD.size
    for dtype in dtypes:
        arrays.append(np.frombuffer(data, np.dtype(dtype.decode()), n, at))
        at += arrays[-1].nbytes
    if at != len(data):
        raise ValueError(f"{len(data) - at} bytes left over")
    ids = np.cumsum(arrays[0], dtype=np.int64)
    ids += first
    return Postings(ids, arrays[1], arrays[2])


def _directory_to_shared(d: Directory) -> bytes:
    return b"".join((struct.pack("<q", len(d.first)), d.first.astype("<i8").tobytes(), d.last.astype("<i8").tobytes(),
                     d.max_tf.astype("<f4").tobytes(), d.min_dl.astype("<f4").tobytes()))


def _directory_from_shared(data: bytes) -> Directory:
    (n,) = struct.unpack_from("<q", data)
    if len(data) != 8 + 24 * n:
        raise ValueError(f"{len(data)} bytes for {n} blocks")
    first, last = (np.frombuffer(data, "<i8", n, 8 + 8 * n * i).astype(np.int64) for i in (0, 1))
    max_tf, min_dl = (np.frombuffer(data, "<f4", n, 8 + 16 * n + 4 * n * i).astype(np.float64) for i in (0, 1))
    return Directory(first, last, max_tf, min_dl)


class BlockPostings:
    """The postings of knowledge bases' terms (bm25.PostingSource): their blocks, with the
    tail applied (its voided postings removed, its new ones added)."""

    def __init__(self, conn: psycopg.Connection, kb_ids: list[str], terms: Sequence[str] = (),
                 versions: Optional[Mapping[str, int]] = None, frequencies: Optional[Mapping[str, int]] = None):
        """terms: the question's, whose tail is read at once (else as each term is read);
        versions: each knowledge base's blocks version (TermStatistics.blocks_versions) as
        this search's snapshot read it, under which blocks are kept in CACHE and SHARED and
        read from them (without them every read is SQL's); frequencies: the terms' postings
        over the knowledge bases (TermStatistics.document_frequency), which say which terms
        are worth sharing."""
        self.conn, self.kb_ids, self.terms = conn, list(kb_ids), list(terms)
        # A knowledge base without a statistics row in this snapshot never held a chunk (the
        # row is kept at 0 when they all go, and a rebuild leaves none only with no chunks), so
        # it has no blocks to keep.
        self._versions = {kb: versions[kb] for kb in self.kb_ids if kb in versions} if versions else None
        self._tail: dict[str, list[dict]] = {}
        self._directory: dict[str, Optional[Directory]] = {}
        # The question's terms only (a long one's commonest beyond bm25.TERMS_MAX are not read),
        # each read ahead from SHARED once a search.
        frequencies = frequencies or {}
        self._shared_terms = {t for t in (self.terms or frequencies) if frequencies.get(t, 0) >= SHARED.min_postings} \
            if self._versions else set()
        self._from_shared: dict[str, list[Postings]] = {}  # postings this search read from SHARED
        self._shared_values: Optional[dict[str, Optional[bytes]]] = None  # what it asked SHARED, once

    def read(self, terms: list[str]) -> dict[str, Postings]:
        self._read_shared(terms)
        parts, asked = {}, []
        for t in terms:
            kept = self._kept(t)
            if kept is None:
                asked.append(t)
            elif kept:
                parts[t] = [_widened(p) for p in kept]
        if asked:
            with self.conn.cursor(binary=True) as cur:
                blocks = cur.execute(f"SELECT kb_id, term, {_JOINED} FROM term_blocks"
                                     " WHERE kb_id = ANY(%s) AND term = ANY(%s) GROUP BY kb_id, term",
                                     (self.kb_ids, asked)).fetchall()
            decoded, shared = _decoded(blocks), {}
            for t in asked:
                if self._versions is not None:
                    for kb, version in self._versions.items():
                        p = decoded.get((kb, t), Postings(*EMPTY))
                        CACHE.put(("postings", kb, version, t), p)
                        if t in self._shared_terms:
                            shared[_shared_key("postings", kb, version, t)] = _to_shared(p)
            SHARED.put(shared)
            parts.update(self._by_term(decoded, asked))
        return self._with_tail(terms, parts)

    def _by_term(self, decoded: dict[tuple[str, str], Postings], terms: list[str]) -> dict[str, list[Postings]]:
        """Decoded blocks per term, in the knowledge bases' order; terms none of them holds left out."""
        return {t: found for t in terms if (found := [decoded[kb, t] for kb in self.kb_ids if (kb, t) in decoded])}

    def _read_shared(self, terms: list[str]) -> None:
        """The postings other workers shared of the terms worth sharing that this worker has
        not kept, kept for this search and in CACHE."""
        asked = [t for t in terms if t in self._shared_terms and self._kept(t) is None]
        for t, found in self._shared("postings", asked, _from_shared).items():
            for (kb, version), p in zip(self._versions.items(), found):
                CACHE.put(("postings", kb, version, t), p)
            self._from_shared[t] = [p for p in found if len(p.ids)]

    def _kept(self, term: str) -> Optional[list[Postings]]:
        """The term's blocks of each knowledge base that has any, from CACHE or what this
        search read from SHARED (narrow); None unless every knowledge base's are there."""
        if self._versions is None:
            return None
        if term in self._from_shared:
            return self._from_shared[term]
        found = []
        for kb, version in self._versions.items():
            p = CACHE.get(("postings", kb, version, term))
            if p is None:
                return None
            if len(p.ids):
                found.append(p)
        return found

    def directory(self, terms: list[str]) -> dict[str, Directory]:
        missing = [t for t in terms if t not in self._directory]
        if missing:
            self._directory.update(self._read_directory(missing))
        return {t: self._directory[t] for t in terms if self._directory.get(t) is not None}

    def _read_directory(self, terms: list[str]) -> dict[str, Optional[Directory]]:
        found: dict[str, Optional[Directory]] = dict.fromkeys(terms)
        kept = tuple(sorted(self._versions.items())) if self._versions is not None else None
        asked = terms
        if kept is not None:
            found.update((t, CACHE.get(("directory", kept, t))) for t in terms)
            asked = [t for t in terms if found[t] is None]
            for t, d in self._shared_directories([t for t in asked if t in self._shared_terms]).items():
                found[t] = d
                CACHE.put(("directory", kept, t), d)
            asked = [t for t in asked if found[t] is None]
            found.update((t, None) for t in terms if found[t] is not None and not len(found[t].first))
        if not asked:
            return found
        # Each column joined into one bytea a term, as the blocks' postings are: parsing
        # array_agg's text cost 9 ms for a question's 2,500 blocks at a million chunks. The
        # server's cost is then the rows: the 6,653 blocks of the three commonest terms at a
        # million chunks take 0.6 ms to scan and 2.3 more to join, in one aggregate or four,
        # ordered or not. Grouped by knowledge base and term, the index's order, not by term:
        # the 11,624 blocks of a question's six commonest terms were sorted first (8.2 ms
        # against 6.2, as kb_app). Keeping each common term's blocks and directory joined in one row
        # (built under the blocks version, read where it matched) saved no more than the noise
        # on a quiet machine: a cold keyword search's p50 / p95 19.7-20.9 / 30.8-32.3 ms from
        # the blocks, 19.3-21.0 / 29.4-29.5 from such rows (60 questions x 3, alternating).
        with self.conn.cursor(binary=True) as cur:
            rows = cur.execute(
                "SELECT kb_id, term, string_agg(int8send(first_id), ''::bytea ORDER BY first_id) AS first,"
                "       string_agg(int8send(last_id), ''::bytea ORDER BY first_id) AS last,"
                "       string_agg(float4send(max_tf), ''::bytea ORDER BY first_id) AS max_tf,"
                "       string_agg(float4send(min_dl), ''::bytea ORDER BY first_id) AS min_dl"
                "  FROM term_blocks WHERE kb_id = ANY(%s) AND term = ANY(%s) GROUP BY kb_id, term",
                (self.kb_ids, list(asked))).fetchall()
        parts = _directories(rows)
        for t in asked:
            found[t] = _merged([d for kb in self.kb_ids if (d := parts.get((kb, t))) is not None])
        if kept is not None:  # a term with no blocks (only in the tail) as an empty directory
            shared = {}
            for t in asked:
                CACHE.put(("directory", kept, t), found[t] or _NO_BLOCKS)
                if t in self._shared_terms:
                    shared.update((_shared_key("directory", kb, v, t), _directory_to_shared(parts.get((kb, t), _NO_BLOCKS)))
                                  for kb, v in self._versions.items())
            SHARED.put(shared)
        return found

    def _shared_directories(self, terms: list[str]) -> dict[str, Directory]:
        """The directories other workers shared of these terms (empty for a term with no
        blocks), those whose every knowledge base's is there."""
        return {t: _merged(each) or _NO_BLOCKS for t, each in self._shared("directory", terms, _directory_from_shared).items()}

    def _shared(self, kind: str, terms: list[str], decode) -> dict[str, list]:
        """What other workers shared of these terms ('postings' or 'directory'), each
        knowledge base's, decoded, for the terms all of whose are there and read whole (one
        that does not decode is left to SQL). The first time a search asks,
        it reads from SHARED both of every term of the question worth sharing that this worker
        has not kept, in one round trip (a round trip a read cost a search 2.2 ms on average at a
        million chunks with Redis emptied before each, one 0.3 ms)."""
        versions = list(self._versions.items()) if self._versions else []
        if self._shared_values is None:
            kept = tuple(sorted(versions))
            keys = [_shared_key(k, kb, v, t) for t in sorted(self._shared_terms) for k in ("postings", "directory")
                    if (self._kept(t) if k == "postings" else CACHE.get(("directory", kept, t))) is None
                    for kb, v in versions]
            self._shared_values = dict(zip(keys, SHARED.get(keys)))
        found = {}
        for t in terms:
            each = [self._shared_values.get(_shared_key(kind, kb, v, t)) for kb, v in versions]
            if not each or any(v is None for v in each):
                continue
            try:
                found[t] = [decode(v) for v in each]
            except (ValueError, TypeError, struct.error) as exc:
                logger.warning("shared %s of %r unreadable, reading SQL's: %s", kind, t, exc)
        return found

    def read_blocks(self, wanted: dict[str, np.ndarray]) -> dict[str, Postings]:
        """Each term's blocks that start at these ids, with the tail applied (all of the
        tail's new postings of the term, wherever they fall); one query for them all, or
        none for terms whose blocks are in CACHE. Of several knowledge bases, a kept term's
        postings inside the blocks' ranges, which may hold a few more of the others' (a
        superset: every posting is the term's own, each once)."""
        self._read_shared([t for t, starts in wanted.items() if len(starts)])
        parts, asked = {}, []
        for t, starts in wanted.items():
            if not len(starts):
                continue
            kept = self._kept(t)
            if kept is None:
                asked.append(t)
            elif kept:
                d = self.directory([t])[t]
                parts[t] = [_widened(_inside(p, d, starts)) for p in kept]
        if asked:
            # Each term's blocks by `first_id = ANY(...)`, a term at a time (LATERAL): the index
            # gives them in order, so nothing is sorted, and no plan scans the table. A join of
            # the wanted (term, first id) pairs did: at a million chunks, past ~800 blocks the
            # planner chose a parallel scan of term_blocks and a sort on disk (113-370 ms, against
            # 2.6 ms at 484 blocks); this reads 484 blocks in 2.1 ms and 2,418 in 5.8, as kb_app.
            # A term's ids go as one array literal: psycopg dumping an int a block cost 3 ms for 3,000.
            with self.conn.cursor(binary=True) as cur:
                blocks = cur.execute(
                    "SELECT b.kb_id, w.term, b.firsts, b.layout, b.ids, b.tfs, b.dls"
                    "  FROM unnest(%s::text[], %s::text[]) w(term, firsts)"
                    f" CROSS JOIN LATERAL (SELECT kb_id, {_JOINED} FROM term_blocks WHERE kb_id = ANY(%s)"
                    "   AND term = w.term AND first_id = ANY(w.firsts::bigint[]) GROUP BY kb_id) b",
                    (asked, [_array(wanted[t]) for t in asked], self.kb_ids)).fetchall()
            parts.update(self._by_term(_decoded(blocks), asked))
        found = self._with_tail(list(wanted), parts)
        return {t: found.get(t, Postings(*EMPTY)) for t in wanted}

    def tail_added(self, term: str) -> np.ndarray:
        """The ids of the tail's new postings of the term (sorted)."""
        self._load_tail([term])
        return np.asarray(sorted(r["chunk_id"] for r in self._tail.get(term, []) if r["sign"] > 0), dtype=np.int64)

    def _load_tail(self, terms: list[str]) -> None:
        if all(t in self._tail for t in terms):
            return
        missing = [t for t in dict.fromkeys(list(terms) + self.terms) if t not in self._tail]
        rows = self.conn.execute(
            "SELECT term, chunk_id, tf, dl, sign FROM chunk_terms WHERE kb_id = ANY(%s) AND term = ANY(%s)"
            " ORDER BY term, chunk_id", (self.kb_ids, missing)).fetchall()
        for t in missing:
            self._tail[t] = []
        for r in rows:
            self._tail[r["term"]].append(r)

    def _with_tail(self, terms: list[str], parts: dict[str, list[Postings]]) -> dict[str, Postings]:
        self._load_tail(terms)
        out = {}
        for term in terms:
            changes = self._tail.get(term, [])
            if term not in parts and not changes:
                continue
            found = parts.get(term, [])
            if len(found) == 1:
                p = found[0]
            elif found:  # several knowledge bases' blocks
                p = Postings(*(np.concatenate(c) for c in zip(*((q.ids, q.tfs, q.dls) for q in found))))
                order = np.argsort(p.ids, kind="stable")
                p = Postings(p.ids[order], p.tfs[order], p.dls[order])
            else:
                p = Postings(*EMPTY)
            out[term] = _apply_tail(p, changes)
        return out


_NO_BLOCKS = Directory(*(np.empty(0),) * 4)


def _merged(parts: list[Directory]) -> Optional[Directory]:
    """Knowledge bases' directories of a term as one, ordered by first id; None if none has a block."""
    parts = [d for d in parts if len(d.first)]
    if len(parts) <= 1:
        return parts[0] if parts else None
    joined = Directory(*(np.concatenate(c) for c in zip(*((d.first, d.last, d.max_tf, d.min_dl) for d in parts))))
    order = np.argsort(joined.first, kind="stable")
    return Directory(joined.first[order], joined.last[order], joined.max_tf[order], joined.min_dl[order])


def _inside(p: Postings, d: Directory, starts: np.ndarray) -> Postings:
    """p's postings inside the blocks of d that start at these ids."""
    at = np.searchsorted(d.first, starts)
    at = np.unique(at[(at < len(d.first)) & (d.first[np.minimum(at, len(d.first) - 1)] == starts)])
    low, high = np.searchsorted(p.ids, d.first[at]), np.searchsorted(p.ids, d.last[at], side="right")
    n = np.maximum(high - low, 0)
    take = np.repeat(low - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))
    if len(low) > 1 and np.any(low[1:] < np.maximum.accumulate(high)[:-1]):  # several knowledge bases' ranges overlap
        take = np.unique(take)
    return Postings(p.ids[take], p.tfs[take], p.dls[take])


def _array(values: np.ndarray) -> str:
    """Integers as a PostgreSQL array literal."""
    return "{" + ",".join(map(str, values.tolist())) + "}"


EMPTY = (np.empty(0, dtype=np.int64), np.empty(0), np.empty(0))


def _apply_tail(p: Postings, changes: list[dict]) -> Postings:
    """The blocks' postings less those the tail voids, plus its new ones (both by chunk id)."""
    voided = np.fromiter((r["chunk_id"] for r in changes if r["sign"] < 0), dtype=np.int64)
    added = [r for r in changes if r["sign"] > 0]
    ids, tfs, dls = p.ids, p.tfs, p.dls
    if len(voided) and len(ids):
        at = np.searchsorted(ids, voided)
        inside = at < len(ids)
        at, voided = at[inside], voided[inside]
        gone = at[ids[at] == voided]
        keep = np.ones(len(ids), dtype=bool)
        keep[gone] = False
        ids, tfs, dls = ids[keep], tfs[keep], dls[keep]
    if added:
        new_ids = np.fromiter((r["chunk_id"] for r in added), dtype=np.int64, count=len(added))
        at = np.searchsorted(ids, new_ids)
        ids = np.insert(ids, at, new_ids)
        tfs = np.insert(tfs, at, np.fromiter((r["tf"] for r in added), dtype=np.float64, count=len(added)))
        dls = np.insert(dls, at, np.fromiter((r["dl"] for r in added), dtype=np.float64, count=len(added)))
    return Postings(ids, tfs, dls)


def tail_size(conn: psycopg.Connection, kb_id: str, up_to: int) -> int:
    """The postings in the knowledge base's tail, counted up to one past up_to."""
    return int(conn.execute("SELECT count(*) AS n FROM (SELECT 1 FROM chunk_terms WHERE kb_id = %s LIMIT %s) t",
                            (kb_id, up_to + 1)).fetchone()["n"])


def with_old_blocks(conn: psycopg.Connection) -> list[str]:
    """The knowledge bases holding blocks in 0026's layout, not yet repacked (migration 0028)."""
    return [r["kb_id"] for r in conn.execute("SELECT DISTINCT kb_id FROM term_blocks WHERE id_bytes = 0 ORDER BY kb_id")]


def repack(conn: psycopg.Connection, kb_id: str, most: int) -> int:
    """Packs up to `most` of the knowledge base's blocks in 0026's layout (migration 0028);
    returns how many (0: none was left, or a compaction holds the knowledge base's lock)."""
    return int(conn.execute("SELECT kb_bm25_repack(%s, %s) AS n", (kb_id, most)).fetchone()["n"])


def compact(conn: psycopg.Connection, kb_id: str, block: int) -> int:
    """Folds the knowledge base's tail into blocks of at most `block` postings (migration
    0026); returns the blocks written."""
    return int(conn.execute("SELECT kb_bm25_compact(%s, %s) AS n", (kb_id, block)).fetchone()["n"])
