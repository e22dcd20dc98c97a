"""term_blocks, chunk_terms, kb_terms, kb_text_stats: what BM25 needs (migrations 0011
and 0026). Triggers on chunks write them, and a compaction folds the tail (chunk_terms)
into the blocks; the service reads a question's terms, their statistics and postings.
chalicelib/retrieval/bm25.py owns what they mean."""
from dataclasses import dataclass

import numpy as np
import psycopg
from psycopg.adapt import Loader
from psycopg.pq import Format


@dataclass(frozen=True)
class TermStatistics:
    """Over the knowledge bases searched together: chunks, their summed length, and per
    term (those no chunk holds are left out) how many chunks hold it and the highest
    frequency and shortest chunk it occurs with (together, its bound)."""
    chunks: int
    length: float
    document_frequency: dict[str, int]
    extremes: dict[str, tuple[float, float]]


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
    sizes = conn.execute("SELECT coalesce(sum(chunks), 0) AS chunks, coalesce(sum(length), 0) AS length"
                         " FROM kb_text_stats WHERE kb_id = ANY(%s)", (kb_ids,)).fetchone()
    frequencies = conn.execute(
        "SELECT term, sum(df) AS df, max(max_tf) AS max_tf, min(min_dl) AS min_dl"
        "  FROM kb_terms WHERE kb_id = ANY(%s) AND term = ANY(%s) GROUP BY term HAVING sum(df) > 0",
        (kb_ids, terms)).fetchall()
    return TermStatistics(chunks=int(sizes["chunks"]), length=float(sizes["length"]),
                          document_frequency={r["term"]: int(r["df"]) for r in frequencies},
                          extremes={r["term"]: (float(r["max_tf"]), float(r["min_dl"])) for r in frequencies})


class _NumpyArray(Loader):
    """A one-dimensional array without NULLs, in PostgreSQL's binary format, straight into
    numpy: a header, then each element as its length and its big-endian value. Reading a
    block's 1,024 ids as Python ints cost more than scoring them."""
    format = Format.BINARY
    element: np.dtype

    def load(self, data) -> np.ndarray:
        data = bytes(data)
        ndim = int.from_bytes(data[0:4], "big")
        if ndim == 0:
            return np.empty(0, dtype=self.element.newbyteorder("="))
        size = int.from_bytes(data[12:16], "big")
        packed = np.dtype([("length", ">i4"), ("value", self.element)])
        return np.frombuffer(data, dtype=packed, count=size, offset=20)["value"].astype(self.element.newbyteorder("="))


class _Int8Array(_NumpyArray):
    element = np.dtype(">i8")


class _Float4Array(_NumpyArray):
    element = np.dtype(">f4")


def _array_cursor(conn: psycopg.Connection) -> psycopg.Cursor:
    cur = conn.cursor(binary=True)
    cur.adapters.register_loader(1016, _Int8Array)  # int8[]
    cur.adapters.register_loader(1021, _Float4Array)  # float4[]
    return cur


class BlockPostings:
    """The postings of knowledge bases' terms (bm25.PostingSource): their blocks, with the
    tail applied (its voided postings removed, its new ones added)."""

    def __init__(self, conn: psycopg.Connection, kb_ids: list[str]):
        self.conn, self.kb_ids = conn, list(kb_ids)

    def read(self, terms: list[str]) -> dict[str, Postings]:
        with _array_cursor(self.conn) as cur:
            blocks = cur.execute("SELECT term, ids, tfs, dls FROM term_blocks WHERE kb_id = ANY(%s) AND term = ANY(%s)"
                                 " ORDER BY term, first_id", (self.kb_ids, list(terms))).fetchall()
        return self._with_tail(terms, blocks)

    def read_holding(self, terms: list[str], ids: np.ndarray) -> dict[str, Postings]:
        """The blocks whose range holds one of ids (sorted), from the block directory."""
        directory = self.conn.execute(
            "SELECT kb_id, term, first_id, last_id FROM term_blocks WHERE kb_id = ANY(%s) AND term = ANY(%s)",
            (self.kb_ids, list(terms))).fetchall()
        first = np.fromiter((r["first_id"] for r in directory), dtype=np.int64, count=len(directory))
        last = np.fromiter((r["last_id"] for r in directory), dtype=np.int64, count=len(directory))
        holds = np.searchsorted(ids, last, side="right") > np.searchsorted(ids, first, side="left")
        wanted = [directory[i] for i in np.flatnonzero(holds)]
        blocks = []
        if wanted:
            with _array_cursor(self.conn) as cur:
                blocks = cur.execute(
                    "SELECT b.term, b.ids, b.tfs, b.dls FROM term_blocks b"
                    "  JOIN unnest(%s::text[], %s::text[], %s::bigint[]) w(kb_id, term, first_id)"
                    "    ON b.kb_id = w.kb_id AND b.term = w.term AND b.first_id = w.first_id"
                    " ORDER BY b.term, b.first_id",
                    ([r["kb_id"] for r in wanted], [r["term"] for r in wanted],
                     [r["first_id"] for r in wanted])).fetchall()
        return self._with_tail(terms, blocks)

    def _with_tail(self, terms: list[str], blocks: list[dict]) -> dict[str, Postings]:
        tail = self.conn.execute(
            "SELECT term, chunk_id, tf, dl, sign FROM chunk_terms WHERE kb_id = ANY(%s) AND term = ANY(%s)"
            " ORDER BY term, chunk_id", (self.kb_ids, list(terms))).fetchall()
        parts: dict[str, list[tuple]] = {}
        for b in blocks:
            parts.setdefault(b["term"], []).append((b["ids"], b["tfs"], b["dls"]))
        changes: dict[str, list[dict]] = {}
        for r in tail:
            changes.setdefault(r["term"], []).append(r)
        out = {}
        for term in terms:
            if term not in parts and term not in changes:
                continue
            pieces = parts.get(term, [])
            ids = np.concatenate([p[0] for p in pieces]) if pieces else np.empty(0, np.int64)
            tfs = np.concatenate([p[1] for p in pieces]) if pieces else np.empty(0, np.float32)
            dls = np.concatenate([p[2] for p in pieces]) if pieces else np.empty(0, np.float32)
            if len(ids) > 1 and not np.all(ids[1:] > ids[:-1]):  # several knowledge bases' blocks
                order = np.argsort(ids, kind="stable")
                ids, tfs, dls = ids[order], tfs[order], dls[order]
            out[term] = _apply_tail(Postings(ids, tfs, dls), changes.get(term, []))
        return out


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
        tfs = np.insert(tfs, at, np.fromiter((r["tf"] for r in added), dtype=np.float32, count=len(added)))
        dls = np.insert(dls, at, np.fromiter((r["dl"] for r in added), dtype=np.float32, count=len(added)))
    return Postings(ids, tfs, dls)


def tail_size(conn: psycopg.Connection, kb_id: str, up_to: int) -> int:
    """The postings in the knowledge base's tail, counted up to one past up_to."""
    return int(conn.execute("SELECT count(*) AS n FROM (SELECT 1 FROM chunk_terms WHERE kb_id = %s LIMIT %s) t",
                            (kb_id, up_to + 1)).fetchone()["n"])


def compact(conn: psycopg.Connection, kb_id: str, block: int) -> int:
    """Folds the knowledge base's tail into blocks of at most `block` postings (migration
    0026); returns the blocks written."""
    return int(conn.execute("SELECT kb_bm25_compact(%s, %s) AS n", (kb_id, block)).fetchone()["n"])
