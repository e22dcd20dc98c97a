"""agents and audit_log. Agents belong to an organisation: its members see and manage them."""
import json
from typing import Optional

import psycopg

AGENT_COLUMNS = "id, org_id, owner_id, name, description, available_tools, created_at, updated_at"


def insert(conn: psycopg.Connection, principal, *, agent_id: str, name: str, description: str,
           tools: list) -> dict:
    return conn.execute(
        f"INSERT INTO agents (id, org_id, owner_id, name, description, available_tools)"
        f" VALUES (%s, %s, %s, %s, %s, %s) RETURNING {AGENT_COLUMNS}",
        (agent_id, principal.org_id, principal.user_id, name, description, json.dumps(tools)),
    ).fetchone()


def get(conn: psycopg.Connection, principal, agent_id: str, *, for_update: bool = False) -> Optional[dict]:
    return conn.execute(
        f"SELECT {AGENT_COLUMNS} FROM agents WHERE id = %s AND org_id = %s" + (" FOR UPDATE" if for_update else ""),
        (agent_id, principal.org_id),
    ).fetchone()


def list_in_org(conn: psycopg.Connection, principal) -> list[dict]:
    return conn.execute(f"SELECT {AGENT_COLUMNS} FROM agents WHERE org_id = %s ORDER BY created_at, id",
                        (principal.org_id,)).fetchall()


def update(conn: psycopg.Connection, principal, agent_id: str, changes: dict) -> Optional[dict]:
    allowed = {k: v for k, v in changes.items() if k in ("name", "description", "available_tools")}
    if "available_tools" in allowed:
        allowed["available_tools"] = json.dumps(allowed["available_tools"])
    sets = ", ".join(f"{column} = %({column})s" for column in allowed) or "name = name"
    return conn.execute(
        f"UPDATE agents SET {sets}, updated_at = now() WHERE id = %(id)s AND org_id = %(org_id)s"
        f" RETURNING {AGENT_COLUMNS}",
        {**allowed, "id": agent_id, "org_id": principal.org_id},
    ).fetchone()


def delete(conn: psycopg.Connection, principal, agent_id: str) -> bool:
    return conn.execute("DELETE FROM agents WHERE id = %s AND org_id = %s",
                        (agent_id, principal.org_id)).rowcount == 1


def write_audit(conn: psycopg.Connection, principal, *, agent_id: str, action: str, tool_id: Optional[str],
                before, after) -> None:
    conn.execute(
        "INSERT INTO audit_log (org_id, user_id, agent_id, action, tool_id, before, after)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (principal.org_id, principal.user_id, agent_id, action, tool_id,
         json.dumps(before) if before is not None else None, json.dumps(after) if after is not None else None),
    )


def audit_entries(conn: psycopg.Connection, principal, agent_id: str) -> list[dict]:
    return conn.execute(
        "SELECT id, user_id, action, tool_id, before, after, created_at FROM audit_log"
        " WHERE agent_id = %s AND org_id = %s ORDER BY id", (agent_id, principal.org_id),
    ).fetchall()
