"""document_status: a document's status and every statement that changes it. No other
module writes documents.status; each transition is one function here, and TRANSITIONS
says which statuses it leaves and the one it sets (tests/unit/test_document_status.py
reads each function's SQL and holds it to its row, and walks the table: every status
that is not a verdict has a way to one that the reconcile sweep takes by itself).

    (new) ─upsert_pending─> PENDING ─mark_processing─> PROCESSING ─mark_processed─> PROCESSED
      │                       │  └─mark_unchanged─> PROCESSED           └─mark_failed─> FAILED
      └─insert_entry─> PROCESSING (an entry: mark_processed in the same transaction)
    PENDING (a registration, no run) ─mark_upload_expired─> FAILED
    any ─claim_run / upsert_pending─> PENDING (a new run; PROCESSED and FAILED are verdicts,
    not dead ends: a new object or a restart begins again)

The pipeline's statements are guarded by the run id (a superseded run changes nothing),
not by the status; a registration's by the status it waits in."""
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Callable, Optional

import psycopg

from chalicelib.ids import new_id
from chalicelib.records import StepClock
from chalicelib.storage.documents import DOC_COLUMNS, STEP_DURATION_ADDED


class DocumentStatus(StrEnum):
    PENDING = "PENDING"        # waiting for its bytes or for its run to start
    PROCESSING = "PROCESSING"  # a run read new bytes and is indexing them
    PROCESSED = "PROCESSED"    # its chunks are the current version's (a verdict)
    FAILED = "FAILED"          # with an error code; the last good chunks stay searchable (a verdict)


PENDING, PROCESSING, PROCESSED, FAILED = DocumentStatus
STATUSES: tuple[str, ...] = tuple(s.value for s in DocumentStatus)  # the API's names, in this order
VERDICTS = frozenset({PROCESSED, FAILED})
IN_FLIGHT: tuple[str, ...] = tuple(s.value for s in DocumentStatus if s not in VERDICTS)
# Other names a filter may use for a status: seed 004's `completed` (its StatusCompleted).
ALIASES = {"COMPLETED": PROCESSED}


def parse_status(name: str) -> Optional[DocumentStatus]:
    """A status as a filter names it: any case, seed 004's `completed` for PROCESSED
    (None when it names no status)."""
    upper = name.strip().upper()
    return ALIASES.get(upper) or (DocumentStatus(upper) if upper in STATUSES else None)


def upsert_pending(conn: psycopg.Connection, *, kb_id: str, s3_key: str, filename: str,
                   size_bytes: Optional[int], run_id: Optional[str] = None, run_attempts: int = 0,
                   created_by: Optional[str] = None, original_url: Optional[str] = None) -> dict:
    """The document for an S3 key, now PENDING and owned by run_id (None: registered
    through the API, its bytes not yet come), its step timings reset for the new run.
    Its chunks stay searchable until a run replaces them. created_by is kept from the
    first registration; a registration sets original_url (None: uploaded bytes), a run
    leaves it as the registration said."""
    return conn.execute(
        "INSERT INTO documents (id, kb_id, s3_key, filename, size_bytes, current_run_id, run_attempts, status,"
        "   created_by, original_url)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, 'PENDING', %s, %s)"
        " ON CONFLICT (kb_id, s3_key) DO UPDATE SET status = 'PENDING', size_bytes = EXCLUDED.size_bytes,"
        "   current_run_id = EXCLUDED.current_run_id, run_attempts = EXCLUDED.run_attempts,"
        "   execution_arn = NULL, error_code = NULL, error_message = NULL,"
        "   step_durations = '{}'::jsonb, updated_at = now(),"
        "   created_by = coalesce(documents.created_by, EXCLUDED.created_by),"
        "   original_url = CASE WHEN EXCLUDED.current_run_id IS NULL THEN EXCLUDED.original_url"
        "                       ELSE documents.original_url END"
        f" RETURNING {DOC_COLUMNS}",
        (new_id("doc"), kb_id, s3_key, filename, size_bytes, run_id, run_attempts, created_by, original_url),
    ).fetchone()


def claim_run(conn: psycopg.Connection, doc_id: str, *, expected_run_id: Optional[str], run_id: str,
              run_attempts: int) -> Optional[dict]:
    """Compare-and-set: the document becomes PENDING under run_id only if the run it
    was read under still owns it (None otherwise: the trigger or another sweep got there
    first and its run must not be superseded)."""
    return conn.execute(
        "UPDATE documents SET status = 'PENDING', current_run_id = %s, run_attempts = %s, execution_arn = NULL,"
        " error_code = NULL, error_message = NULL, step_durations = '{}'::jsonb, updated_at = now()"
        f" WHERE id = %s AND current_run_id IS NOT DISTINCT FROM %s RETURNING {DOC_COLUMNS}",
        (run_id, run_attempts, doc_id, expected_run_id),
    ).fetchone()


