"""kb_lines: how many documents of a knowledge base hold each line (migration 0037); a
trigger on documents keeps the counts as documents.line_hashes changes or a document goes."""
import psycopg

# The hash standing for the document itself in every document's lines: its row counts them.
DOCUMENTS = 0


def record(conn: psycopg.Connection, doc_id: str, run_id: str, hashes: list[int]) -> bool:
    """The document's lines become these; False when a newer run owns it."""
    return conn.execute("UPDATE documents SET line_hashes = %s WHERE id = %s AND current_run_id = %s",
                        (hashes, doc_id, run_id)).rowcount == 1


def counts(conn: psycopg.Connection, kb_id: str, hashes: list[int], at_least: int) -> dict[int, int]:
    """Of these lines, those at least at_least documents hold, with that number; and
    DOCUMENTS, the number of documents counted."""
    rows = conn.execute(
        "SELECT line_hash, documents FROM kb_lines WHERE kb_id = %s AND line_hash = ANY(%s)"
        " AND (documents >= %s OR line_hash = %s)", (kb_id, hashes, at_least, DOCUMENTS)).fetchall()
    return {r["line_hash"]: r["documents"] for r in rows}
