"""kb_rebuilds (migration 0024): a knowledge base's rebuilds and their progress, which is
read from its documents (processed or failed since the rebuild began)."""
import json
from typing import Optional

import psycopg

from chalicelib.storage.scope import VISIBLE_KB, scope

_PROGRESS = """r.id, r.kb_id, r.user_id, r.chunking, r.total, r.started, r.error, r.created_at, r.fanned_out_at,
    (SELECT count(*) FROM documents d WHERE d.kb_id = r.kb_id AND d.status = 'PROCESSED'
        AND coalesce(d.processed_at, d.updated_at) >= r.created_at) AS done,
    (SELECT count(*) FROM documents d WHERE d.kb_id = r.kb_id AND d.status = 'FAILED'
        AND d.updated_at >= r.created_at) AS failed"""


def insert(conn: psycopg.Connection, principal, *, rebuild_id: str, kb_id: str, chunking: dict, total: int) -> None:
    conn.execute("INSERT INTO kb_rebuilds (id, org_id, kb_id, user_id, chunking, total) VALUES (%s, %s, %s, %s, %s, %s)",
                 (rebuild_id, principal.org_id, kb_id, principal.user_id, json.dumps(chunking), total))


def latest(conn: psycopg.Connection, principal, kb_id: str) -> Optional[dict]:
    """The knowledge base's last rebuild, if the caller sees the knowledge base."""
    return conn.execute(
        f"SELECT {_PROGRESS} FROM kb_rebuilds r JOIN knowledge_bases kb ON kb.id = r.kb_id"
        f" WHERE r.kb_id = %(kb_id)s AND {VISIBLE_KB} ORDER BY r.created_at DESC LIMIT 1",
        scope(principal, kb_id=kb_id)).fetchone()


def get(conn: psycopg.Connection, rebuild_id: str) -> Optional[dict]:
    return conn.execute(f"SELECT {_PROGRESS} FROM kb_rebuilds r WHERE r.id = %s", (rebuild_id,)).fetchone()


def running(conn: psycopg.Connection, kb_id: str) -> Optional[str]:
    """A rebuild of this knowledge base not yet handed whole to the pipeline; one older than
    the jobs function's 15-minute timeout ended without a word and blocks nothing."""
    row = conn.execute("SELECT id FROM kb_rebuilds WHERE kb_id = %s AND fanned_out_at IS NULL AND error IS NULL"
                       " AND created_at > now() - interval '16 minutes' ORDER BY created_at DESC LIMIT 1",
                       (kb_id,)).fetchone()
    return row["id"] if row else None


def claim(conn: psycopg.Connection, rebuild_id: str) -> Optional[dict]:
    """The rebuild, for the one invocation that hands its documents out (a retried or
    repeated invocation claims nothing)."""
    claimed = conn.execute("UPDATE kb_rebuilds SET claimed_at = now() WHERE id = %s AND claimed_at IS NULL"
                           " AND error IS NULL RETURNING id", (rebuild_id,)).fetchone()
    return get(conn, rebuild_id) if claimed else None


def count_started(conn: psycopg.Connection, rebuild_id: str, n: int) -> None:
    conn.execute("UPDATE kb_rebuilds SET started = started + %s WHERE id = %s", (n, rebuild_id))


def finish(conn: psycopg.Connection, rebuild_id: str, error: Optional[dict] = None) -> None:
    conn.execute("UPDATE kb_rebuilds SET fanned_out_at = now(), error = %s WHERE id = %s",
                 (json.dumps(error) if error else None, rebuild_id))
