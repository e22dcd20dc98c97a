"""The Lambda tasks of the ingestion state machine (infra/ingestion.asl.json).

Each step reads its input from S3 references and writes its output back to S3,
so the state machine's payload stays small whatever the document's size.
"""
import hashlib
import json
import logging
import time
from contextlib import contextmanager

import psycopg
from botocore.exceptions import BotoCoreError, ClientError

from chalicelib.config import load_settings
from chalicelib.embeddings import get_provider
from chalicelib.ingestion import objects
from chalicelib.ingestion.chunk import chunk_document
from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.extract import Extracted, Limits, extract
from chalicelib.storage import connection, queries

logger = logging.getLogger(__name__)
EMBED_BATCH = 64


class TransientError(Exception):
    """A fault worth retrying (database or S3 unreachable); the state machine retries it."""


@contextmanager
def _step(event: dict, name: str):
    started = time.monotonic()
    try:
        yield
    except (psycopg.OperationalError, BotoCoreError) as exc:
        raise TransientError(f"{name}: {exc}") from exc
    except ClientError as exc:
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500) >= 500:
            raise TransientError(f"{name}: {exc}") from exc
        raise
    with connection() as conn:
        queries.record_step_duration(conn, event["documentId"], name,
                                     int((time.monotonic() - started) * 1000))


def _work_key(event: dict, name: str) -> str:
    return objects.work_key(load_settings().work_prefix, event["documentId"], event["runId"], name)


def _knowledge_base(conn, kb_id: str) -> dict:
    kb = queries.get_knowledge_base_for_pipeline(conn, kb_id)
    if kb is None:
        raise IngestionError("KB_NOT_FOUND", f"knowledge base {kb_id} no longer exists")
    return kb


def _failed(event: dict, err: IngestionError) -> dict:
    """A document that cannot be ingested is an answer, not a fault: the state
    machine routes it to MarkFailed without retrying."""
    return {**event, "outcome": "FAILED", "failure": {"code": err.code, "message": err.message}}


def extract_step(event: dict) -> dict:
    settings = load_settings()
    bucket, key, doc_id, run_id = event["bucket"], event["key"], event["documentId"], event["runId"]
    with _step(event, "extract"):
        try:
            head = objects.head(bucket, key)
            if head["ContentLength"] > settings.max_file_bytes:
                raise IngestionError("FILE_TOO_LARGE", f"the file has {head['ContentLength']} bytes;"
                                                       f" the limit is {settings.max_file_bytes}")
            metadata = {**head.get("Metadata", {}), **objects.read_sidecar_metadata(bucket, key)}
            data = objects.read_bytes(bucket, key)
            content_hash = hashlib.sha256(data).hexdigest()
            with connection() as conn:
                doc = queries.get_document(conn, doc_id)
                if doc is None or doc["current_run_id"] != run_id:
                    return {**event, "outcome": "UNCHANGED", "superseded": True}
                if doc["indexed_hash"] == content_hash:
                    queries.mark_document_unchanged(conn, doc_id, run_id, metadata)
                    return {**event, "outcome": "UNCHANGED"}
                queries.mark_document_processing(conn, doc_id, run_id, content_hash=content_hash,
                                                  size_bytes=len(data), metadata=metadata)
            extracted = extract(data, key.rsplit("/", 1)[-1],
                                Limits(settings.max_pages, settings.max_uncompressed_bytes))
        except IngestionError as err:
            return _failed(event, err)
        with connection() as conn:
            queries.set_document_content_type(conn, doc_id, extracted.content_type)
        extracted_key = objects.write_json(bucket, _work_key(event, "extracted.json"), extracted.to_dict())
    return {**event, "outcome": "EXTRACTED", "extractedKey": extracted_key,
            "pageCount": extracted.page_count, "contentHash": content_hash}


