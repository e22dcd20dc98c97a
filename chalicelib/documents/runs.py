"""Ingestion runs: each start owns the document under a fresh run id (a newer run
supersedes an older one), and the execution is recorded for the reconcile sweep."""
import json
import logging
import secrets
from typing import Optional

from chalicelib.aws import client
from chalicelib.config import load_settings
from chalicelib.ingestion.model import RunState
from chalicelib.storage import connection, document_status, documents, knowledge_bases

logger = logging.getLogger(__name__)


def start_ingestion(bucket: str, key: str, kb_id: str, size: Optional[int], *, attempt: int = 0) -> Optional[str]:
    """The document's id, or None when the key names a knowledge base that is gone.
    attempt counts the reconcile sweep's restarts of a run that ended without a verdict."""
    run_id = secrets.token_hex(8)
    with connection() as conn:
        if knowledge_bases.get_for_pipeline(conn, kb_id) is None:
            logger.warning("object %s names unknown knowledge base %s; ignored", key, kb_id)
            return None
        doc = document_status.upsert_pending(conn, kb_id=kb_id, s3_key=key, filename=key.rsplit("/", 1)[-1],
                                             size_bytes=size, run_id=run_id, run_attempts=attempt)
    _start_execution(bucket, doc, run_id)
    return doc["id"]


def restart_run(bucket: str, doc: dict, *, attempt: int) -> bool:
    """A new run for a document read under doc["current_run_id"], only if that run
    still owns it; False when something else started one meanwhile."""
    run_id = secrets.token_hex(8)
    with connection() as conn:
        claimed = document_status.claim_run(conn, doc["id"], expected_run_id=doc["current_run_id"], run_id=run_id,
                                            run_attempts=attempt)
    if claimed is None:
        return False
    _start_execution(bucket, claimed, run_id)
    return True


def _start_execution(bucket: str, doc: dict, run_id: str) -> None:
    state = RunState(document_id=doc["id"], kb_id=doc["kb_id"], bucket=bucket, key=doc["s3_key"], run_id=run_id)
    execution = client("stepfunctions").start_execution(
        stateMachineArn=load_settings().state_machine_arn, name=f"{doc['id']}-{run_id}",
        input=json.dumps(state.to_json()))
    with connection() as conn:
        documents.set_execution(conn, doc["id"], run_id, execution["executionArn"])


def restart_for_sidecar(bucket: str, kb_id: str, document_key: str) -> Optional[str]:
    """A new `<key>.metadata.json` re-runs its document, which picks the metadata up
    without embedding again. Only a document whose bytes were seen is re-run;
    otherwise its own upload will be."""
    with connection() as conn:
        doc = documents.find_by_key(conn, kb_id, document_key)
    if doc is None or doc["content_hash"] is None:
        return None
    return start_ingestion(bucket, document_key, kb_id, doc["size_bytes"])
