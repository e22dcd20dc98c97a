"""extraction_jobs: extractions of long conversations, run after the request answered.
A job is read through its agent (scope.OWN_AGENT): who manages the agent sees its jobs."""
import json
from typing import Optional

import psycopg

from chalicelib.storage.scope import OWN_AGENT, scope

JOB_COLUMNS = "j.id, j.org_id, j.user_id, j.agent_id, j.status, j.request, j.result, j.error, j.created_at, j.updated_at"


def insert(conn: psycopg.Connection, principal, *, job_id: str, agent_id: str, request: dict) -> dict:
    return conn.execute(
        f"INSERT INTO extraction_jobs AS j (id, org_id, user_id, agent_id, request) VALUES (%s, %s, %s, %s, %s)"
        f" RETURNING {JOB_COLUMNS}",
        (job_id, principal.org_id, principal.user_id, agent_id, json.dumps(request))).fetchone()


def get(conn: psycopg.Connection, principal, agent_id: str, job_id: str) -> Optional[dict]:
    return conn.execute(
        f"SELECT {JOB_COLUMNS} FROM extraction_jobs j JOIN agents a ON a.id = j.agent_id"
        f" WHERE j.id = %(id)s AND j.agent_id = %(agent_id)s AND {OWN_AGENT}",
        scope(principal, id=job_id, agent_id=agent_id)).fetchone()


def claim(conn: psycopg.Connection, job_id: str) -> Optional[dict]:
    """The job, now RUNNING, if it was PENDING (a repeated invocation claims nothing), with
    the role its user holds now."""
    return conn.execute(
        "UPDATE extraction_jobs j SET status = 'RUNNING', updated_at = now() FROM users u"
        f" WHERE j.id = %s AND j.status = 'PENDING' AND u.id = j.user_id RETURNING {JOB_COLUMNS}, u.role",
        (job_id,)).fetchone()


def finish(conn: psycopg.Connection, job_id: str, *, result: Optional[dict] = None,
           error: Optional[dict] = None) -> None:
    conn.execute(
        "UPDATE extraction_jobs SET status = %s, result = %s, error = %s, updated_at = now() WHERE id = %s",
        ("FAILED" if error else "SUCCEEDED", json.dumps(result) if result is not None else None,
         json.dumps(error) if error else None, job_id))


def fail_stalled(conn: psycopg.Connection, older_than_seconds: int, message: str) -> list[str]:
    """Jobs still PENDING or RUNNING that nothing has touched for older_than_seconds (their
    function ended without a word, or its invocation was lost) end FAILED with `message`."""
    rows = conn.execute(
        "UPDATE extraction_jobs SET status = 'FAILED', error = %s, updated_at = now()"
        " WHERE status IN ('PENDING', 'RUNNING') AND updated_at < now() - make_interval(secs => %s)"
        " RETURNING id",
        (json.dumps({"code": "JOB_ENDED", "message": message}), older_than_seconds)).fetchall()
    return [r["id"] for r in rows]
