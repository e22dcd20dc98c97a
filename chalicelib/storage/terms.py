"""chunk_terms, kb_terms, kb_text_stats: what BM25 needs (migration 0011). Triggers on
chunks write them; the service only reads: a question's terms, their document
frequencies and the knowledge bases' sizes."""
from dataclasses import dataclass
from typing import Optional

import psycopg


# kb_bm25_impact (migration 0011) orders postings by BM25's saturation with these k1 and
# b, for chunks of this average length, whatever the knowledge base's own average.
IMPACT_K1, IMPACT_B, IMPACT_AVERAGE_LENGTH = 1.2, 0.75, 100.0


@dataclass(frozen=True)
class TermStatistics:
    """Over the knowledge bases searched together: chunks, their summed length, and per
    term (those no chunk holds are left out) how many chunks hold it, the highest
    frequency and shortest chunk it occurs with, and the highest impact of its postings
    (together, its score's bound: Bm25Query.bound)."""
    chunks: int
    length: float
    document_frequency: dict[str, int]
    bounds: dict[str, tuple[float, float]]
    impacts: dict[str, float]


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

    def bound(self, stats: TermStatistics, term: str) -> float:
        """The most the term adds to a chunk's score (before its idf). Two bounds, the
        lower kept: the saturation of its highest frequency in its shortest chunk (which
        may be two different chunks), and that of its best posting. A posting's impact
        i = tf / (tf + x) is the saturation at IMPACT_AVERAGE_LENGTH; at the knowledge
        base's own average A the saturation is at most (k1 + 1) i / (i + r (1 - i)),
        r = min(1, IMPACT_AVERAGE_LENGTH / A): with r <= 1, x shrinks by r at most. On the
        benchmark's million chunks the second bound was ~10% lower, and in 8 of 30
        questions the exact pass's terms held fewer postings (31,306 -> 3,466 in one)."""
        by_counts = self.saturation(*stats.bounds[term])
        impact = stats.impacts.get(term)
        if impact is None or (self.k1, self.b) != (IMPACT_K1, IMPACT_B):
            return by_counts
        impact = min(1.0, impact + 1e-6)  # stored as a real (float4): rounded either way
        r = min(1.0, IMPACT_AVERAGE_LENGTH / (self.average_length or IMPACT_AVERAGE_LENGTH))
        return min(by_counts, (self.k1 + 1) * impact / (impact + r * (1 - impact)))


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
    # The best posting: the first in the impact index, one probe per knowledge base and term.
    frequencies = conn.execute(
        "SELECT t.term, sum(t.df) AS df, max(t.max_tf) AS max_tf, min(t.min_dl) AS min_dl,"
        "       max((SELECT p.impact FROM chunk_terms p WHERE p.kb_id = t.kb_id AND p.term = t.term"
        "             ORDER BY p.impact DESC LIMIT 1)) AS impact"
        "  FROM kb_terms t WHERE t.kb_id = ANY(%s) AND t.term = ANY(%s) GROUP BY t.term HAVING sum(t.df) > 0",
        (kb_ids, terms)).fetchall()
    return TermStatistics(chunks=int(sizes["chunks"]), length=float(sizes["length"]),
                          document_frequency={r["term"]: int(r["df"]) for r in frequencies},
                          bounds={r["term"]: (float(r["max_tf"]), float(r["min_dl"])) for r in frequencies},
                          impacts={r["term"]: float(r["impact"]) for r in frequencies if r["impact"] is not None})
