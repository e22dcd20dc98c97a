"""chunk_terms, kb_terms, kb_text_stats: what BM25 needs (migration 0011). Triggers on
chunks write them; the service only reads: a question's terms, their document
frequencies and the knowledge bases' sizes."""
from dataclasses import dataclass
from typing import Optional

import psycopg


@dataclass(frozen=True)
class TermStatistics:
    """Over the knowledge bases searched together: chunks, their summed length, and per
    term (those no chunk holds are left out) how many chunks hold it and the highest
    frequency and shortest chunk it occurs with (its score's bound)."""
    chunks: int
    length: float
    document_frequency: dict[str, int]
    bounds: dict[str, tuple[float, float]]


@dataclass(frozen=True)
class Bm25Query:
    """A question as BM25 scores it: its terms with their inverse document frequencies,
    the average chunk length, k1 and b; how many postings of each term to read (by
    impact; 0: none, the term only scores the candidates the others found), how many of
    the candidates with the highest summed postings to score exactly, and the least
    those sums must reach (None: any)."""
    terms: tuple[str, ...]
    idfs: tuple[float, ...]
    average_length: float
    k1: float
    b: float
    limits: tuple[int, ...]
    rescored: int
    prune_below: Optional[float] = None

    @property
    def best(self) -> float:
        """The score of a chunk that holds every term often: keyword scores are shown
        as a share of it, 0..1."""
        return sum(self.idfs) * (self.k1 + 1)

    def saturation(self, tf: float, dl: float) -> float:
        return tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * dl / self.average_length))


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
        "SELECT term, sum(df) AS df, max(max_tf) AS max_tf, min(min_dl) AS min_dl FROM kb_terms"
        " WHERE kb_id = ANY(%s) AND term = ANY(%s) GROUP BY term HAVING sum(df) > 0", (kb_ids, terms)).fetchall()
    return TermStatistics(chunks=int(sizes["chunks"]), length=float(sizes["length"]),
                          document_frequency={r["term"]: int(r["df"]) for r in frequencies},
                          bounds={r["term"]: (float(r["max_tf"]), float(r["min_dl"])) for r in frequencies})