def mark_processing(conn: psycopg.Connection, doc_id: str, run_id: str, *,
                    content_hash: str, size_bytes: int, metadata: dict) -> bool:
    """False when a newer run owns the document."""
    return conn.execute(
        "UPDATE documents SET status = 'PROCESSING', content_hash = %s, size_bytes = %s,"
        " metadata = %s, error_code = NULL, error_message = NULL, note = NULL, updated_at = now()"
        " WHERE id = %s AND current_run_id = %s",
        (content_hash, size_bytes, json.dumps(metadata), doc_id, run_id),
    ).rowcount == 1


def mark_unchanged(conn: psycopg.Connection, doc_id: str, run_id: str, metadata: dict) -> bool:
    """The bytes are the ones already indexed: no new embedding work. Changed
    metadata is copied onto the chunks in the same transaction."""
    with conn.transaction():
        updated = conn.execute(
            "UPDATE documents SET status = 'PROCESSED', error_code = NULL, error_message = NULL,"
            " metadata = %s, updated_at = now() WHERE id = %s AND current_run_id = %s",
            (json.dumps(metadata), doc_id, run_id)).rowcount == 1
        if updated:
            set_chunk_metadata(conn, doc_id, metadata)
    return updated


def set_chunk_metadata(conn: psycopg.Connection, doc_id: str, metadata: dict) -> None:
    """The document's metadata onto its chunks (the filters read it there): chunks whose
    text is unchanged keep their rows, so no new embedding or BM25 work."""
    conn.execute("UPDATE chunks SET metadata = %s WHERE document_id = %s AND metadata <> %s::jsonb",
                 (json.dumps(metadata), doc_id, json.dumps(metadata)))


def mark_processed(conn: psycopg.Connection, doc_id: str, *, version: str, chunk_count: int,
                   page_count: Optional[int], content_hash: Optional[str], note: Optional[str] = None,
                   clock: Optional[StepClock] = None) -> None:
    """The switch to a new chunk version (chunk_versions.py), inside its transaction with
    the document's row locked and its run checked there: the version current, its counts
    and the indexed hash recorded; note says why a document has no chunks; clock, the step
    that switches (Store), has its time so far added to the document's step durations."""
    step, millis = (clock.step, clock.millis()) if clock else (None, 0)
    conn.execute(
        "UPDATE documents SET status = 'PROCESSED', chunks_version = %s, chunk_count = %s,"
        " token_count = (SELECT coalesce(sum(token_count), 0) FROM chunks WHERE document_id = %s AND version = %s),"
        " page_count = %s, indexed_hash = coalesce(%s, content_hash), error_code = NULL, error_message = NULL,"
        " note = %s, processed_at = now(), updated_at = now(),"
        f" step_durations = {STEP_DURATION_ADDED} WHERE id = %s",
        (version, chunk_count, doc_id, version, page_count, content_hash, note, step, step, step, millis, doc_id))


def mark_failed(conn: psycopg.Connection, doc_id: str, run_id: str, code: str, message: str) -> bool:
    """FAILED with a code; the chunks of the last good version stay searchable. A run that
    switched the document to its chunks has given its verdict: a later step's fault (Finalize
    when the emulator stopped under it) does not undo it."""
    return conn.execute(
        "UPDATE documents SET status = 'FAILED', error_code = %s, error_message = %s,"
        " updated_at = now() WHERE id = %s AND current_run_id = %s AND status IN ('PENDING', 'PROCESSING')",
        (code, message[:2000], doc_id, run_id),
    ).rowcount == 1


def insert_entry(conn: psycopg.Connection, *, entry_id: str, kb_id: str, title: str, user_id: str,
                 metadata: dict, size_bytes: int, content_hash: str, level: Optional[str] = None,
                 entry_type: Optional[str] = None, confidence: Optional[float] = None,
                 agent_id: Optional[str] = None, provenance: Optional[list] = None) -> bool:
    """An entry, PROCESSING until its chunks are switched to in the same transaction.
    False (and nothing written) when the knowledge base holds an entry with this content
    for the same audience (migration 0014)."""
    return conn.execute(
        "INSERT INTO documents (id, kb_id, s3_key, filename, title, kind, created_by, metadata,"
        " content_type, size_bytes, status, content_hash, level, entry_type, confidence, agent_id, provenance)"
        " VALUES (%s, %s, %s, %s, %s, 'entry', %s, %s, 'text/plain', %s, 'PROCESSING', %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (kb_id, content_hash, (coalesce(audience, ''))) WHERE kind = 'entry' AND content_hash IS NOT NULL"
        " DO NOTHING",
        (entry_id, kb_id, f"entries/{entry_id}", title[:200], title, user_id, json.dumps(metadata), size_bytes,
         content_hash, level, entry_type, confidence, agent_id, json.dumps(provenance or [])),
    ).rowcount == 1


