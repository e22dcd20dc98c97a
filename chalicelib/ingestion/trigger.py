"""The S3-notification Lambda: ObjectCreated starts the pipeline, ObjectRemoved deletes."""
import json
import logging
import secrets

from chalicelib.aws import client
from chalicelib.config import load_settings
from chalicelib.ingestion.objects import event_key, parse_document_key
from chalicelib.storage import connection, queries

logger = logging.getLogger(__name__)


def handle_s3_event(event: dict) -> dict:
    started, deleted, skipped = [], 0, 0
    for record in event.get("Records", []):
        key = event_key(record)
        parsed = parse_document_key(key)
        if parsed is None:
            skipped += 1
            continue
        kb_id, path = parsed
        if record.get("eventName", "").startswith("ObjectRemoved"):
            with connection() as conn:
                deleted += queries.delete_document_by_key(conn, kb_id, key)
            continue
        doc_id = _start_ingestion(record["s3"]["bucket"]["name"], key, kb_id, path,
                                  record["s3"]["object"].get("size"))
        if doc_id:
            started.append(doc_id)
        else:
            skipped += 1
    return {"started": started, "deleted": deleted, "skipped": skipped}


def _start_ingestion(bucket: str, key: str, kb_id: str, path: str, size) -> str | None:
    settings = load_settings()
    with connection() as conn:
        if queries.get_knowledge_base_for_pipeline(conn, kb_id) is None:
            logger.warning("object %s names unknown knowledge base %s; ignored", key, kb_id)
            return None
        doc = queries.upsert_pending_document(conn, kb_id=kb_id, s3_key=key,
                                              filename=path.rsplit("/", 1)[-1], size_bytes=size,
                                              metadata={})
    run_id = f"{doc['id']}-{secrets.token_hex(4)}"
    execution = client("stepfunctions").start_execution(
        stateMachineArn=settings.state_machine_arn, name=run_id,
        input=json.dumps({"documentId": doc["id"], "kbId": kb_id, "bucket": bucket,
                          "key": key, "runId": run_id}),
    )
    with connection() as conn:
        queries.set_document_execution(conn, doc["id"], execution["executionArn"])
    return doc["id"]
