"""Uploading a document: a safe name, a supported type, a size within the limits;
the bytes go to S3 inline or through a presigned PUT, and the S3 trigger ingests them."""
import base64
import binascii
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Optional

from chalicelib import limits
from chalicelib.auth import Principal
from chalicelib.auth.access import kb_to_write
from chalicelib.aws import client, s3_presigner
from chalicelib.config import load_settings
from chalicelib.errors import Invalid, TooLarge, Unsupported
from chalicelib.ingestion.objects import SIDECAR_SUFFIX, document_key
from chalicelib.storage import audit, connection, documents

EXTENSIONS = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown",
    ".html": "text/html", ".htm": "text/html",
}
CONTENT_TYPES = set(EXTENSIONS.values()) | {"text/x-markdown", "application/xhtml+xml"}


@dataclass(frozen=True)
class UploadRequest:
    filename: str
    content_type: Optional[str]
    size: Optional[int]
    metadata: dict
    content_base64: Optional[str] = None


@dataclass(frozen=True)
class PresignedPut:
    """A PUT of exactly `size` bytes of `content_type`: the URL signs both."""
    url: str
    content_type: str
    size: int
    expires_in: int


@dataclass(frozen=True)
class Upload:
    document: dict  # the document's row, PENDING
    put: Optional[PresignedPut]  # where to PUT the bytes; None when they came inline


def sanitize_filename(name: str) -> str:
    """A safe object name: the last path segment, no control characters, no traversal."""
    name = unicodedata.normalize("NFC", name).replace("\\", "/").split("/")[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip().strip(".")
    name = re.sub(r"[^\w.\- ()]+", "_", name)[:200]
    if not name or not re.search(r"\w", name):
        raise Invalid.field("filename", "must name a file (letters or digits)")
    return name


def _check_type(filename: str, content_type: Optional[str]) -> None:
    extension = ("." + filename.rsplit(".", 1)[-1].lower()) if "." in filename else ""
    if extension not in EXTENSIONS:
        raise Unsupported(f"filename: {extension or 'no extension'} is not supported; "
                          f"use one of {', '.join(sorted(EXTENSIONS))}")
    if content_type and content_type.split(";")[0].strip().lower() not in CONTENT_TYPES:
        raise Unsupported(f"contentType: {content_type} is not supported")


def _decode_inline(data: str) -> bytes:
    limit = limits.INLINE_UPLOAD_MAX_BYTES
    if len(data) > (limit * 4) // 3 + 8:
        raise TooLarge(f"content: inline uploads are limited to {limit} bytes")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise Invalid.field("content", "must be base64") from None
    if len(raw) > limit:
        raise TooLarge(f"content: inline uploads are limited to {limit} bytes")
    return raw


def upload(principal: Principal, kb_id: str, request: UploadRequest) -> Upload:
    """Register a document and return where to PUT its bytes (or store inline
    bytes right away). access.kb_to_write says who may."""
    settings = load_settings()
    filename = sanitize_filename(request.filename)
    _check_type(filename, request.content_type)
    raw = _decode_inline(request.content_base64) if request.content_base64 is not None else None
    size = len(raw) if raw is not None else request.size
    if size is None or size <= 0:
        raise Invalid.field("size", "must be a positive number of bytes")
    if size > settings.max_file_bytes:
        raise TooLarge(f"size: {size} bytes is over the limit of {settings.max_file_bytes}")
    key = document_key(kb_id, filename)
    with connection() as conn, conn.transaction():
        kb_to_write(conn, principal, kb_id, "upload documents")
        doc = documents.upsert_pending(conn, kb_id=kb_id, s3_key=key, filename=filename, size_bytes=size)
        audit.write(conn, principal, "upload_document", "document", doc["id"],
                    after={"knowledgeBaseId": kb_id, "filename": filename, "size": size,
                           "inline": raw is not None})
    s3 = client("s3")
    if request.metadata:
        s3.put_object(Bucket=settings.bucket, Key=key + SIDECAR_SUFFIX, ContentType="application/json",
                      Body=json.dumps({"metadataAttributes": request.metadata}).encode())
    content_type = request.content_type or EXTENSIONS["." + filename.rsplit(".", 1)[-1].lower()]
    if raw is not None:
        s3.put_object(Bucket=settings.bucket, Key=key, Body=raw, ContentType=content_type)
        return Upload(document=doc, put=None)
    expires = limits.PRESIGNED_EXPIRY_SECONDS
    url = s3_presigner().generate_presigned_url("put_object", ExpiresIn=expires, Params={
        "Bucket": settings.bucket, "Key": key, "ContentType": content_type, "ContentLength": size})
    return Upload(document=doc, put=PresignedPut(url=url, content_type=content_type, size=size,
                                                 expires_in=expires))