# A file registered through the API whose bytes have not come: no run owns it yet.
_WAITING_REGISTRATION = ("status = 'PENDING' AND kind = 'file' AND current_run_id IS NULL"
                         " AND execution_arn IS NULL")


def mark_upload_expired(conn: psycopg.Connection, doc_id: str) -> bool:
    return conn.execute(
        "UPDATE documents SET status = 'FAILED', error_code = 'UPLOAD_EXPIRED',"
        " error_message = 'the file was not uploaded before its upload URL expired; register it again',"
        f" updated_at = now() WHERE id = %s AND {_WAITING_REGISTRATION}",
        (doc_id,),
    ).rowcount == 1


# What the reconcile sweep looks at: between them, every document not at a verdict.

def unfinished(conn: psycopg.Connection, min_age_seconds: int) -> list[dict]:
    """Runs to look at: PENDING or PROCESSING under a run (whose execution may never
    have started), untouched for min_age_seconds doubled per restart already made
    (the backoff between restarts)."""
    return conn.execute(
        f"SELECT {DOC_COLUMNS} FROM documents"
        " WHERE status IN ('PENDING', 'PROCESSING') AND current_run_id IS NOT NULL"
        " AND updated_at < now() - make_interval(secs => %s * power(2, run_attempts))"
        " ORDER BY updated_at LIMIT 500",
        (min_age_seconds,),
    ).fetchall()


def stale_registrations(conn: psycopg.Connection, older_than_seconds: int) -> list[dict]:
    """Uploads registered through the API with no run yet, untouched for older_than_seconds."""
    return conn.execute(
        f"SELECT {DOC_COLUMNS} FROM documents WHERE {_WAITING_REGISTRATION}"
        " AND updated_at < now() - make_interval(secs => %s) ORDER BY updated_at LIMIT 500",
        (older_than_seconds,),
    ).fetchall()


NEW = None  # a transition's source: no row yet


@dataclass(frozen=True)
class Transition:
    function: Callable      # of this module; its SQL is the only one that sets `target`
    sources: frozenset      # the statuses (or NEW) the row may be in when it runs
    target: DocumentStatus
    callers: tuple[str, ...]  # the modules that call it
    why: str


_ANY = frozenset(DocumentStatus)
_SWEEP = "chalicelib.documents.reconcile"

TRANSITIONS: tuple[Transition, ...] = (
    Transition(upsert_pending, _ANY | {NEW}, PENDING,
               ("chalicelib.documents.uploads", "chalicelib.documents.runs"),
               "a file registered, or its object written, re-indexed or found by a sync: a new run supersedes any"),
    Transition(claim_run, _ANY, PENDING, ("chalicelib.documents.runs",),
               "a new run, only if the run read still owns it: the sweep restarting a run that ended"
               " without a verdict or a registration whose object came, a sync finding a newer object"),
    Transition(mark_processing, frozenset({PENDING, PROCESSING}), PROCESSING, ("chalicelib.ingestion.steps",),
               "Extract read bytes not yet indexed (PROCESSING: a retry of the step)"),
    Transition(mark_unchanged, frozenset({PENDING, PROCESSED}), PROCESSED, ("chalicelib.ingestion.steps",),
               "Extract read the bytes already indexed (PROCESSED: a retry of the step)"),
    Transition(mark_processed, frozenset({PENDING, PROCESSING}), PROCESSED, ("chalicelib.storage.chunk_versions",),
               "the switch to the run's chunks (Chunk or Store; an entry's write)"),
    Transition(insert_entry, frozenset({NEW}), PROCESSING, ("chalicelib.documents.entries",),
               "an entry, switched to its chunks in the same transaction"),
    Transition(mark_failed, frozenset({PENDING, PROCESSING}), FAILED,
               ("chalicelib.ingestion.steps", _SWEEP),
               "MarkFailed (never after the run's switch: a Finalize that failed leaves it PROCESSED), or the"
               " sweep: a run ended without a verdict more than MAX_RUN_ATTEMPTS times"),
    Transition(mark_upload_expired, frozenset({PENDING}), FAILED, (_SWEEP,),
               "the sweep: a registration's URL expired and its object is not in the bucket"),
)
