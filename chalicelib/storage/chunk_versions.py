"""chunk_versions: a document's chunks replaced in committed batches and switched to at
once (migration 0016). Each chunk row carries the version that wrote it (a run's id);
documents.chunks_version names the one search reads, and chunk_versions lists the
versions it must not read: 'staged' (being written) and 'retired' (being deleted).

- replace(): chunks in memory. Up to limits.STORE_BATCH_CHUNKS (or inside a caller's
  transaction: an entry) in one transaction, as before; more in batches.
- begin() / stage() / switch(): the same in steps, for a caller that reads the chunks
  batch by batch (the Store step: a retry resumes after the last committed batch).
- delete_hidden(): the retired and abandoned versions' rows, deleted in batches.

Invariant: every chunk row is of its document's chunks_version or of a listed version. A
version is listed before its first row is written and unlisted only after its last row is
deleted (or in the switch, which makes it current). A batch holds its listing FOR SHARE,
so a version cannot be unlisted while a late batch of a superseded run still writes it."""
import json
import uuid
from typing import Iterable, Optional

import numpy as np
import psycopg

from chalicelib import limits
from chalicelib.records import Chunk, StepClock
from chalicelib.storage import document_status

# The chunk rows a search may read: not of a listed version. A condition on the chunk row
# itself (the HNSW and BM25 scans stay single-table, see chunks.py), against the listed
# versions of the knowledge bases searched (%(kb_ids)s), which PostgreSQL reads once per
# statement (an InitPlan) in the statement's snapshot: the listing and the rows agree.
CURRENT_CHUNK = ("(c.document_id || ' ' || c.version) <> ALL(ARRAY("
                 "SELECT v.document_id || ' ' || v.version FROM chunk_versions v WHERE v.kb_id = ANY(%(kb_ids)s)))")

STAGED, RETIRED = "staged", "retired"
# begin()'s answer for a version that is current already (a retry after the switch).
ALREADY_CURRENT = -1
# Rows per INSERT statement: 16 parameters a row, PostgreSQL takes at most 65,535 a statement.
_ROWS_PER_STATEMENT = 2000
_COLUMNS = ("document_id, kb_id, version, chunk_index, content, page, headers, start_char, end_char,"
            " token_count, metadata, embedding_dim, embedding, title, audience")
_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %b, %s, %s)"


def new_version() -> str:
    """A version for a write that has no run (an entry)."""
    return f"w_{uuid.uuid4().hex}"


def replace(conn: psycopg.Connection, *, doc_id: str, kb_id: str, dim: int, chunks: list[Chunk],
            page_count: Optional[int], run_id: Optional[str] = None, content_hash: Optional[str] = None,
            note: Optional[str] = None, clock: Optional[StepClock] = None) -> bool:
    """The document's chunks become these, and it PROCESSED (note: why it has none); a
    search sees the old version or the new one, never a mix or a gap. False (nothing
    changed) when a newer run owns the document. Idempotent for a run: a retry after the
    switch changes nothing."""
    version = run_id or new_version()
    in_callers_transaction = conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
    if in_callers_transaction or len(chunks) <= limits.STORE_BATCH_CHUNKS:
        with conn.transaction():
            owner = _owner(conn, doc_id, run_id, lock=True)
            if owner is None:
                return False
            if owner["chunks_version"] != version:
                _write(conn, doc_id, kb_id, dim, version, owner["audience"], chunks)
                _switch(conn, owner, doc_id, kb_id, version, len(chunks), page_count, content_hash, note, clock)
        delete_hidden(conn, doc_id)
        return True
    start = begin(conn, doc_id=doc_id, kb_id=kb_id, run_id=run_id, version=version)
    if start is None:
        return False
    if start != ALREADY_CURRENT:
        for at in range(start, len(chunks), limits.STORE_BATCH_CHUNKS):
            if not stage(conn, doc_id=doc_id, kb_id=kb_id, dim=dim, run_id=run_id, version=version,
                         chunks=chunks[at:at + limits.STORE_BATCH_CHUNKS]):
                discard(conn, doc_id, version)
                return False
        if not switch(conn, doc_id=doc_id, kb_id=kb_id, run_id=run_id, version=version, expected=len(chunks),
                      page_count=page_count, content_hash=content_hash, clock=clock):
            discard(conn, doc_id, version)
            return False
    delete_hidden(conn, doc_id)
    return True


