"""documents: files and entries and the run that owns them; their status changes in
document_status.py alone. Callers check access to the knowledge base first
(knowledge_bases.get_visible/get_writable); the pipeline's statements are guarded by the
run id instead, so a superseded run changes nothing."""
import json
from typing import Optional

import psycopg

from chalicelib.storage.scope import READABLE_DOCUMENT, scope

DOC_COLUMNS = """id, kb_id, s3_key, path, filename, content_type, size_bytes, content_hash, status,
    error_code, error_message, page_count, chunk_count, token_count, metadata,
    step_durations, created_at, updated_at, processed_at, indexed_hash, current_run_id, kind, title,
    run_attempts, execution_arn, created_by, original_url, superseded_by, history, note"""
# What a reader is shown: who added the document only to readers of the knowledge base's own
# organisation (a public knowledge base's readers elsewhere see none), as passages' uploadedBy.
READER_DOC_COLUMNS = DOC_COLUMNS.replace(
    "created_by,", "CASE WHEN EXISTS (SELECT 1 FROM knowledge_bases k WHERE k.id = d.kb_id AND k.org_id = %(org_id)s)"
                   " THEN d.created_by END AS created_by,")


ENTRY_COLUMNS = """id, kb_id, title, chunk_count, token_count, metadata, content_hash, level, entry_type,
    confidence, agent_id, provenance, created_by, created_at, history, superseded_by"""


def entry_by_content(conn: psycopg.Connection, principal, kb_id: str, content_hash: str) -> Optional[dict]:
    """The entry of this content the caller may read: another user's individual entry of
    the same text is neither answered nor in the way (its own audience, migration 0014)."""
    return conn.execute(
        f"SELECT {ENTRY_COLUMNS} FROM documents d WHERE kb_id = %(kb_id)s AND kind = 'entry'"
        f" AND content_hash = %(hash)s AND {READABLE_DOCUMENT} ORDER BY d.audience NULLS FIRST LIMIT 1",
        scope(principal, kb_id=kb_id, hash=content_hash)).fetchone()


def get_entry(conn: psycopg.Connection, kb_id: str, entry_id: str, *, for_update: bool = False) -> Optional[dict]:
    return conn.execute(
        f"SELECT {ENTRY_COLUMNS} FROM documents WHERE id = %s AND kb_id = %s AND kind = 'entry'"
        + (" FOR UPDATE" if for_update else ""), (entry_id, kb_id)).fetchone()


def readable_entry(conn: psycopg.Connection, principal, kb_id: str, entry_id: str) -> Optional[dict]:
    """An entry of this knowledge base the caller may read, locked for a change."""
    return conn.execute(
        f"SELECT {ENTRY_COLUMNS} FROM documents d WHERE id = %(id)s AND kb_id = %(kb_id)s AND kind = 'entry'"
        f" AND {READABLE_DOCUMENT} FOR UPDATE", scope(principal, id=entry_id, kb_id=kb_id)).fetchone()


def set_entry_level(conn: psycopg.Connection, entry_id: str, level: str) -> bool:
    """Through kb_set_entry_level (migration 0022: the entry may leave the caller's sight);
    the audience follows, to the chunks too. A UniqueViolation when that audience holds the
    same text already."""
    return conn.execute("SELECT kb_set_entry_level(%s, %s) AS changed", (entry_id, level)).fetchone()["changed"]


def add_entry_version(conn: psycopg.Connection, entry_id: str, *, title: str, history: list[dict],
                      provenance: dict) -> None:
    """An entry about to hold new content (chunks.replace_document_chunks writes it): its new
    title, what it said before appended to its history, the sighting to its provenance."""
    conn.execute("UPDATE documents SET title = %s, history = history || %s::jsonb,"
                 " provenance = provenance || jsonb_build_array(%s::jsonb), updated_at = now()"
                 " WHERE id = %s AND kind = 'entry'",
                 (title, json.dumps(history), json.dumps(provenance), entry_id))


def supersede_entry(conn: psycopg.Connection, entry_id: str, by: str) -> None:
    conn.execute("UPDATE documents SET superseded_by = %s, updated_at = now() WHERE id = %s AND kind = 'entry'",
                 (by, entry_id))


def merge_into_entry(conn: psycopg.Connection, entry_id: str, *, provenance: dict, confidence: Optional[float],
                     level: Optional[str]) -> None:
    """Another sighting of an entry's knowledge: its provenance grows, its confidence is
    the highest seen, its level the widest it was given (unless the wider audience holds
    the same content already: the entry keeps its level then)."""
    try:
        with conn.transaction():
            _merge(conn, entry_id, provenance, confidence, level)
    except psycopg.errors.UniqueViolation:
        with conn.transaction():
            _merge(conn, entry_id, provenance, confidence, None)


def _merge(conn: psycopg.Connection, entry_id: str, provenance: dict, confidence: Optional[float],
           level: Optional[str]) -> None:
    conn.execute(
        "UPDATE documents SET provenance = provenance || jsonb_build_array(%s::jsonb),"
        " confidence = greatest(confidence, %s),"
        " level = CASE WHEN %s::text IS NULL THEN level"
        "   WHEN array_position(ARRAY['individual','organisation','public'], %s::text)"
        "      > coalesce(array_position(ARRAY['individual','organisation','public'], level), 0) THEN %s::text"
        "   ELSE level END,"
        " updated_at = now() WHERE id = %s AND kind = 'entry'",
        (json.dumps(provenance), confidence, level, level, level, entry_id))


def get(conn: psycopg.Connection, doc_id: str) -> Optional[dict]:
    return conn.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE id = %s", (doc_id,)).fetchone()