def chunk_step(event: dict) -> dict:
    with _step(event, "chunk"):
        with connection() as conn:
            kb = queries.get_knowledge_base_for_pipeline(conn, event["kbId"])
            doc = queries.get_document(conn, event["documentId"])
        if kb is None or doc is None:
            return _failed(event, IngestionError("KB_NOT_FOUND", "the knowledge base or document was deleted"))
        extracted = Extracted.from_dict(objects.read_json(event["bucket"], event["extractedKey"]))
        chunks = chunk_document(extracted, kb["chunk_tokens"], kb["chunk_overlap"], doc["metadata"])
        if not chunks:
            return _failed(event, IngestionError("NO_TEXT", "the document has no text to index"))
        batches = [
            objects.write_json(event["bucket"], _work_key(event, f"chunks-{i:05d}.json"),
                               chunks[start:start + EMBED_BATCH])
            for i, start in enumerate(range(0, len(chunks), EMBED_BATCH))
        ]
    return {**event, "outcome": "CHUNKED", "batches": batches, "chunkCount": len(chunks)}


def embed_step(event: dict) -> str:
    """One Map iteration: embed a batch of chunks; returns the key of the embedded batch."""
    with _step(event, "embed"):
        with connection() as conn:
            kb = _knowledge_base(conn, event["kbId"])
        chunks = objects.read_json(event["bucket"], event["batchKey"])
        vectors = get_provider(kb["embedding_provider"], kb["embedding_model"]).embed_documents(
            [c["content"] for c in chunks])
        for chunk, vector in zip(chunks, vectors):
            chunk["embedding"] = vector
        return objects.write_json(event["bucket"], event["batchKey"].replace("chunks-", "embedded-"), chunks)


def store_step(event: dict) -> dict:
    with _step(event, "store"):
        chunks = [c for key in event["embedded"] for c in objects.read_json(event["bucket"], key)]
        with connection() as conn:
            kb = _knowledge_base(conn, event["kbId"])
            stored = queries.replace_document_chunks(
                conn, doc_id=event["documentId"], kb_id=event["kbId"], dim=kb["embedding_dim"],
                chunks=chunks, page_count=event.get("pageCount"), run_id=event["runId"],
                content_hash=event.get("contentHash"))
    slim = {k: v for k, v in event.items() if k not in ("embedded", "batches")}
    return {**slim, "outcome": "STORED" if stored else "SUPERSEDED"}


def finalize_step(event: dict) -> dict:
    _clean_work(event)
    return {"documentId": event["documentId"], "outcome": event.get("outcome"),
            "chunkCount": event.get("chunkCount")}


def mark_failed_step(event: dict) -> dict:
    if event.get("failure"):
        code, message = event["failure"]["code"], event["failure"]["message"]
    else:
        code, message = failure_from_error(event.get("error") or {})
    logger.warning("document %s failed: %s %s", event.get("documentId"), code, message)
    with connection() as conn:
        queries.mark_document_failed(conn, event["documentId"], event["runId"], code, message)
    _clean_work(event)
    return {"documentId": event["documentId"], "status": "FAILED", "errorCode": code}


def failure_from_error(error: dict) -> tuple[str, str]:
    """(code, message) from the Error/Cause that a Catch put into the state.

    An IngestionError's message is JSON with its code. AWS names the error after
    the exception class; ministack's warm workers call every handler error
    Runtime.HandlerError, so the message is parsed whatever the name."""
    name, cause = error.get("Error", "INTERNAL_ERROR"), error.get("Cause", "")
    try:
        detail = json.loads(cause)
    except (TypeError, ValueError):
        detail = {"errorMessage": cause}
    message = detail.get("errorMessage", "") if isinstance(detail, dict) else str(detail)
    try:
        parsed = json.loads(message)
        if isinstance(parsed, dict) and {"code", "message"} <= parsed.keys():
            return str(parsed["code"]), str(parsed["message"])
    except (TypeError, ValueError):
        pass
    if name == "States.Timeout" or name == "Sandbox.Timedout":
        return "TIMEOUT", "a pipeline step ran out of time"
    return "INTERNAL_ERROR", f"{name}: {message}"[:2000]


def _clean_work(event: dict) -> None:
    try:
        objects.delete_prefix(event["bucket"], _work_key(event, ""))
    except (BotoCoreError, ClientError):
        logger.warning("could not delete the pipeline's work objects", exc_info=True)
