"""agent_sessions: an agent's recorded conversations (migration 0021). A session is read
through its agent (scope.OWN_AGENT): who manages the agent sees its sessions."""
import json
from typing import Optional

import psycopg

from chalicelib.storage.scope import OWN_AGENT, scope

SESSION_COLUMNS = """s.id, s.agent_id, s.user_id, s.knowledge_base_id, s.messages, s.chars, s.status, s.job_id,
    s.created_at, s.updated_at, s.completed_at"""


def insert(conn: psycopg.Connection, principal, *, session_id: str, agent_id: str,
           knowledge_base_id: Optional[str], messages: list[dict], chars: int) -> dict:
    return conn.execute(
        "INSERT INTO agent_sessions AS s (id, org_id, user_id, agent_id, knowledge_base_id, messages, chars)"
        f" VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {SESSION_COLUMNS}",
        (session_id, principal.org_id, principal.user_id, agent_id, knowledge_base_id, json.dumps(messages),
         chars)).fetchone()


def get(conn: psycopg.Connection, principal, agent_id: str, session_id: str, *,
        for_update: bool = False) -> Optional[dict]:
    return conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM agent_sessions s JOIN agents a ON a.id = s.agent_id"
        f" WHERE s.id = %(id)s AND s.agent_id = %(agent_id)s AND {OWN_AGENT}"
        + (" FOR UPDATE OF s" if for_update else ""),
        scope(principal, id=session_id, agent_id=agent_id)).fetchone()


def append(conn: psycopg.Connection, session_id: str, messages: list[dict], chars: int) -> dict:
    return conn.execute(
        "UPDATE agent_sessions s SET messages = s.messages || %s::jsonb, chars = s.chars + %s, updated_at = now()"
        f" WHERE s.id = %s RETURNING {SESSION_COLUMNS}",
        (json.dumps(messages), chars, session_id)).fetchone()


def complete(conn: psycopg.Connection, session_id: str, *, knowledge_base_id: Optional[str],
             job_id: Optional[str]) -> dict:
    return conn.execute(
        "UPDATE agent_sessions s SET status = 'COMPLETED', completed_at = now(), updated_at = now(),"
        " knowledge_base_id = coalesce(%s, s.knowledge_base_id), job_id = %s"
        f" WHERE s.id = %s RETURNING {SESSION_COLUMNS}",
        (knowledge_base_id, job_id, session_id)).fetchone()


def set_job(conn: psycopg.Connection, session_id: str, job_id: str) -> dict:
    return conn.execute(f"UPDATE agent_sessions s SET job_id = %s, updated_at = now() WHERE s.id = %s"
                        f" RETURNING {SESSION_COLUMNS}", (job_id, session_id)).fetchone()


def reopen(conn: psycopg.Connection, session_id: str) -> None:
    """A completion whose extraction could not be started: the session is open again."""
    conn.execute("UPDATE agent_sessions SET status = 'OPEN', completed_at = NULL, updated_at = now()"
                 " WHERE id = %s AND job_id IS NULL", (session_id,))
