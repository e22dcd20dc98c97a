"""term_blocks, chunk_terms, kb_terms, kb_text_stats: what BM25 needs (migrations 0011,
0026, 0027 and 0028). Triggers on chunks write them, and a compaction folds the tail (chunk_terms)
into the blocks; the service reads a question's terms, their statistics and postings.
chalicelib/retrieval/bm25.py owns what they mean, chalicelib/postings.py their encoding,
storage/term_blocks.py reads the postings and storage/postings_cache.py keeps them decoded."""
from dataclasses import dataclass, field

import psycopg

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
