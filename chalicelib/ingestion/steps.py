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
from chalicelib.ingestion.extract import Extracted, extract
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


def extract_step(event: dict) -> dict:
    with _step(event, "extract"):
        data = objects.read_bytes(event["bucket"], event["key"])
        extracted = extract(data, event["key"].rsplit("/", 1)[-1])
        with connection() as conn:
            queries.mark_document_processing(
                conn, event["documentId"], content_type=extracted.content_type,
                content_hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))
        extracted_key = objects.write_json(event["bucket"], _work_key(event, "extracted.json"),
                                           extracted.to_dict())
    return {**event, "extractedKey": extracted_key, "pageCount": extracted.page_count}


def chunk_step(event: dict) -> dict:
    with _step(event, "chunk"):
        with connection() as conn:
            kb = _knowledge_base(conn, event["kbId"])
            doc = queries.get_document(conn, event["documentId"])
        extracted = Extracted.from_dict(objects.read_json(event["bucket"], event["extractedKey"]))
        chunks = chunk_document(extracted, kb["chunk_tokens"], kb["chunk_overlap"],
                                doc["metadata"] if doc else {})
        if not chunks:
            raise IngestionError("NO_TEXT", "the document has no text to index")
        batches = [
            objects.write_json(event["bucket"], _work_key(event, f"chunks-{i:05d}.json"),
                               chunks[start:start + EMBED_BATCH])
            for i, start in enumerate(range(0, len(chunks), EMBED_BATCH))
        ]
    return {**event, "batches": batches, "chunkCount": len(chunks)}


def embed_step(event: dict) -> str:
    """One Map iteration: embed a batch of chunks; returns the key of the embedded batch."""
    with _step(event, "embed"):
        with connection() as conn:
            kb = _knowledge_base(conn, event["kbId"])
        chunks = objects.read_json(event["bucket"], event["batchKey"])
        vectors = get_provider(kb["embedding_provider"]).embed_documents([c["content"] for c in chunks])
        for chunk, vector in zip(chunks, vectors):
            chunk["embedding"] = vector
        return objects.write_json(event["bucket"], event["batchKey"].replace("chunks-", "embedded-"), chunks)


def store_step(event: dict) -> dict:
    with _step(event, "store"):
        chunks = [c for key in event["embedded"] for c in objects.read_json(event["bucket"], key)]
        with connection() as conn:
            kb = _knowledge_base(conn, event["kbId"])
            queries.replace_document_chunks(conn, doc_id=event["documentId"], kb_id=event["kbId"],
                                            dim=kb["embedding_dim"], chunks=chunks,
                                            page_count=event.get("pageCount"))
    return {k: v for k, v in event.items() if k not in ("embedded", "batches")}


def finalize_step(event: dict) -> dict:
    _clean_work(event)
    return {"documentId": event["documentId"], "status": "PROCESSED", "chunkCount": event.get("chunkCount")}


def mark_failed_step(event: dict) -> dict:
    code, message = failure_from_error(event.get("error") or {})
    logger.warning("document %s failed: %s %s", event.get("documentId"), code, message)
    with connection() as conn:
        queries.mark_document_failed(conn, event["documentId"], code, message)
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
