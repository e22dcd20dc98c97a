"""The postings of knowledge bases' terms as BM25 reads them (retrieval/bm25.py's
PostingSource): term_blocks' packed blocks and the tail written since the last compaction
(chunk_terms), decoded by chalicelib.postings, kept in the worker's and shared caches
(storage/postings_cache.py) under the snapshot's blocks versions."""
import logging
import struct
from typing import Mapping, Optional, Sequence

import numpy as np
import psycopg

from chalicelib import postings
from chalicelib.postings import EMPTY, NO_BLOCKS, Directory, Postings
from chalicelib.storage import postings_cache as caches

logger = logging.getLogger(__name__)

# A term's blocks joined into one value per column, in id order: one row (and a few numpy
# passes) a term instead of one a block, whose frombuffer calls and row handling add up over
# a question's thousands of blocks. Blocks are packed (migration 0027): each
# id as its difference from the one before, each column in its own width a block.
_JOINED = ("string_agg(int8send(first_id), ''::bytea ORDER BY first_id) AS firsts,"
           " string_agg(int2send(n::smallint) || int2send(id_bytes) || int2send(tf_bytes) || int2send(dl_bytes),"
           "            ''::bytea ORDER BY first_id) AS layout,"
           " string_agg(ids, ''::bytea ORDER BY first_id) AS ids, string_agg(tfs, ''::bytea ORDER BY first_id) AS tfs,"
           " string_agg(dls, ''::bytea ORDER BY first_id) AS dls")


def _directories(rows: list[dict]) -> dict[tuple[str, str], Directory]:
    """Directories by knowledge base and term (a row each, as _read_directory joins them)."""
    return {(r["kb_id"], r["term"]): Directory(
        np.frombuffer(r["first"], dtype=">i8").astype(np.int64), np.frombuffer(r["last"], dtype=">i8").astype(np.int64),
        np.frombuffer(r["max_tf"], dtype=">f4").astype(np.float64), np.frombuffer(r["min_dl"], dtype=">f4").astype(np.float64))
        for r in rows}


def _decoded(rows: list[dict]) -> dict[tuple[str, str], Postings]:
    """Joined blocks by knowledge base and term (a row each)."""
    return {(b["kb_id"], b["term"]): postings.unpacked(b["firsts"], b["layout"], b["ids"], b["tfs"], b["dls"]) for b in rows}


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
        worth = caches.SHARED.min_postings
        self._shared_terms = {t for t in (self.terms or frequencies) if frequencies.get(t, 0) >= worth} \
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
                parts[t] = [postings.widened(p) for p in kept]
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
                        caches.CACHE.put(("postings", kb, version, t), p)
                        if t in self._shared_terms:
                            shared[caches.shared_key("postings", kb, version, t)] = postings.to_shared(p)
            caches.SHARED.put(shared)
            parts.update(self._by_term(decoded, asked))
        return self._with_tail(terms, parts)

    def _by_term(self, decoded: dict[tuple[str, str], Postings], terms: list[str]) -> dict[str, list[Postings]]:
        """Decoded blocks per term, in the knowledge bases' order; terms none of them holds left out."""
        return {t: found for t in terms if (found := [decoded[kb, t] for kb in self.kb_ids if (kb, t) in decoded])}

    def _read_shared(self, terms: list[str]) -> None:
        """The postings other workers shared of the terms worth sharing that this worker has
        not kept, kept for this search and in CACHE."""
        asked = [t for t in terms if t in self._shared_terms and self._kept(t) is None]
        for t, found in self._shared("postings", asked, postings.from_shared).items():
            for (kb, version), p in zip(self._versions.items(), found):
                caches.CACHE.put(("postings", kb, version, t), p)
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
            p = caches.CACHE.get(("postings", kb, version, term))
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
            found.update((t, caches.CACHE.get(("directory", kept, t))) for t in terms)
            asked = [t for t in terms if found[t] is None]
            for t, d in self._shared_directories([t for t in asked if t in self._shared_terms]).items():
                found[t] = d
                caches.CACHE.put(("directory", kept, t), d)
            asked = [t for t in asked if found[t] is None]
            found.update((t, None) for t in terms if found[t] is not None and not len(found[t].first))
        if not asked:
            return found
        # Each column joined into one bytea a term, as the blocks' postings are: parsing
        # array_agg's text costs more than the query. The server's cost is then the rows, in
        # one aggregate or four, ordered or not. Grouped by knowledge base and term, the
        # index's order, not by term, which sorts the blocks first. (Keeping each common
        # term's blocks and directory joined in one row saved no more than the noise.)
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
            found[t] = postings.merged([d for kb in self.kb_ids if (d := parts.get((kb, t))) is not None])
        if kept is not None:  # a term with no blocks (only in the tail) as an empty directory
            shared = {}
            for t in asked:
                caches.CACHE.put(("directory", kept, t), found[t] or NO_BLOCKS)
                if t in self._shared_terms:
                    shared.update((caches.shared_key("directory", kb, v, t),
                                   postings.directory_to_shared(parts.get((kb, t), NO_BLOCKS)))
                                  for kb, v in self._versions.items())
            caches.SHARED.put(shared)
        return found

    def _shared_directories(self, terms: list[str]) -> dict[str, Directory]:
        """The directories other workers shared of these terms (empty for a term with no
        blocks), those whose every knowledge base's is there."""
        found = self._shared("directory", terms, postings.directory_from_shared)
        return {t: postings.merged(each) or NO_BLOCKS for t, each in found.items()}

    def _shared(self, kind: str, terms: list[str], decode) -> dict[str, list]:
        """What other workers shared of these terms ('postings' or 'directory'), each
        knowledge base's, decoded, for the terms all of whose are there and read whole (one
        that does not decode is left to SQL). The first time a search asks, it reads from
        SHARED both of every term of the question worth sharing that this worker has not kept,
        in one round trip rather than one a read."""
        versions = list(self._versions.items()) if self._versions else []
        if self._shared_values is None:
            kept = tuple(sorted(versions))
            keys = [caches.shared_key(k, kb, v, t) for t in sorted(self._shared_terms) for k in ("postings", "directory")
                    if (self._kept(t) if k == "postings" else caches.CACHE.get(("directory", kept, t))) is None
                    for kb, v in versions]
            self._shared_values = dict(zip(keys, caches.SHARED.get(keys)))
        found = {}
        for t in terms:
            each = [self._shared_values.get(caches.shared_key(kind, kb, v, t)) for kb, v in versions]
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
                parts[t] = [postings.widened(postings.inside(p, d, starts)) for p in kept]
        if asked:
            # Each term's blocks by `first_id = ANY(...)`, a term at a time (LATERAL): the index
            # gives them in order, so nothing is sorted, and no plan scans the table. A join of
            # the wanted (term, first id) pairs did: past some hundreds of blocks the planner
            # chose a parallel scan of term_blocks and a sort on disk. A term's ids go as one
            # array literal: psycopg dumping an int a block is slower.
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
            out[term] = postings.apply_tail(p, changes)
        return out



def _array(values: np.ndarray) -> str:
    """Integers as a PostgreSQL array literal."""
    return "{" + ",".join(map(str, values.tolist())) + "}"

