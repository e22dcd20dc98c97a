"""Seed 003's "triggered after session completion": an agent's conversation recorded as a
session (messages posted as it goes, or whole at the end), and completing it queues the
extraction of what it taught into the session's knowledge base (jobs.py), once: a second
completion answers the first one's job. Without a chat model, completing with extraction
is LLM_NOT_CONFIGURED (503) and the session stays open; `extract: false` ends it without."""
from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from chalicelib import limits
from chalicelib.auth import Principal
from chalicelib.auth.access import require_writer
from chalicelib.errors import Conflict, Forbidden, Invalid, NotFound
from chalicelib.ids import new_id
from chalicelib.knowledge import jobs
from chalicelib.knowledge.extract import check_access, check_messages, parse_conversation
from chalicelib.llm import chat_model
from chalicelib.storage import agents, connection
from chalicelib.storage import extraction_jobs as job_rows
from chalicelib.storage import sessions as session_rows


@dataclass(frozen=True)
class Session:
    id: str
    agent_id: str
    user_id: str
    knowledge_base_id: Optional[str]
    messages: tuple[dict, ...]
    status: str  # OPEN | COMPLETED
    created_at: datetime
    updated_at: datetime
    completed_at: Optional[datetime]
    job: Optional[dict]  # the extraction job's row, once completion started one

    @classmethod
    def of(cls, row: dict, job: Optional[dict] = None) -> "Session":
        return cls(id=row["id"], agent_id=row["agent_id"], user_id=row["user_id"],
                   knowledge_base_id=row["knowledge_base_id"], messages=tuple(row["messages"]),
                   status=row["status"], created_at=row["created_at"], updated_at=row["updated_at"],
                   completed_at=row["completed_at"], job=job)


def _chars(messages: list[dict]) -> int:
    return sum(len(m["content"]) for m in messages)


def _check_size(messages: list[dict], chars_before: int = 0) -> None:
    if chars_before + _chars(messages) > limits.EXTRACT_TOTAL_MAX_CHARS:
        raise Invalid.field("messages", f"must hold at most {limits.EXTRACT_TOTAL_MAX_CHARS} characters in all")


def open_session(principal: Principal, agent_id: str, *, knowledge_base_id: Optional[str],
                 messages: Optional[list]) -> Session:
    require_writer(principal, "record an agent's sessions")
    messages = check_messages(messages) if messages is not None else []
    _check_size(messages)
    if knowledge_base_id is not None:
        check_access(principal, agent_id, knowledge_base_id)  # the agent is ours, the knowledge base writable
    with connection() as conn:
        if agents.get(conn, principal, agent_id) is None:
            raise NotFound.thing("agent", agent_id)
        row = session_rows.insert(conn, principal, session_id=new_id("session"), agent_id=agent_id,
                                  knowledge_base_id=knowledge_base_id, messages=messages, chars=_chars(messages))
    return Session.of(row)


def _session(conn, principal: Principal, agent_id: str, session_id: str, *, for_update: bool = False) -> dict:
    row = session_rows.get(conn, principal, agent_id, session_id, for_update=for_update)
    if row is None:
        raise NotFound.thing("session", session_id)
    return row


def get_session(principal: Principal, agent_id: str, session_id: str) -> Session:
    with connection() as conn:
        row = _session(conn, principal, agent_id, session_id)
        job = job_rows.get(conn, principal, agent_id, row["job_id"]) if row["job_id"] else None
    return Session.of(row, job)


def add_messages(principal: Principal, agent_id: str, session_id: str, messages) -> Session:
    with connection() as conn, conn.transaction():
        row = _session(conn, principal, agent_id, session_id, for_update=True)
        if row["status"] != "OPEN":
            raise Conflict(f"session {session_id} is completed; open a new one", code="SESSION_COMPLETED")
        added = check_messages(messages, already=len(row["messages"]))
        _check_size(added, row["chars"])
        return Session.of(session_rows.append(conn, session_id, added, _chars(added)))


def complete_session(principal: Principal, agent_id: str, session_id: str, *,
                     knowledge_base_id: Optional[str] = None, extract: bool = True) -> tuple[Session, bool]:
    """(the session, whether this call started its extraction). The session is claimed under
    its lock, so two completions start one job and the job extracts every message the
    session held when it was claimed; a job that cannot be started opens it again."""
    with connection() as conn:
        row = _session(conn, principal, agent_id, session_id)
    if row["status"] == "COMPLETED":
        return get_session(principal, agent_id, session_id), False
    target = knowledge_base_id or row["knowledge_base_id"]
    wants = extract and any(m["content"].strip() for m in row["messages"])
    if wants:
        if row["user_id"] != principal.user_id:
            raise Forbidden("a session's knowledge is extracted as the user who recorded it: only they complete it"
                            " with extraction; extract: false ends it")
        if target is None:
            raise Invalid.field("knowledgeBaseId", "names the knowledge base the session's knowledge goes to"
                                                   " (or send extract: false)")
        chat_model()  # LLM_NOT_CONFIGURED before anything changes: the session stays open
        check_access(principal, agent_id, target)
    with connection() as conn, conn.transaction():
        row = _session(conn, principal, agent_id, session_id, for_update=True)
        if row["status"] == "COMPLETED":  # another completion claimed it first: its job stands
            return Session.of(row), False
        row = session_rows.complete(conn, session_id, knowledge_base_id=target, job_id=None)
    if not wants:
        return Session.of(row), False
    try:
        job = jobs.start(principal, agent_id, parse_conversation({"messages": row["messages"], "knowledgeBaseId": target}))
    except Exception:
        with connection() as conn:
            session_rows.reopen(conn, session_id)
        raise
    with connection() as conn:
        row = session_rows.set_job(conn, session_id, job["id"])
    return Session.of(row, job), True
