"""audit_log: one row per write through the API — who (user and key), what (action,
target), and the before and after where they matter."""
import json
from datetime import datetime
from typing import Optional

import psycopg

AUDIT_COLUMNS = "id, user_id, key_id, action, target_type, target_id, agent_id, tool_id, before, after, created_at"


def write(conn: psycopg.Connection, principal, action: str, target_type: str, target_id: str, *,
          before=None, after=None, agent_id: Optional[str] = None, tool_id: Optional[str] = None) -> None:
    conn.execute(
        "INSERT INTO audit_log (org_id, user_id, key_id, action, target_type, target_id, agent_id, tool_id,"
        " before, after) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (principal.org_id, principal.user_id, principal.key_id, action, target_type, target_id, agent_id,
         tool_id, _json(before), _json(after)),
    )


def _json(value) -> Optional[str]:
    return None if value is None else json.dumps(value, default=str)


def for_agent(conn: psycopg.Connection, principal, agent_id: str) -> list[dict]:
    return conn.execute(
        f"SELECT {AUDIT_COLUMNS} FROM audit_log WHERE agent_id = %s AND org_id = %s ORDER BY id",
        (agent_id, principal.org_id),
    ).fetchall()


def search(conn: psycopg.Connection, principal, *, target_type: Optional[str], target_id: Optional[str],
           user_id: Optional[str], since: Optional[datetime], until: Optional[datetime],
           before_id: Optional[int], limit: int) -> list[dict]:
    """The organisation's entries, newest first, one page (before_id: the last id of the previous page)."""
    return conn.execute(
        f"SELECT {AUDIT_COLUMNS} FROM audit_log WHERE org_id = %(org_id)s"
        " AND (%(target_type)s::text IS NULL OR target_type = %(target_type)s)"
        " AND (%(target_id)s::text IS NULL OR target_id = %(target_id)s)"
        " AND (%(user_id)s::text IS NULL OR user_id = %(user_id)s)"
        " AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)"
        " AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s)"
        " AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s)"
        " ORDER BY id DESC LIMIT %(limit)s",
        {"org_id": principal.org_id, "target_type": target_type, "target_id": target_id, "user_id": user_id,
         "since": since, "until": until, "before_id": before_id, "limit": limit},
    ).fetchall()


def deleted_knowledge_bases(conn: psycopg.Connection, principal, kb_ids: list[str]) -> dict[str, dict]:
    """{id: what its deletion recorded (name, visibility, ownerId)} for those of these
    knowledge bases of the caller's organisation that were deleted."""
    return {r["target_id"]: r["before"] or {} for r in conn.execute(
        "SELECT target_id, before FROM audit_log WHERE org_id = %s AND action = 'delete_knowledge_base'"
        " AND target_type = 'knowledge_base' AND target_id = ANY(%s)", (principal.org_id, kb_ids)).fetchall()}