def get_in(conn: psycopg.Connection, principal, kb_id: str, doc_id: str) -> Optional[dict]:
    """A document of this knowledge base the caller may read."""
    return conn.execute(f"SELECT {READER_DOC_COLUMNS} FROM documents d WHERE id = %(id)s AND kb_id = %(kb_id)s"
                        f" AND {READABLE_DOCUMENT}", scope(principal, id=doc_id, kb_id=kb_id)).fetchone()


def find_by_key(conn: psycopg.Connection, kb_id: str, s3_key: str) -> Optional[dict]:
    return conn.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE kb_id = %s AND s3_key = %s",
                        (kb_id, s3_key)).fetchone()


def _prefix_end(prefix: str) -> Optional[str]:
    """The least string above every string that starts with prefix, in code-point order
    (the C collation's order of UTF-8), or None when there is none."""
    for i in range(len(prefix) - 1, -1, -1):
        if ord(prefix[i]) < 0x10FFFF:
            return prefix[:i] + chr(ord(prefix[i]) + 1)
    return None


# Each sort, its ORDER BY and the keyset condition that starts the page after a row;
# the indexes of migration 0015 serve them (s3_key is 'kb/{kbId}/' + path for files).
_ORDER = {
    "path": ('d.s3_key COLLATE "C"', 'd.s3_key COLLATE "C" > %(k0)s'),
    "updatedAt": ("d.updated_at DESC, d.id DESC", "(d.updated_at, d.id) < (%(k0)s::timestamptz, %(k1)s)"),
    "status": ('d.status, d.s3_key COLLATE "C"', '(d.status, d.s3_key COLLATE "C") > (%(k0)s, %(k1)s)'),
}


def list_page(conn: psycopg.Connection, principal, kb_id: str, query) -> list[dict]:
    """Up to query.limit documents of this knowledge base the caller may read, in the
    query's sort, after query.after (a DocumentQuery of documents/listing.py)."""
    order, after = _ORDER[query.sort]
    key_prefix = f"kb/{kb_id}/"
    prefix = key_prefix + query.prefix if query.prefix else None
    params = {"kb_id": kb_id, "status": query.status, "limit": query.limit,
              "key": key_prefix + query.path if query.path is not None else None,
              "prefix": prefix, "prefix_end": _prefix_end(prefix) if prefix else None}
    for i, value in enumerate(query.after or ()):
        params[f"k{i}"] = value
    return conn.execute(
        f"SELECT {READER_DOC_COLUMNS} FROM documents d WHERE d.kb_id = %(kb_id)s AND {READABLE_DOCUMENT}"
        " AND (%(status)s::text IS NULL OR d.status = %(status)s)"
        " AND (%(key)s::text IS NULL OR d.s3_key = %(key)s)"
        ' AND (%(prefix)s::text IS NULL OR (d.s3_key COLLATE "C" >= %(prefix)s'
        '      AND (%(prefix_end)s::text IS NULL OR d.s3_key COLLATE "C" < %(prefix_end)s)))'
        + (f" AND {after}" if query.after else "")
        + f" ORDER BY {order} LIMIT %(limit)s",
        scope(principal, **params),
    ).fetchall()


def delete(conn: psycopg.Connection, doc_id: str) -> None:
    conn.execute("DELETE FROM documents WHERE id = %s", (doc_id,))


def delete_unchanged(conn: psycopg.Connection, doc_id: str, updated_at) -> int:
    """Delete the document only if nothing changed it since it was read."""
    return conn.execute("DELETE FROM documents WHERE id = %s AND updated_at = %s", (doc_id, updated_at)).rowcount


def delete_by_key(conn: psycopg.Connection, kb_id: str, s3_key: str) -> int:
    return conn.execute(
        "DELETE FROM documents WHERE kb_id = %s AND s3_key = %s", (kb_id, s3_key)
    ).rowcount


def forget_indexed_version(conn: psycopg.Connection, doc_id: str) -> None:
    conn.execute("UPDATE documents SET indexed_hash = NULL WHERE id = %s", (doc_id,))


def set_execution(conn: psycopg.Connection, doc_id: str, run_id: str, execution_arn: str) -> None:
    """Only for the run that still owns the document (a superseded start must not
    leave its execution on the row)."""
    conn.execute("UPDATE documents SET execution_arn = %s WHERE id = %s AND current_run_id = %s",
                 (execution_arn, doc_id, run_id))


def set_content_type(conn: psycopg.Connection, doc_id: str, content_type: str) -> None:
    conn.execute("UPDATE documents SET content_type = %s WHERE id = %s", (content_type, doc_id))


# documents.step_durations with a step's milliseconds added to it; parameters: the step
# three times, then the milliseconds (a NULL step leaves it as it is).
STEP_DURATION_ADDED = ("CASE WHEN %s::text IS NULL THEN step_durations ELSE step_durations || jsonb_build_object("
                       "%s::text, coalesce((step_durations->>%s)::int, 0) + %s::int) END")


def add_step_duration(conn: psycopg.Connection, doc_id: str, run_id: str, step: str, millis: int) -> None:
    """Adds to the run's time in a step: Embed runs once per batch, in parallel, and
    its figure is the sum (one UPDATE per batch, so concurrent batches add safely)."""
    conn.execute(f"UPDATE documents SET step_durations = {STEP_DURATION_ADDED} WHERE id = %s AND current_run_id = %s",
                 (step, step, step, millis, doc_id, run_id))


def files_in(conn: psycopg.Connection, kb_id: str) -> list[dict]:
    return conn.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE kb_id = %s AND kind = 'file'",
                        (kb_id,)).fetchall()

