"""agents: each belongs to its owner; the organisation's admins reach them all (scope.OWN_AGENT)."""
import json
from typing import Optional

import psycopg

from chalicelib.storage.scope import OWN_AGENT, scope

AGENT_COLUMNS = ("a.id, a.org_id, a.owner_id, a.name, a.description, a.available_tools, a.knowledge_mode,"
                 " a.created_at, a.updated_at")


def insert(conn: psycopg.Connection, principal, *, agent_id: str, name: str, description: str,
           tools: list, knowledge_mode: str = "tool") -> dict:
    return conn.execute(
        f"INSERT INTO agents AS a (id, org_id, owner_id, name, description, available_tools, knowledge_mode)"
        f" VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {AGENT_COLUMNS}",
        (agent_id, principal.org_id, principal.user_id, name, description, json.dumps(tools), knowledge_mode),
    ).fetchone()


def get(conn: psycopg.Connection, principal, agent_id: str, *, for_update: bool = False) -> Optional[dict]:
    return conn.execute(
        f"SELECT {AGENT_COLUMNS} FROM agents a WHERE a.id = %(id)s AND {OWN_AGENT}"
        + (" FOR UPDATE" if for_update else ""),
        scope(principal, id=agent_id),
    ).fetchone()


def list_own(conn: psycopg.Connection, principal) -> list[dict]:
    return conn.execute(f"SELECT {AGENT_COLUMNS} FROM agents a WHERE {OWN_AGENT} ORDER BY a.created_at, a.id",
                        scope(principal)).fetchall()


def update(conn: psycopg.Connection, principal, agent_id: str, changes: dict) -> Optional[dict]:
    allowed = {k: v for k, v in changes.items() if k in ("name", "description", "available_tools", "knowledge_mode")}
    if "available_tools" in allowed:
        allowed["available_tools"] = json.dumps(allowed["available_tools"])
    sets = ", ".join(f"{column} = %({column})s" for column in allowed) or "name = a.name"
    return conn.execute(
        f"UPDATE agents a SET {sets}, updated_at = now() WHERE a.id = %(id)s AND {OWN_AGENT}"
        f" RETURNING {AGENT_COLUMNS}",
        scope(principal, id=agent_id, **allowed),
    ).fetchone()


def delete(conn: psycopg.Connection, principal, agent_id: str) -> Optional[dict]:
    return conn.execute(f"DELETE FROM agents a WHERE a.id = %(id)s AND {OWN_AGENT} RETURNING {AGENT_COLUMNS}",
                        scope(principal, id=agent_id)).fetchone()
