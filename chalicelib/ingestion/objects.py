"""Where documents and the pipeline's intermediate data live in S3."""
import json
import re
from typing import Optional
from urllib.parse import unquote_plus

from chalicelib.aws import client

_DOCUMENT_KEY = re.compile(r"^kb/(?P<kb_id>kb_[A-Za-z0-9]+)/(?P<path>.+)$")


def parse_document_key(key: str) -> Optional[tuple[str, str]]:
    """(kbId, path inside the knowledge base) for a key under kb/{kbId}/, else None."""
    match = _DOCUMENT_KEY.match(key)
    if not match or match.group("path").endswith("/"):
        return None
    return match.group("kb_id"), match.group("path")


def event_key(record: dict) -> str:
    # S3 event keys are URL-encoded, with '+' for spaces.
    return unquote_plus(record["s3"]["object"]["key"])


def work_key(work_prefix: str, doc_id: str, run_id: str, name: str) -> str:
    return f"{work_prefix}{doc_id}/{run_id}/{name}"


def read_bytes(bucket: str, key: str) -> bytes:
    return client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()


def read_json(bucket: str, key: str):
    return json.loads(read_bytes(bucket, key))


def write_json(bucket: str, key: str, data) -> str:
    client("s3").put_object(Bucket=bucket, Key=key, Body=json.dumps(data).encode("utf-8"),
                            ContentType="application/json")
    return key


def delete_prefix(bucket: str, prefix: str) -> None:
    s3 = client("s3")
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