def begin(conn: psycopg.Connection, *, doc_id: str, kb_id: str, run_id: Optional[str], version: str) -> Optional[int]:
    """Lists the version as staged (committed before any of its rows); the number of its
    chunks already written (a retry resumes there: batches commit whole and in order),
    ALREADY_CURRENT when it is current already, None when a newer run owns the document.
    Versions an earlier run abandoned are deleted first."""
    owner = _owner(conn, doc_id, run_id, lock=False)
    if owner is None:
        return None
    if owner["chunks_version"] == version:
        return ALREADY_CURRENT
    delete_hidden(conn, doc_id, keep=version)
    conn.execute("INSERT INTO chunk_versions (document_id, version, kb_id, state) VALUES (%s, %s, %s, %s)"
                 " ON CONFLICT (document_id, version) DO NOTHING", (doc_id, version, kb_id, STAGED))
    return conn.execute("SELECT coalesce(max(chunk_index) + 1, 0) AS n FROM chunks"
                        " WHERE document_id = %s AND version = %s", (doc_id, version)).fetchone()["n"]


def stage(conn: psycopg.Connection, *, doc_id: str, kb_id: str, dim: int, run_id: Optional[str], version: str,
          chunks: list[Chunk]) -> bool:
    """One batch of the staged version, in a transaction of its own; False (nothing
    written) when the run no longer owns the document or the version is no longer listed."""
    with conn.transaction():
        listed = conn.execute("SELECT 1 FROM chunk_versions WHERE document_id = %s AND version = %s"
                              " AND state = %s FOR SHARE", (doc_id, version, STAGED)).fetchone()
        owner = _owner(conn, doc_id, run_id, lock=False)
        if listed is None or owner is None:
            return False
        _write(conn, doc_id, kb_id, dim, version, owner["audience"], chunks)
    return True


def switch(conn: psycopg.Connection, *, doc_id: str, kb_id: str, run_id: Optional[str], version: str,
           expected: Optional[int], page_count: Optional[int], content_hash: Optional[str],
           clock: Optional[StepClock] = None) -> bool:
    """One short transaction: the staged version becomes the document's, the old one is
    retired, the document PROCESSED (with clock's step time). False when a newer run owns
    the document."""
    with conn.transaction():
        owner = _owner(conn, doc_id, run_id, lock=True)
        if owner is None:
            return False
        if owner["chunks_version"] == version:
            return True
        written = conn.execute("SELECT count(*) AS n FROM chunks WHERE document_id = %s AND version = %s",
                               (doc_id, version)).fetchone()["n"]
        if expected is not None and written != expected:  # a defect: a batch went missing
            raise RuntimeError(f"{written} of the {expected} chunks of version {version} were written")
        conn.execute("DELETE FROM chunk_versions WHERE document_id = %s AND version = %s", (doc_id, version))
        _switch(conn, owner, doc_id, kb_id, version, written, page_count, content_hash, clock=clock)
    return True


def delete_hidden(conn: psycopg.Connection, doc_id: str, keep: Optional[str] = None) -> int:
    """Deletes the rows of the document's retired versions and of versions staged by runs
    that no longer own it (keep, and the owning run's, stay), each in batches of
    limits.DELETE_BATCH_CHUNKS; returns how many rows went."""
    listed = conn.execute(
        "SELECT v.version, v.state, d.current_run_id FROM chunk_versions v JOIN documents d ON d.id = v.document_id"
        " WHERE v.document_id = %s", (doc_id,)).fetchall()
    return sum(discard(conn, doc_id, row["version"]) for row in listed
               if row["version"] != keep and not (row["state"] == STAGED and row["version"] == row["current_run_id"]))


