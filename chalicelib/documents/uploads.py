"""Uploading a document: a safe path (its identity in the knowledge base), not a binary type,
a size within the limits; the bytes go to S3 inline or through a presigned PUT, and the S3
trigger ingests them."""
import base64
import binascii
import hashlib
import json
import mimetypes
import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Optional

from chalicelib import limits, metrics
from chalicelib.auth import Principal
from chalicelib.auth.access import kb_to_write
from chalicelib.aws import client, s3_presigner
from chalicelib.config import load_settings
from chalicelib.documents import url_fetch
from chalicelib.errors import Invalid, TooLarge, Unsupported
from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.extract import HEAD_BYTES, refused_by_content, refused_by_name, sniff_type
from chalicelib.ingestion.objects import SIDECAR_SUFFIX, document_key
from chalicelib.paths import clean_path
from chalicelib.storage import audit, connection, document_status, documents
from chalicelib.storage.document_status import PROCESSED, PROCESSING

# The Content-Type an object gets in S3 when the caller names none: a hint for whoever
# downloads it. What the pipeline does with the bytes it decides from the bytes (extract.sniff_type).
FALLBACK_CONTENT_TYPE = "application/octet-stream"
_MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][\w.+-]*/[\w.+-]+(\s*;.*)?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class UploadRequest:
    path: Optional[str]  # below the knowledge base: "guides/install/index.html" (a bare name is a path too)
    content_type: Optional[str]
    size: Optional[int]
    metadata: dict
    content_base64: Optional[str] = None
    sha256: Optional[str] = None  # of the bytes, hex: the same bytes at the same path are "unchanged"
    url: Optional[str] = None  # fetched by the API (url_fetch); path None: the name the URL gives
    head_base64: Optional[str] = None  # the file's first bytes: a binary type is refused before the PUT


@dataclass(frozen=True)
class PresignedPut:
    """A PUT of exactly `size` bytes of `content_type`: the URL signs both."""
    url: str
    content_type: str
    size: int
    expires_in: int


# What an upload did to the knowledge base: a new path, a new version of a path, or nothing
# (the bytes at that path are the ones indexed, and no new metadata came).
ADDED, UPDATED, UNCHANGED = "added", "updated", "unchanged"


@dataclass(frozen=True)
class Upload:
    document: dict  # the document's row: PENDING, or as it was when unchanged
    put: Optional[PresignedPut]  # where to PUT the bytes; None when they came inline or are unchanged
    result: str  # ADDED, UPDATED or UNCHANGED


def name_as_path(filename: str) -> str:
    """The path of an upload that names only a `filename` (the API before paths): its last
    segment, as then, so a client sending a local path keeps getting one document per name."""
    last = unicodedata.normalize("NFC", filename).replace("\\", "/").rstrip("/").split("/")[-1]
    if last.strip() in ("", ".", ".."):
        raise Invalid.field("filename", "must name a file (letters or digits)")
    return clean_path(last, "filename")


def clean_prefix(prefix: str) -> str:
    """A path prefix as the list takes it: a folder ('guides/') or the start of a name."""
    cleaned = clean_path(prefix, "prefix")
    return cleaned + "/" if prefix.rstrip().endswith(("/", "\\")) else cleaned


def _check_type(path: str, content_type: Optional[str]) -> None:
    """Refused up front: a name whose extension is a binary type never text (a PNG, a ZIP);
    everything else the pipeline reads from its bytes."""
    refused = refused_by_name(path)
    if refused:
        raise Unsupported(f"path: {path} is {refused}, which is not a document format this service reads")
    if content_type:
        if not _MEDIA_TYPE.match(content_type):
            raise Invalid.field("contentType", "must be a media type such as text/plain")
        extension = mimetypes.guess_extension(content_type.split(";")[0].strip().lower())
        refused = refused_by_name("file" + extension) if extension else None
        if refused:
            raise Unsupported(f"contentType: {content_type} is {refused}, which is not a document format"
                              " this service reads")


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


def _fetch(principal: Principal, kb_id: str, request: UploadRequest) -> tuple[UploadRequest, bytes]:
    """The request with the URL's bytes, its content type and (when it names none) its
    path: the URL's file name, with the extension its content type implies when it has
    none (a page at /docs/intro is intro.html, read as HTML). Only a caller who may write
    to the knowledge base gets the service to fetch anything."""
    if request.path is not None:  # what the caller named is checked before anything is fetched
        _check_type(clean_path(request.path), request.content_type)
    with connection() as conn:
        kb_to_write(conn, principal, kb_id, "add documents")
    settings = load_settings()
    fetched = url_fetch.fetch(request.url, max_bytes=min(limits.URL_MAX_BYTES, settings.max_file_bytes),
                              allow_private=settings.url_private_addresses_allowed)
    path = request.path
    if path is None:
        name = fetched.filename
        if "." not in name.lstrip(".") and fetched.content_type:
            name += mimetypes.guess_extension(fetched.content_type, strict=False) or ""
        path = name_as_path(name)
    served = fetched.content_type if fetched.content_type and _MEDIA_TYPE.match(fetched.content_type) else None
    return replace(request, path=path, content_type=request.content_type or served), fetched.content


