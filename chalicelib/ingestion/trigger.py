"""The S3-notification Lambda: ObjectCreated starts the pipeline, ObjectRemoved deletes.

A sidecar `<key>.metadata.json` is not a document: it re-runs its document's
ingestion, which picks the new metadata up without embedding anything again."""
import json
import logging
import secrets

from chalicelib.aws import client
from chalicelib.config import load_settings
from chalicelib.ingestion.objects import SIDECAR_SUFFIX, event_key, parse_document_key
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
        bucket = record["s3"]["bucket"]["name"]
        removed = record.get("eventName", "").startswith("ObjectRemoved")
        if key.endswith(SIDECAR_SUFFIX):
            doc_id = _restart_for_sidecar(bucket, kb_id, key[: -len(SIDECAR_SUFFIX)])
        elif removed:
            with connection() as conn:
                deleted += queries.delete_document_by_key(conn, kb_id, key)
            continue
        else:
            doc_id = start_ingestion(bucket, key, kb_id, record["s3"]["object"].get("size"))
        if doc_id:
            started.append(doc_id)
        else:
            skipped += 1
    return {"started": started, "deleted": deleted, "skipped": skipped}


def _restart_for_sidecar(bucket: str, kb_id: str, document_key: str):
    with connection() as conn:
        doc = queries.find_document_by_key(conn, kb_id, document_key)
    # Only a document whose bytes were seen is re-run; otherwise its own upload will be.
    if doc is None or doc["content_hash"] is None:
        return None
    return start_ingestion(bucket, document_key, kb_id, doc["size_bytes"])


def start_ingestion(bucket: str, key: str, kb_id: str, size) -> str | None:
    settings = load_settings()
    run_id = secrets.token_hex(8)
    with connection() as conn:
        if queries.get_knowledge_base_for_pipeline(conn, kb_id) is None:
            logger.warning("object %s names unknown knowledge base %s; ignored", key, kb_id)
            return None
        doc = queries.upsert_pending_document(conn, kb_id=kb_id, s3_key=key,
                                              filename=key.rsplit("/", 1)[-1], size_bytes=size,
                                              run_id=run_id)
    execution = client("stepfunctions").start_execution(
        stateMachineArn=settings.state_machine_arn, name=f"{doc['id']}-{run_id}",
        input=json.dumps({"documentId": doc["id"], "kbId": kb_id, "bucket": bucket,
                          "key": key, "runId": run_id}),
    )
    with connection() as conn:
        queries.set_document_execution(conn, doc["id"], execution["executionArn"])
    return doc["id"]
