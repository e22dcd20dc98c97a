"""OpenAI's files: bytes uploaded with POST /v1/files before a vector store holds them.
Each is one S3 object under _files/{orgId}/{fileId} (the organisation in the key, so a file
id of another organisation is simply not found), its name and purpose in the object's
metadata: no table, and nothing under kb/, so the S3 trigger ingests nothing until the file
is attached to a vector store, which copies it to kb/{kbId}/{fileId}/{filename} (a document
like any other, identified by that path)."""
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Optional
from urllib.parse import quote, unquote

from botocore.exceptions import ClientError

from chalicelib import limits
from chalicelib.auth import Principal
from chalicelib.auth.access import require_writer
from chalicelib.aws import client
from chalicelib.config import load_settings
from chalicelib.documents.uploads import clean_path
from chalicelib.errors import Invalid, NotFound, TooLarge
from chalicelib.ids import new_id

FILES_PREFIX = "_files/"
PURPOSES = ("assistants", "user_data")  # what a vector store's file may be uploaded as
_FILE_ID = re.compile(r"^file_[0-9a-f]{16}$")


@dataclass(frozen=True)
class StoredFile:
    id: str
    filename: str
    purpose: str
    bytes: int
    created_at: datetime
    content_type: str


def _key(principal: Principal, file_id: str) -> str:
    return f"{FILES_PREFIX}{principal.org_id}/{file_id}"


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
    client("s3").put_object(Bucket=load_settings().bucket, Key=_key(principal, file_id), Body=content,
                            ContentType=content_type,
                            Metadata={"filename": quote(name), "purpose": purpose, "user": principal.user_id})
    return get(principal, file_id)


def _stored(file_id: str, head: dict) -> StoredFile:
    meta = head.get("Metadata") or {}
    return StoredFile(id=file_id, filename=unquote(meta.get("filename", file_id)),
                      purpose=meta.get("purpose", "assistants"), bytes=int(head.get("ContentLength", 0)),
                      created_at=head["LastModified"], content_type=head.get("ContentType") or "")


def get(principal: Principal, file_id: str) -> StoredFile:
    if not is_file_id(file_id):
        raise NotFound.thing("file", file_id)
    try:
        head = client("s3").head_object(Bucket=load_settings().bucket, Key=_key(principal, file_id))
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            raise NotFound.thing("file", file_id) from None
        raise
    return _stored(file_id, head)


def content(principal: Principal, file_id: str) -> tuple[StoredFile, bytes]:
    stored = get(principal, file_id)
    body = client("s3").get_object(Bucket=load_settings().bucket, Key=_key(principal, file_id))["Body"].read()
    return stored, body


def source_key(principal: Principal, file_id: str) -> str:
    """Where the file's bytes are, to copy them into a knowledge base."""
    return _key(principal, file_id)


def list_files(principal: Principal, *, limit: int, after: Optional[str]) -> tuple[list[StoredFile], bool]:
    """A page of the organisation's files in id order, and whether more follow."""
    s3, bucket = client("s3"), load_settings().bucket
    prefix = f"{FILES_PREFIX}{principal.org_id}/"
    options = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": limit + 1}
    if after:
        options["StartAfter"] = prefix + after
    listed = s3.list_objects_v2(**options).get("Contents", [])
    ids = [o["Key"][len(prefix):] for o in listed if is_file_id(o["Key"][len(prefix):])]
    page = [get(principal, i) for i in ids[:limit]]
    return page, len(ids) > limit


def delete(principal: Principal, file_id: str) -> None:
    """The file's bytes; copies a vector store holds stay there (delete them from the store)."""
    require_writer(principal, "delete files")
    get(principal, file_id)
    client("s3").delete_object(Bucket=load_settings().bucket, Key=_key(principal, file_id))


def check_size_for_body(size: int) -> None:
    """POST /v1/files carries the bytes in the request body, which API Gateway and this API cap."""
    if size > limits.BODY_MAX_BYTES:
        raise TooLarge(f"file: the request body has {size} bytes; uploads through /v1/files are limited to"
                       f" {limits.BODY_MAX_BYTES} bytes (the API's body limit). Larger files: POST"
                       " /knowledge-bases/{kbId}/documents and PUT the bytes to the URL it answers")
