"""The bucket compared with the database for one knowledge base, as Bedrock's
ingestion job does: an object with no document is started (added), an object newer
than its document's last run is started again (changed), a document whose object
is gone is deleted (removed). The pipeline's content hash makes a false "changed"
cheap: the same bytes are not embedded again."""
from dataclasses import dataclass
from typing import Optional
from datetime import datetime, timedelta, timezone

from chalicelib import freshness
from chalicelib.aws import client
from chalicelib.config import load_settings
from chalicelib.documents.runs import restart_run, start_ingestion
from chalicelib.ingestion.objects import SIDECAR_SUFFIX, knowledge_base_prefix, parse_document_key
from chalicelib.sources.mirror import MirrorReport
from chalicelib.storage import connection, documents
from chalicelib.storage.document_status import FAILED, IN_FLIGHT

# S3's and the database's clocks: an object written this close to a run's start
# counts as older (a repeated run costs a hash comparison, a missed one a stale index).
CLOCK_MARGIN = timedelta(seconds=2)
# A document touched this recently is never removed: its object may be landing
# (the listing is a moment old) or its ObjectRemoved event may still be on its way.
REMOVE_AFTER = timedelta(minutes=5)


@dataclass(frozen=True)
class SyncReport:
    knowledge_base_id: str
    added: int
    changed: int
    removed: int
    unchanged: int
    failed: int  # documents of the knowledge base that are FAILED after the sync
    source: Optional[MirrorReport] = None  # what mirroring its source did first (chalicelib/sources)


def _objects(bucket: str, kb_id: str) -> dict[str, dict]:
    """{document key: {"size", "modified"}}; a sidecar makes its document newer."""
    found, sidecars = {}, {}
    pages = client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=knowledge_base_prefix(kb_id))
    for page in pages:
        for item in page.get("Contents", []):
            key = item["Key"]
            if key.endswith(SIDECAR_SUFFIX):
                sidecars[key[: -len(SIDECAR_SUFFIX)]] = item["LastModified"]
            elif parse_document_key(key) is not None:
                found[key] = {"size": item["Size"], "modified": item["LastModified"]}
    for key, modified in sidecars.items():
        if key in found:
            found[key]["modified"] = max(found[key]["modified"], modified)
    return found


def _removable(doc: dict, now: datetime) -> bool:
    """In flight (a registration waiting for its PUT included), recently touched, or an
    expired upload kept as its record: not removed."""
    return (doc["status"] not in IN_FLIGHT and doc["error_code"] != "UPLOAD_EXPIRED"
            and doc["updated_at"] < now - REMOVE_AFTER)


def sync_knowledge_base(kb_id: str) -> SyncReport:
    bucket = load_settings().bucket
    # Rows first, then the listing: a document created in between is not in `rows`,
    # so it cannot be taken for one whose object is gone.
    with connection() as conn:
        rows = {d["s3_key"]: d for d in documents.files_in(conn, kb_id)}
    now = datetime.now(timezone.utc)
    objects = _objects(bucket, kb_id)
    added = changed = removed = unchanged = 0
    for key, obj in objects.items():
        doc = rows.get(key)
        if doc is None:
            added += bool(start_ingestion(bucket, key, kb_id, obj["size"]))
        elif doc["status"] not in IN_FLIGHT and obj["modified"] > doc["updated_at"] + CLOCK_MARGIN:
            changed += restart_run(bucket, doc, attempt=0)
        else:
            unchanged += 1
    for key, doc in rows.items():
        if key not in objects and _removable(doc, now):
            with connection() as conn:
                removed += documents.delete_unchanged(conn, doc["id"], doc["updated_at"])
    if removed:
        freshness.bump(kb_id)
    with connection() as conn:
        failed = sum(d["status"] == FAILED for d in documents.files_in(conn, kb_id))
    return SyncReport(kb_id, added, changed, removed, unchanged, failed)