def upload(principal: Principal, kb_id: str, request: UploadRequest) -> Upload:
    """Register a document at its path and return where to PUT its bytes (or store inline
    or fetched bytes right away). access.kb_to_write says who may."""
    settings = load_settings()
    raw = None
    if request.url is not None:
        request, raw = _fetch(principal, kb_id, request)
    path = clean_path(request.path)
    _check_type(path, request.content_type)
    if request.sha256 is not None and not _SHA256.match(request.sha256):
        raise Invalid.field("sha256", "must be the 64 lower-case hex digits of the file's SHA-256")
    if request.content_base64 is not None:
        raw = _decode_inline(request.content_base64)
    if request.head_base64 is not None and raw is None:
        _check_head(path, request.head_base64)
    if raw is not None:
        _check_bytes(path, raw)
    size = len(raw) if raw is not None else request.size
    if size is None or size <= 0:
        raise Invalid.field("size", "must be a positive number of bytes")
    if size > settings.max_file_bytes:
        raise TooLarge(f"size: {size} bytes is over the limit of {settings.max_file_bytes}")
    digest = hashlib.sha256(raw).hexdigest() if raw is not None else request.sha256
    content_type = _media_type(path, request.content_type)
    key = document_key(kb_id, path)
    with connection() as conn, conn.transaction():
        kb_to_write(conn, principal, kb_id, "upload documents")
        current = documents.find_by_key(conn, kb_id, key)
        if _unchanged(current, digest, request.metadata):
            metrics.record_upload(content_type, UNCHANGED)
            return Upload(document=current, put=None, result=UNCHANGED)
        doc = document_status.upsert_pending(conn, kb_id=kb_id, s3_key=key, filename=path.rsplit("/", 1)[-1],
                                             size_bytes=size, created_by=principal.user_id, original_url=request.url)
        result = ADDED if current is None else UPDATED
        audit.write(conn, principal, "upload_document", "document", doc["id"],
                    after={"knowledgeBaseId": kb_id, "path": path, "size": size,
                           "inline": raw is not None and request.url is None, "url": request.url,
                           "result": result})
    metrics.record_upload(content_type, result)
    s3 = client("s3")
    if request.metadata:
        s3.put_object(Bucket=settings.bucket, Key=key + SIDECAR_SUFFIX, ContentType="application/json",
                      Body=json.dumps({"metadataAttributes": request.metadata}).encode())
    if raw is not None:
        s3.put_object(Bucket=settings.bucket, Key=key, Body=raw, ContentType=content_type)
        return Upload(document=doc, put=None, result=result)
    expires = settings.upload_url_seconds
    url = s3_presigner().generate_presigned_url("put_object", ExpiresIn=expires, Params={
        "Bucket": settings.bucket, "Key": key, "ContentType": content_type, "ContentLength": size})
    return Upload(document=doc, put=PresignedPut(url=url, content_type=content_type, size=size,
                                                 expires_in=expires), result=result)


def _media_type(path: str, content_type: Optional[str]) -> str:
    return content_type or mimetypes.guess_type(path)[0] or FALLBACK_CONTENT_TYPE


def _unchanged(current: Optional[dict], digest: Optional[str], metadata: dict) -> bool:
    """The path holds these bytes, indexed or being indexed now (a run has read them), and the
    upload brings no other metadata: sending them again would only start the same work over."""
    if current is None or digest is None or current["kind"] != "file":
        return False
    same = ((current["status"] == PROCESSED and current["indexed_hash"] == digest)
            or (current["status"] == PROCESSING and current["content_hash"] == digest))
    return same and (not metadata or metadata == current["metadata"])


def _check_head(path: str, data: str) -> None:
    """A presigned upload's first bytes, when the caller sends them (`kb` does): a binary
    type is refused now, naming it, as a name is, instead of failing in the pipeline."""
    try:
        head = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise Invalid.field("head", "must be base64") from None
    if len(head) > HEAD_BYTES:
        raise Invalid.field("head", f"must be at most the file's first {HEAD_BYTES} bytes")
    refused = refused_by_content(head)
    if refused:
        raise Unsupported(f"head: {path} is {refused}, which is not a document format this service reads")


def _check_bytes(path: str, raw: bytes) -> None:
    """Inline bytes are here already: a type the pipeline cannot read is refused now."""
    try:
        sniff_type(raw, path)
    except IngestionError as err:
        raise Unsupported(f"content: {err.message}") from None
