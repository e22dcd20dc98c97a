"""Where documents and the pipeline's intermediate data live in S3."""
import json
import re
from typing import Optional
from urllib.parse import unquote_plus

from botocore.exceptions import ClientError

from chalicelib.aws import client
from chalicelib.records import Chunk

SIDECAR_SUFFIX = ".metadata.json"
# DOTALL: S3 keys may hold newlines and other control characters; such a file is a
# document like any other (its name shows them).
_DOCUMENT_KEY = re.compile(r"^kb/(?P<kb_id>kb_[A-Za-z0-9]+)/(?P<path>.+)$", re.S)


def knowledge_base_prefix(kb_id: str) -> str:
    return f"kb/{kb_id}/"


def document_key(kb_id: str, filename: str) -> str:
    return knowledge_base_prefix(kb_id) + filename


def parse_document_key(key: str) -> Optional[tuple[str, str]]:
    """(kbId, path inside the knowledge base) for a key under kb/{kbId}/, else None."""
    match = _DOCUMENT_KEY.fullmatch(key)
    if not match or match.group("path").endswith("/"):
        return None
    return match.group("kb_id"), match.group("path")


def decoded_key(event_key: str) -> str:
    """S3 event keys are URL-encoded, with '+' for spaces."""
    return unquote_plus(event_key)


def read_bytes(bucket: str, key: str) -> bytes:
    return client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()


def head(bucket: str, key: str) -> dict:
    """HeadObject; a missing object is an IngestionError OBJECT_MISSING (the file was
    deleted after its run started), not a fault to retry."""
    from chalicelib.ingestion.errors import IngestionError

    try:
        return client("s3").head_object(Bucket=bucket, Key=key)
    except ClientError as err:
        if _missing(err):
            raise IngestionError("OBJECT_MISSING", "the file is no longer in the bucket") from None
        raise


def _missing(err: ClientError) -> bool:
    """HeadObject answers a missing key with a bare 404 (NotFound), GetObject with NoSuchKey."""
    return err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound")


def exists(bucket: str, key: str) -> bool:
    try:
        client("s3").head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as err:
        if _missing(err):
            return False
        raise


def read_sidecar_metadata(bucket: str, key: str) -> dict:
    """Attributes from `<key>.metadata.json` in the Bedrock knowledge-base form
    {"metadataAttributes": {...}}; typed values ({"value": {"type", "stringValue"}}) are unwrapped."""
    from chalicelib.ingestion.errors import IngestionError

    s3 = client("s3")
    try:
        raw = s3.get_object(Bucket=bucket, Key=key + SIDECAR_SUFFIX)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return {}
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return {}
        raise
    try:
        attributes = json.loads(raw).get("metadataAttributes", {})
        if not isinstance(attributes, dict):
            raise ValueError("metadataAttributes must be an object")
    except (ValueError, AttributeError) as exc:
        raise IngestionError("INVALID_METADATA", f"{key}{SIDECAR_SUFFIX}: {exc}") from exc
    return {name: _unwrap(value) for name, value in attributes.items()}


def _unwrap(value):
    if isinstance(value, dict) and isinstance(value.get("value"), dict):
        typed = value["value"]
        for field in ("stringValue", "numberValue", "booleanValue", "stringListValue"):
            if field in typed:
                return typed[field]
    return value


def read_json(bucket: str, key: str):
    return json.loads(read_bytes(bucket, key))


def write_json(bucket: str, key: str, data) -> str:
    client("s3").put_object(Bucket=bucket, Key=key, Body=json.dumps(data).encode("utf-8"),
                            ContentType="application/json")
    return key


def write_chunks(bucket: str, key: str, chunks: list[Chunk]) -> str:
    """A batch of chunks as a work file: the one place their JSON is written..."""
    return write_json(bucket, key, [c.to_json() for c in chunks])


def read_chunks(bucket: str, key: str) -> list[Chunk]:
    """...and read back."""
    return [Chunk.from_json(c) for c in read_json(bucket, key)]


def delete_prefix(bucket: str, prefix: str) -> None:
    s3 = client("s3")
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
