"""The sweep that keeps every document moving toward a verdict. On a schedule:
- a run that ended without one (an emulator or Lambda restart, a lost execution) is
  started again, up to MAX_RUN_ATTEMPTS with a doubling wait (an emulator restart costs no
  attempt; `make up` runs this part at once after starting the emulator), then FAILED EXECUTION_ENDED;
- an upload registered through the API whose bytes never came ends FAILED UPLOAD_EXPIRED
  once its URL has expired (this part alone also every minute);
- S3 events the trigger could not handle (its dead-letter queue) are replayed;
- an extraction job whose function ended without a result ends FAILED JOB_ENDED;
- hourly, and on demand per knowledge base, the bucket is compared with the database."""
import json
import logging

from botocore.exceptions import ClientError

from chalicelib import metrics
from chalicelib.aws import client
from chalicelib.config import load_settings
from chalicelib.documents.runs import restart_run
from chalicelib.documents.sync import sync_knowledge_base
from chalicelib.documents.trigger import handle_s3_event
from chalicelib.ingestion import objects
from chalicelib.storage import connection, document_status, extraction_jobs, knowledge_bases

logger = logging.getLogger(__name__)
ENDED = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
MAX_RUN_ATTEMPTS = 3
# ministack's error for the executions it was running when it stopped (it does not resume them).
EMULATOR_RESTARTED = "States.ServiceRestart"
# A registration expires this long after its URL (settings.upload_url_seconds): the URL is
# signed a moment after the row is written, and a PUT begun at its very end still lands. One
# that lands later is not lost: its object's S3 event makes the document PENDING again.
REGISTRATION_GRACE_SECONDS = 30
# The jobs function runs for at most 900 s; a job untouched for longer than
# that plus a margin has no function left working on it.
EXTRACTION_JOB_STALLED_SECONDS = 1200


def reconcile(event: dict) -> dict:
    """Each part runs whatever another one meets (a fault in one is logged and reported)."""
    event = event if isinstance(event, dict) else {}
    parts = {"runs": lambda: reconcile_unfinished_documents(int(event.get("minAgeSeconds", 60))),
             "expired": expire_registrations, "deadLetters": replay_dead_letters,
             "extractionJobs": fail_stalled_extractions}
    if event.get("sync"):
        parts["sync"] = sync_all
    if event.get("only"):  # the minute's schedule: {"only": ["expired"]}
        parts = {name: part for name, part in parts.items() if name in event["only"]}
    report = {}
    for name, part in parts.items():
        try:
            report[name] = part()
        except Exception as exc:
            logger.exception("reconcile: %s failed", name)
            report[name] = {"error": type(exc).__name__}
    return report


def reconcile_unfinished_documents(min_age_seconds: int = 60) -> dict:
    sfn = client("stepfunctions")
    restarted, failed = [], []
    with connection() as conn:
        candidates = document_status.unfinished(conn, min_age_seconds)
    for doc in candidates:
        try:
            status, error = _execution_status(sfn, doc["execution_arn"])
            if status not in ENDED and status != "MISSING":
                continue  # still running
            # A run the emulator's restart ended says nothing of the document: it costs no attempt.
            attempt = doc["run_attempts"] + (error != EMULATOR_RESTARTED)
            if attempt <= MAX_RUN_ATTEMPTS:
                if restart_run(load_settings().bucket, doc, attempt=attempt):
                    restarted.append(doc["id"])
                continue
            with connection() as conn:
                if document_status.mark_failed(conn, doc["id"], doc["current_run_id"], "EXECUTION_ENDED",
                                               f"the ingestion run ended ({status}) without finishing the document,"
                                               f" {MAX_RUN_ATTEMPTS + 1} times"):
                    failed.append(doc["id"])
                    metrics.record_document_failed("EXECUTION_ENDED")
        except Exception:  # one document's fault must not hold up the others
            logger.exception("reconcile: document %s", doc["id"])
    if restarted or failed:
        logger.warning("runs without a verdict: restarted %s, failed %s", restarted, failed)
    return {"checked": len(candidates), "restarted": restarted, "failed": failed}


def fail_stalled_extractions(older_than_seconds: int = EXTRACTION_JOB_STALLED_SECONDS) -> dict:
    with connection() as conn:
        failed = extraction_jobs.fail_stalled(
            conn, older_than_seconds, f"the extraction stopped without a result (nothing for {older_than_seconds} s);"
            " post the conversation again")
    if failed:
        logger.warning("extraction jobs without a result: failed %s", failed)
    return {"failed": failed}


def _execution_status(sfn, execution_arn) -> tuple[str, str | None]:
    """(status, error) of the run's execution."""
    if not execution_arn:
        return "MISSING", None  # the run's StartExecution never succeeded
    try:
        described = sfn.describe_execution(executionArn=execution_arn)
    except ClientError as err:
        if err.response["Error"]["Code"] != "ExecutionDoesNotExist":
            raise
        return "MISSING", None
    return described["status"], described.get("error")


def expire_registrations() -> list[str]:
    """Registrations whose URL has expired: FAILED UPLOAD_EXPIRED, unless their object is in
    the bucket (its S3 event was lost, or is still on its way): that one is ingested instead.
    Run every minute (infra/template.yaml), so a registration expires within about a
    minute and a half of its URL."""
    settings, expired = load_settings(), []
    bucket = settings.bucket
    with connection() as conn:
        stale = document_status.stale_registrations(conn, settings.upload_url_seconds + REGISTRATION_GRACE_SECONDS)
    for doc in stale:
        try:
            if objects.exists(bucket, doc["s3_key"]):
                restart_run(bucket, doc, attempt=0)
                continue
            with connection() as conn:
                if document_status.mark_upload_expired(conn, doc["id"]):
                    expired.append(doc["id"])
        except Exception:
            logger.exception("reconcile: registration %s", doc["id"])
    if expired:
        logger.warning("uploads that never came: %s", expired)
    return expired


def replay_dead_letters(max_messages: int = 100) -> dict:
    """Each message holds the S3 event the trigger failed on (Lambda's OnFailure
    record: {"requestPayload": …}); it is deleted once the event is handled."""
    url = load_settings().trigger_dlq_url
    if not url:
        return {"replayed": 0, "left": 0}
    sqs, replayed, left = client("sqs"), 0, 0
    while replayed + left < max_messages:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                       VisibilityTimeout=60).get("Messages", [])
        if not messages:
            break
        for message in messages:
            try:
                record = json.loads(message["Body"])
                handle_s3_event(record.get("requestPayload", record))
            except Exception:  # kept for the next sweep; SQS's retention bounds it
                logger.exception("could not replay a dead-lettered S3 event")
                left += 1
                continue
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            replayed += 1
    return {"replayed": replayed, "left": left}


def sync_all() -> dict:
    with connection() as conn:
        kb_ids = knowledge_bases.all_ids(conn)
    totals = {"knowledgeBases": len(kb_ids), "added": 0, "changed": 0, "removed": 0}
    for kb_id in kb_ids:
        try:
            report = sync_knowledge_base(kb_id)
        except Exception:
            logger.exception("sync: knowledge base %s", kb_id)
            continue
        for name in ("added", "changed", "removed"):
            totals[name] += getattr(report, name)
    return totals
