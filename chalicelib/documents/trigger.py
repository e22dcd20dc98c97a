"""The S3-notification Lambda: ObjectCreated starts the pipeline, ObjectRemoved deletes.
The bucket's notifications reach it in batches through an SQS queue (S3Events).

A sidecar `<key>.metadata.json` is not a document: it re-runs its document's
ingestion, which picks the new metadata up without embedding anything again."""
import json
import logging
import time

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes import S3Event
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from chalicelib import freshness
from chalicelib.documents.runs import restart_for_sidecar, start_ingestion
from chalicelib.ingestion.objects import SIDECAR_SUFFIX, decoded_key, exists, parse_document_key
from chalicelib.errors import Invalid, Transient
from chalicelib.storage import connection, documents
from chalicelib.validate import check_text

logger = logging.getLogger(__name__)


# A database restart takes seconds: a record waits out about 15 s of it here before its
# message goes back to the queue (seen again after the visibility timeout, five times,
# then the dead-letter queue that the reconcile sweep replays).
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


def handle_event(event: dict) -> dict:
    """A batch from the S3 events queue, or an S3 notification itself (a dead letter
    being replayed, or a bucket notifying the function directly)."""
    records = event.get("Records") or []
    if records and isinstance(records[0], dict) and records[0].get("eventSource") == "aws:sqs":
        return handle_queue_batch(event)
    return handle_s3_event(event)


def handle_queue_batch(event: dict) -> dict:
    """Each message is an S3 notification. The messages that failed are reported back
    (ReportBatchItemFailures, through Powertools' BatchProcessor), so only they are seen
    again; when the database is down the rest of the batch goes back untried rather than
    waiting out the outage each."""
    totals = {"started": [], "deleted": 0, "skipped": 0}
    outage = []  # the Transient that ended the batch's work, once there is one

    def handle(record: SQSRecord) -> None:
        if outage:
            raise Transient("handed back untried: the database was unavailable for an earlier message") from outage[0]
        try:
            notification = json.loads(record.body)
        except ValueError:
            logger.warning("a message that is not an S3 notification was dropped: %r", record.body[:200])
            return
        if not isinstance(notification, dict) or "Records" not in notification:
            return  # s3:TestEvent, which S3 sends when the notification is configured
        try:
            result = handle_s3_event(notification)
        except Transient as exc:
            outage.append(exc)
            raise
        except Exception:
            logger.exception("an S3 notification failed; its message will be seen again")
            raise
        for name in totals:
            totals[name] += result[name]

    # A batch that fails whole is reported as such, not raised: the same redrive either way,
    # without an invocation error for every outage.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    answer = process_partial_response(event=event, record_handler=handle, processor=processor)
    logger.info("%d messages: %d runs started, %d documents deleted, %d skipped, %d handed back",
                len(event["Records"]), len(totals["started"]), totals["deleted"], totals["skipped"],
                len(answer["batchItemFailures"]))
    return {**totals, **answer}


def handle_s3_event(event: dict) -> dict:
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
        elif not exists(bucket, key):
            # A late or replayed ObjectCreated for an object deleted since (a source mirror's copy
            # whose original went, measured on a loaded CI runner): it would bring the document
            # back, to fail on the missing object. As _delete_by_key's check, the other way.
            logger.info("object %s is gone; its ObjectCreated event starts nothing", key)
            doc_id = None
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
        deleted = documents.delete_by_key(conn, kb_id, key)
    if deleted:
        freshness.bump(kb_id)
    return deleted