def discard(conn: psycopg.Connection, doc_id: str, version: str) -> int:
    """Deletes a listed version's rows in batches, then unlists it: the last batch and the
    listing go in one transaction, after any batch that still writes it (FOR UPDATE waits
    for stage()'s FOR SHARE). The current version's rows are never deleted."""
    deleted = 0
    while True:
        with conn.transaction():
            listed = conn.execute("SELECT d.chunks_version FROM chunk_versions v JOIN documents d ON d.id = v.document_id"
                                  " WHERE v.document_id = %s AND v.version = %s FOR UPDATE OF v",
                                  (doc_id, version)).fetchone()
            if listed is None:
                return deleted
            if listed["chunks_version"] == version:  # current: listed by mistake, so shown
                conn.execute("DELETE FROM chunk_versions WHERE document_id = %s AND version = %s", (doc_id, version))
                return deleted
            gone = conn.execute(
                "DELETE FROM chunks WHERE id IN (SELECT id FROM chunks WHERE document_id = %s AND version = %s"
                " LIMIT %s)", (doc_id, version, limits.DELETE_BATCH_CHUNKS)).rowcount
            deleted += gone
            if gone < limits.DELETE_BATCH_CHUNKS:
                conn.execute("DELETE FROM chunk_versions WHERE document_id = %s AND version = %s", (doc_id, version))
                return deleted


def _owner(conn: psycopg.Connection, doc_id: str, run_id: Optional[str], *, lock: bool) -> Optional[dict]:
    owner = conn.execute("SELECT id, current_run_id, audience, chunks_version FROM documents WHERE id = %s"
                         + (" FOR UPDATE" if lock else ""), (doc_id,)).fetchone()
    if owner is None or (run_id is not None and owner["current_run_id"] != run_id):
        return None
    return owner


def _write(conn: psycopg.Connection, doc_id: str, kb_id: str, dim: int, version: str, audience: Optional[str],
           chunks: Iterable[Chunk]) -> None:
    """Multi-row INSERTs: BM25's statement triggers (migration 0011) run once per
    statement, not once per chunk as with executemany."""
    rows = [(doc_id, kb_id, version, c.chunk_index, c.content, c.page, json.dumps(c.headers), c.start_char,
             c.end_char, c.token_count, json.dumps(c.metadata), dim, np.asarray(c.embedding, dtype=np.float32),
             c.title, audience) for c in chunks]
    for at in range(0, len(rows), _ROWS_PER_STATEMENT):
        part = rows[at:at + _ROWS_PER_STATEMENT]
        conn.execute(f"INSERT INTO chunks ({_COLUMNS}) VALUES " + ", ".join([_ROW] * len(part)),
                     [value for row in part for value in row])


def _switch(conn: psycopg.Connection, owner: dict, doc_id: str, kb_id: str, version: str, count: int,
            page_count: Optional[int], content_hash: Optional[str], note: Optional[str] = None,
            clock: Optional[StepClock] = None) -> None:
    """Inside the caller's transaction, the document's row locked: the old version retired
    (when it has rows), the new one current, the document PROCESSED."""
    old = owner["chunks_version"]
    if conn.execute("SELECT EXISTS (SELECT 1 FROM chunks WHERE document_id = %s AND version = %s) AS found",
                    (doc_id, old)).fetchone()["found"]:
        conn.execute("INSERT INTO chunk_versions (document_id, version, kb_id, state) VALUES (%s, %s, %s, %s)"
                     " ON CONFLICT (document_id, version) DO UPDATE SET state = excluded.state",
                     (doc_id, old, kb_id, RETIRED))
    document_status.mark_processed(conn, doc_id, version=version, chunk_count=count, page_count=page_count,
                                   content_hash=content_hash, note=note, clock=clock)
