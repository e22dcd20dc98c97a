"""OpenAI's files: bytes uploaded with POST /v1/files before a vector store holds them.
Each is one S3 object under _files/{orgId}/{fileId}, nothing under kb/, so the S3 trigger
ingests nothing until the file is attached to a vector store, which copies it to
kb/{kbId}/{fileId}/{filename} (a document like any other, identified by that path).
A file is its uploader's, as a private knowledge base is its owner's: the files table
(storage/files.py, row-level security) records who uploaded it, and every route here reads
that row first, so another user, an admin of the organisation included, finds nothing
(404). Others reach the text only as a document of a knowledge base they may read."""
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Optional
from urllib.parse import quote

from botocore.exceptions import ClientError

from chalicelib import limits
from chalicelib.auth import Principal
from chalicelib.auth.access import require_writer
from chalicelib.aws import client
from chalicelib.config import load_settings
from chalicelib.documents.uploads import clean_path
from chalicelib.errors import Invalid, NotFound, TooLarge
from chalicelib.ids import new_id
from chalicelib.storage import connection, files as stored_files

PURPOSES = ("assistants", "user_data")  # what a vector store's file may be uploaded as
_FILE_ID = re.compile(r"^file_[0-9a-f]{16}$")
_MISSING = ("404", "NoSuchKey", "NotFound")


@dataclass(frozen=True)
class StoredFile:
    id: str
    filename: str
    purpose: str
    bytes: int
    created_at: datetime
    content_type: str


def _key(principal: Principal, file_id: str) -> str:
    return stored_files.object_key(principal.org_id, file_id)


def is_file_id(value: str) -> bool:
    return bool(_FILE_ID.match(value or ""))


def create(principal: Principal, *, filename: str, purpose: str, content: bytes,
           content_type: Optional[str]) -> StoredFile:
    require_writer(principal, "upload files")
    if purpose not in PURPOSES:
        raise Invalid.field("purpose", f"must be one of {', '.join(PURPOSES)} here: a file is kept to be"
                                       " attached to a vector store (batch, fine-tune and vision files are not)")
    name = clean_path(filename or "", "file").rsplit("/", 1)[-1]  # the name, never a path
    if not content:
        raise Invalid.field("file", "is empty")
    if len(content) > load_settings().max_file_bytes:
        raise TooLarge(f"file: {len(content)} bytes is over the limit of {load_settings().max_file_bytes}")
    file_id = new_id("file")
    content_type = content_type or "application/octet-stream"
    # The metadata repeats the row: what a deployment records an object by if its row is missing.
    client("s3").put_object(Bucket=load_settings().bucket, Key=_key(principal, file_id), Body=content,
                            ContentType=content_type,
                            Metadata={"filename": quote(name), "purpose": purpose, "user": principal.user_id})
    with connection() as conn:
        row = stored_files.insert(conn, principal, file_id=file_id, filename=name, purpose=purpose,
                                  size=len(content), content_type=content_type)
    return _stored(row)


def _stored(row: dict) -> StoredFile:
    return StoredFile(id=row["id"], filename=row["filename"], purpose=row["purpose"], bytes=row["bytes"],
                      created_at=row["created_at"], content_type=row["content_type"])


def _older(conn, principal: Principal, file_id: str) -> Optional[dict]:
    """A file stored before uploaders were recorded that no deployment has recorded yet
    (storage/files.py, record_bucket): its row, from the object's metadata, when the caller
    uploaded it; else None."""
    try:
        head = client("s3").head_object(Bucket=load_settings().bucket, Key=_key(principal, file_id))
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in _MISSING:
            return None
        raise
    row = stored_files.from_metadata(principal.org_id, file_id, head)
    if row["user_id"] != principal.user_id:
        return None
    return stored_files.insert(conn, principal, file_id=file_id, filename=row["filename"], purpose=row["purpose"],
                               size=row["bytes"], content_type=row["content_type"], created_at=row["created_at"])


def get(principal: Principal, file_id: str) -> StoredFile:
    """The caller's own file; another's, or none, is a 404 alike."""
    if not is_file_id(file_id):
        raise NotFound.thing("file", file_id)
    with connection() as conn:
        row = stored_files.get(conn, principal, file_id) or _older(conn, principal, file_id)
    if row is None:
        raise NotFound.thing("file", file_id)
    return _stored(row)


def content(principal: Principal, file_id: str) -> tuple[StoredFile, bytes]:
    stored = get(principal, file_id)
    try:
        body = client("s3").get_object(Bucket=load_settings().bucket, Key=_key(principal, file_id))["Body"].read()
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in _MISSING:  # a delete that stopped halfway
            raise NotFound.thing("file", file_id) from None
        raise
    return stored, body


def source_key(principal: Principal, file_id: str) -> str:
    """Where the file's bytes are, to copy them into a knowledge base (after get: the caller's)."""
    return _key(principal, file_id)


def list_files(principal: Principal, *, limit: int, after: Optional[str],
               purpose: Optional[str] = None) -> tuple[list[StoredFile], bool]:
    """A page of the caller's own files in id order, and whether more follow."""
    with connection() as conn:
        rows = stored_files.page(conn, principal, limit=limit, after=after, purpose=purpose)
    return [_stored(r) for r in rows[:limit]], len(rows) > limit


def delete(principal: Principal, file_id: str) -> None:
    """The file's bytes, then its row (a delete stopped between the two is finished by the
    next); copies a vector store holds stay there (delete them from the store)."""
    get(principal, file_id)  # another's file is not there (404) before a viewer may not delete (403)
    require_writer(principal, "delete files")
    client("s3").delete_object(Bucket=load_settings().bucket, Key=_key(principal, file_id))
    with connection() as conn:
        stored_files.delete(conn, principal, file_id)


def check_size_for_body(size: int) -> None:
    """POST /v1/files carries the bytes in the request body, which API Gateway and this API cap."""
    if size > limits.BODY_MAX_BYTES:
        raise TooLarge(f"file: the request body has {size} bytes; uploads through /v1/files are limited to"
                       f" {limits.BODY_MAX_BYTES} bytes (the API's body limit). Larger files: POST"
                       " /knowledge-bases/{kbId}/documents and PUT the bytes to the URL it answers")
