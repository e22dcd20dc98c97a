"""Uploading, reading, deleting and re-indexing documents."""
import base64
import binascii
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Optional

from chalicelib.auth import Principal
from chalicelib.aws import client
from chalicelib.config import load_settings
from chalicelib.ingestion.objects import SIDECAR_SUFFIX
from chalicelib.ingestion.trigger import start_ingestion
from chalicelib.knowledge_bases.service import document_view
from chalicelib.storage import connection, queries

INLINE_LIMIT_BYTES = 5 * 1024 * 1024
PRESIGNED_EXPIRY_SECONDS = 900
EXTENSIONS = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
    ".html": "text/html", ".htm": "text/html",
}
CONTENT_TYPES = set(EXTENSIONS.values()) | {"text/x-markdown", "application/xhtml+xml"}


class UploadRejected(Exception):
    """Bad upload request: status 400, 413 or 415, a code, a message naming the field."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class UploadRequest:
    filename: str
    content_type: Optional[str]
    size: Optional[int]
    metadata: dict
    content_base64: Optional[str] = None


def sanitize_filename(name: str) -> str:
    """A safe object name: the last path segment, no control characters, no traversal."""
    name = unicodedata.normalize("NFC", name).replace("\\", "/").split("/")[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip().strip(".")
    name = re.sub(r"[^\w.\- ()]+", "_", name)[:200]
    if not name or not re.search(r"\w", name):
        raise UploadRejected(400, "INVALID_INPUT", "filename: must name a file (letters or digits)")
    return name


def _check_type(filename: str, content_type: Optional[str]) -> None:
    extension = ("." + filename.rsplit(".", 1)[-1].lower()) if "." in filename else ""
    if extension not in EXTENSIONS:
        raise UploadRejected(415, "UNSUPPORTED_TYPE",
                             f"filename: {extension or 'no extension'} is not supported; "
                             f"use one of {', '.join(sorted(EXTENSIONS))}")
    if content_type and content_type.split(";")[0].strip().lower() not in CONTENT_TYPES:
        raise UploadRejected(415, "UNSUPPORTED_TYPE", f"contentType: {content_type} is not supported")


def _decode_inline(data: str) -> bytes:
    if len(data) > (INLINE_LIMIT_BYTES * 4) // 3 + 8:
        raise UploadRejected(413, "FILE_TOO_LARGE", f"content: inline uploads are limited to {INLINE_LIMIT_BYTES} bytes")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise UploadRejected(400, "INVALID_INPUT", "content: must be base64") from None
    if len(raw) > INLINE_LIMIT_BYTES:
        raise UploadRejected(413, "FILE_TOO_LARGE", f"content: inline uploads are limited to {INLINE_LIMIT_BYTES} bytes")
    return raw


def upload(principal: Principal, kb_id: str, request: UploadRequest) -> Optional[dict]:
    """Register a document and return where to PUT its bytes (or store inline
    bytes right away). None when the caller may not write the knowledge base."""
    settings = load_settings()
    filename = sanitize_filename(request.filename)
    _check_type(filename, request.content_type)
    raw = _decode_inline(request.content_base64) if request.content_base64 is not None else None
    size = len(raw) if raw is not None else request.size
    if size is None or size <= 0:
        raise UploadRejected(400, "INVALID_INPUT", "size: must be a positive number of bytes")
    if size > settings.max_file_bytes:
        raise UploadRejected(413, "FILE_TOO_LARGE", f"size: {size} bytes is over the limit of {settings.max_file_bytes}")
    with connection() as conn:
        if queries.get_writable_knowledge_base(conn, principal, kb_id) is None:
            return None
        key = f"kb/{kb_id}/{filename}"
        doc = queries.upsert_pending_document(conn, kb_id=kb_id, s3_key=key, filename=filename, size_bytes=size)
    s3 = client("s3")
    if request.metadata:
        s3.put_object(Bucket=settings.bucket, Key=key + SIDECAR_SUFFIX, ContentType="application/json",
                      Body=json.dumps({"metadataAttributes": request.metadata}).encode())
    content_type = request.content_type or EXTENSIONS["." + filename.rsplit(".", 1)[-1].lower()]
    answer = {"document": document_view(doc)}
    if raw is not None:
        s3.put_object(Bucket=settings.bucket, Key=key, Body=raw, ContentType=content_type)
    else:
        answer["upload"] = {
            "method": "PUT", "headers": {"Content-Type": content_type},
            "expiresIn": PRESIGNED_EXPIRY_SECONDS,
            "url": s3.generate_presigned_url("put_object", ExpiresIn=PRESIGNED_EXPIRY_SECONDS, Params={
                "Bucket": settings.bucket, "Key": key, "ContentType": content_type}),
        }
    return answer


def _visible_document(conn, principal, kb_id: str, doc_id: str, writable: bool) -> Optional[dict]:
    find = queries.get_writable_knowledge_base if writable else queries.get_visible_knowledge_base
    if find(conn, principal, kb_id) is None:
        return None
    return queries.get_document_in(conn, kb_id, doc_id)


def get_document(principal: Principal, kb_id: str, doc_id: str) -> Optional[dict]:
    with connection() as conn:
        doc = _visible_document(conn, principal, kb_id, doc_id, writable=False)
    return document_view(doc) if doc else None


def delete_document(principal: Principal, kb_id: str, doc_id: str) -> bool:
    with connection() as conn:
        doc = _visible_document(conn, principal, kb_id, doc_id, writable=True)
        if doc is None:
            return False
        queries.delete_document(conn, doc_id)
    if doc["kind"] == "file":
        s3 = client("s3")
        bucket = load_settings().bucket
        s3.delete_objects(Bucket=bucket, Delete={"Quiet": True, "Objects": [
            {"Key": doc["s3_key"]}, {"Key": doc["s3_key"] + SIDECAR_SUFFIX}]})
    return True


def reindex_document(principal: Principal, kb_id: str, doc_id: str) -> Optional[dict]:
    """Run the pipeline again and embed anew, even if the bytes did not change."""
    with connection() as conn:
        doc = _visible_document(conn, principal, kb_id, doc_id, writable=True)
        if doc is None:
            return None
        if doc["kind"] != "file":
            raise UploadRejected(400, "NOT_A_FILE", "entries are indexed when they are written; write it again")
        queries.forget_indexed_version(conn, doc_id)
    start_ingestion(load_settings().bucket, doc["s3_key"], kb_id, doc["size_bytes"])
    with connection() as conn:
        return document_view(queries.get_document(conn, doc_id))
