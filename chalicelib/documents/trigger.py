"""The S3-notification Lambda: ObjectCreated starts the pipeline, ObjectRemoved deletes.

A sidecar `<key>.metadata.json` is not a document: it re-runs its document's
ingestion, which picks the new metadata up without embedding anything again."""
import logging
import time

from aws_lambda_powertools.utilities.data_classes import S3Event

from chalicelib.documents.runs import restart_for_sidecar, start_ingestion
from chalicelib.ingestion.objects import SIDECAR_SUFFIX, decoded_key, exists, parse_document_key
from chalicelib.errors import Invalid, Transient
from chalicelib.storage import connection, documents, reset as release_connection
from chalicelib.validate import check_text

logger = logging.getLogger(__name__)


# A database restart takes seconds: each record waits out about 15 s of it here
# before the event fails to Lambda's own retries and then the dead-letter queue.
RETRY_DELAYS_SECONDS = (1, 2, 4, 8)


def _with_retries(action, *args):
    for delay in (*RETRY_DELAYS_SECONDS, None):
        try:
            return action(*args)
        except Transient:
            if delay is None:
                raise
            logger.warning("database unavailable; retrying the S3 event in %d s", delay)
            time.sleep(delay)


def handle_s3_event(event: dict) -> dict:
    # A burst of objects opens a trigger worker per object (100 files at once opened 100 on
    # the local stack); had each kept its connection, the burst would hold PostgreSQL's 100
    # connections until the workers were reaped. One short transaction per object is cheap
    # to reconnect for.
    try:
        return _handle_records(event)
    finally:
        release_connection()


def _handle_records(event: dict) -> dict:
    started, deleted, skipped = [], 0, 0
    for record in S3Event(event).records if event.get("Records") else ():
        key = decoded_key(record.s3.get_object.key)
        parsed = parse_document_key(key)
        if parsed is None:
            skipped += 1
            continue
        try:
            check_text(key, "key")
        except Invalid:  # a NUL or a lone surrogate: no database row can name it
            logger.warning("object key %r cannot be stored as text; the object is not ingested", key)
            skipped += 1
            continue
        kb_id, _ = parsed
        bucket = record.s3.bucket.name
        if key.endswith(SIDECAR_SUFFIX):
            doc_id = _with_retries(restart_for_sidecar, bucket, kb_id, key[: -len(SIDECAR_SUFFIX)])
        elif record.event_name.startswith("ObjectRemoved"):
            deleted += _with_retries(_delete_by_key, bucket, kb_id, key)
            continue
        else:
            doc_id = _with_retries(start_ingestion, bucket, key, kb_id, record.s3.get_object.get("size"))
        if doc_id:
            started.append(doc_id)
        else:
            skipped += 1
    return {"started": started, "deleted": deleted, "skipped": skipped}


def _delete_by_key(bucket: str, kb_id: str, key: str) -> int:
    """Unless the key holds an object again: a late or replayed ObjectRemoved event
    must not delete the document of a newer upload."""
    if exists(bucket, key):
        return 0
    with connection() as conn:
        return documents.delete_by_key(conn, kb_id, key)
