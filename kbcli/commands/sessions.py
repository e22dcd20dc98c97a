"""kb sessions: an agent's recorded conversations (seed 003: knowledge is extracted when one completes)."""
import json
from typing import Annotated, Optional

import typer

from kbcli import output
from kbcli.client import CliError
from kbcli.commands.tools import AgentOption
from kbcli.session import Session, command, new_group

app = new_group("sessions", "An agent's sessions: open, add messages, complete (extracts what it taught), show.")

SessionId = Annotated[str, typer.Argument(help="The session's id (session_…).", show_default=False)]
KbOption = Annotated[Optional[str], typer.Option("--kb", help="The knowledge base its knowledge goes to (its id or name).")]


def _path(agent: str, session_id: str = "") -> str:
    return f"/agents/{agent}/sessions" + (f"/{session_id}" if session_id else "")


def render_session(data: dict) -> None:
    job = data.get("extraction") or {}
    output.fields([("session", data["id"]), ("status", data["status"]), ("messages", data["messageCount"]),
                   ("knowledge base", data.get("knowledgeBaseId")),
                   ("extraction", f"{job.get('jobId')} {job.get('status')}" if job else None)])


@command(app, "open")
def open_(session: Session, agent: AgentOption, kb: KbOption = None):
    """Open a session for the agent."""
    session.emit(session.client().post(_path(agent), {"knowledgeBaseId": kb} if kb else {}), render_session)


@command(app, "add")
def add(session: Session, session_id: SessionId, agent: AgentOption,
        role: Annotated[str, typer.Option(help="user, assistant, system or tool.")] = "user",
        content: Annotated[Optional[str], typer.Option(help="The message (default: stdin).")] = None,
        messages_file: Annotated[Optional[str], typer.Option("--messages", help="A JSON file of [{role, content}]"
                                                             " to add at once.")] = None):
    """Add a message (or a file of them) to an open session."""
    if messages_file:
        try:
            with open(messages_file, encoding="utf-8") as handle:
                body = {"messages": json.load(handle)}
        except (OSError, ValueError) as error:
            raise CliError("INVALID_OPTION", f"--messages {messages_file}: {error}", exit_code=2) from None
    else:
        body = {"role": role, "content": content if content is not None else typer.get_text_stream("stdin").read()}
    session.emit(session.client().post(f"{_path(agent, session_id)}/messages", body), render_session)


@command(app, "complete")
def complete(session: Session, session_id: SessionId, agent: AgentOption, kb: KbOption = None,
             extract: Annotated[bool, typer.Option("--extract/--no-extract", help="Extract what it taught"
                                                   " (needs a chat model).")] = True):
    """End a session; its knowledge is extracted into the knowledge base (once)."""
    body = {"extract": extract, **({"knowledgeBaseId": kb} if kb else {})}
    session.emit(session.client().post(f"{_path(agent, session_id)}/complete", body), render_session)


@command(app, "show")
def show(session: Session, session_id: SessionId, agent: AgentOption):
    """A session, its messages and its extraction."""
    session.emit(session.client().get(_path(agent, session_id)), render_session)
