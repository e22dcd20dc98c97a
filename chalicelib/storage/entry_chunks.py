"""The current chunks of entries, in order: what an entry's whole text is rebuilt from
(chalicelib/documents/entry_text.py)."""
import psycopg

from chalicelib.storage.chunk_versions import CURRENT_CHUNK
from chalicelib.storage.scope import READABLE_CHUNK, VISIBLE_KB, scope


def of_entries(conn: psycopg.Connection, principal, kb_ids: list[str], entry_ids: list[str]) -> list[dict]:
    """The chunks the caller may read of these entries (document_id, chunk_index, content,
    start_char, end_char), by entry and position."""
    return conn.execute(
        f"SELECT c.document_id, c.chunk_index, c.content, c.start_char, c.end_char"
        f"  FROM chunks c JOIN knowledge_bases kb ON kb.id = c.kb_id"
        f" WHERE c.kb_id = ANY(%(kb_ids)s) AND c.document_id = ANY(%(ids)s) AND {READABLE_CHUNK}"
        f"   AND {CURRENT_CHUNK} AND {VISIBLE_KB}"
        f" ORDER BY c.document_id, c.chunk_index",
        scope(principal, kb_ids=list(kb_ids), ids=list(entry_ids))).fetchall()


def of_knowledge_base(conn: psycopg.Connection, kb_id: str) -> list[dict]:
    """Every live entry's current chunks (document_id, title, chunk_index, content, start_char,
    end_char), by entry and position, unscoped: a rebuild acts for the whole bucket."""
    return conn.execute(
        f"SELECT c.document_id, d.title, c.chunk_index, c.content, c.start_char, c.end_char"
        f"  FROM chunks c JOIN documents d ON d.id = c.document_id"
        f" WHERE c.kb_id = %(kb_id)s AND d.kind = 'entry' AND d.superseded_by IS NULL AND {CURRENT_CHUNK}"
        f" ORDER BY c.document_id, c.chunk_index", {"kb_id": kb_id, "kb_ids": [kb_id]}).fetchall()
