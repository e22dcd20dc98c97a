"""files: who uploaded each of OpenAI's /v1 files (migration 0033), whose bytes are the
S3 objects under FILES_PREFIX. Every statement names the caller as the uploader, and the
database's policy holds the same rule: a file is its uploader's alone."""
import logging
import time
from datetime import datetime
from typing import Optional
from urllib.parse import unquote

import psycopg
from botocore.exceptions import ClientError

logger = logging.getLogger(__name__)

FILES_PREFIX = "_files/"
COLUMNS = "id, org_id, user_id, filename, purpose, bytes, content_type, created_at"


def object_key(org_id: str, file_id: str) -> str:
    return f"{FILES_PREFIX}{org_id}/{file_id}"


def insert(conn: psycopg.Connection, principal, *, file_id: str, filename: str, purpose: str, size: int,
           content_type: str, created_at: Optional[datetime] = None) -> dict:
    """The file's row; a second insert of the same id (two first requests for one older file)
    answers the row already there."""
    return conn.execute(
        f"WITH new AS (INSERT INTO files ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, coalesce(%s, now()))"
        f" ON CONFLICT (id) DO NOTHING RETURNING {COLUMNS})"
        f" SELECT {COLUMNS} FROM new UNION ALL"
        f" SELECT {COLUMNS} FROM files WHERE id = %s AND org_id = %s AND user_id = %s",
        (file_id, principal.org_id, principal.user_id, filename, purpose, size, content_type, created_at,
         file_id, principal.org_id, principal.user_id)).fetchone()


def get(conn: psycopg.Connection, principal, file_id: str) -> Optional[dict]:
    return conn.execute(f"SELECT {COLUMNS} FROM files WHERE id = %s AND org_id = %s AND user_id = %s",
                        (file_id, principal.org_id, principal.user_id)).fetchone()


def page(conn: psycopg.Connection, principal, *, limit: int, after: Optional[str],
         purpose: Optional[str]) -> list[dict]:
    """Up to limit + 1 of the caller's files in id order, after the id given."""
    return conn.execute(
        f"SELECT {COLUMNS} FROM files WHERE org_id = %s AND user_id = %s AND id > %s"
        " AND (%s::text IS NULL OR purpose = %s) ORDER BY id LIMIT %s",
        (principal.org_id, principal.user_id, after or "", purpose, purpose, limit + 1)).fetchall()


def delete(conn: psycopg.Connection, principal, file_id: str) -> None:
    conn.execute("DELETE FROM files WHERE id = %s AND org_id = %s AND user_id = %s",
                 (file_id, principal.org_id, principal.user_id))


def unrecorded(conn: psycopg.Connection, file_ids: list[str]) -> list[str]:
    """Of these ids, those without a row (objects stored before migration 0033)."""
    if not file_ids:
        return []
    known = {r["id"] for r in conn.execute("SELECT id FROM files WHERE id = ANY(%s)", (file_ids,))}
    return [i for i in file_ids if i not in known]


def record_existing(conn: psycopg.Connection, rows: list[dict]) -> int:
    """Rows for older objects, each by the uploader its metadata names (a connection that
    acts for every organisation: the migration's). A user no longer there owns nothing."""
    recorded = 0
    for row in rows:
        recorded += conn.execute(
            f"INSERT INTO files ({COLUMNS}) SELECT %(id)s, %(org_id)s, %(user_id)s, %(filename)s, %(purpose)s,"
            " %(bytes)s, %(content_type)s, %(created_at)s WHERE EXISTS"
            " (SELECT 1 FROM users WHERE id = %(user_id)s AND org_id = %(org_id)s) ON CONFLICT (id) DO NOTHING",
            row).rowcount
    return recorded


def from_metadata(org_id: str, file_id: str, head: dict) -> dict:
    """A file's row from its object's HeadObject answer: the uploader, name and purpose its
    metadata holds (compat/files.py writes them)."""
    meta = head.get("Metadata") or {}
    return {"id": file_id, "org_id": org_id, "user_id": meta.get("user", ""),
            "filename": unquote(meta.get("filename", file_id)), "purpose": meta.get("purpose", "assistants"),
            "bytes": int(head.get("ContentLength", 0)), "content_type": head.get("ContentType") or "",
            "created_at": head["LastModified"]}


def record_bucket(database_url: str, s3, bucket: str, deadline: Optional[float] = None) -> int:
    """Rows for the objects under FILES_PREFIX stored before migration 0033, from their
    metadata, a listing page at a time until none is left or time.monotonic() passes the
    deadline; returns how many were recorded. Run by every deployment after its migrations
    (again and again costs a listing: recorded objects are not read)."""
    from psycopg.rows import dict_row

    recorded = 0
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        for listing in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=FILES_PREFIX):
            keys = {}
            for item in listing.get("Contents", []):
                parts = item["Key"][len(FILES_PREFIX):].split("/")
                if len(parts) == 2:
                    keys[parts[1]] = parts[0]
            rows = []
            for file_id in unrecorded(conn, list(keys)):
                try:
                    rows.append(from_metadata(keys[file_id], file_id,
                                              s3.head_object(Bucket=bucket, Key=object_key(keys[file_id], file_id))))
                except ClientError as err:  # deleted since the listing
                    if err.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                        raise
            recorded += record_existing(conn, rows)
            if deadline is not None and time.monotonic() >= deadline:
                logger.warning("older /v1 files recorded: %d; the next deployment records the rest (their"
                               " uploaders reach each one by its id meanwhile)", recorded)
                break
    return recorded
