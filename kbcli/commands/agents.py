"""kb agents: agents (their knowledge-base tools are `kb tools`)."""
from typing import Annotated, Optional

import typer

from kbcli import output
from kbcli.output import Styled
from kbcli.session import Session, YesOption, command, delete_confirmed, new_group

app = new_group("agents", "Agents: create, list, show, delete (their tools: kb tools).")

AgentId = Annotated[str, typer.Argument(help="The agent's id (agent_…) or name.", show_default=False)]


def render_tools(tools: list[dict]) -> None:
    output.table(["tool id", "name", "type", "knowledge base", "top k", "min score", "status"], (
        (t.get("id"), t.get("name"), t.get("type"),
         (t.get("config") or {}).get("knowledgeBaseId"), (t.get("config") or {}).get("defaultTopK"),
         (t.get("config") or {}).get("defaultMinScore"),
         t.get("status") if t.get("status") in (None, "ok") else Styled(f"[red]{output.cell(t['status'])}[/]"))
        for t in tools), empty="no tools")


def render_agent(agent: dict) -> None:
    output.fields([("id", agent["id"]), ("name", agent.get("name")), ("description", agent.get("description")),
                   ("owner", agent.get("ownerId")), ("created", output.when(agent.get("createdAt"))),
                   ("updated", output.when(agent.get("updatedAt")))])
    render_tools(agent.get("availableTools") or [])


def render_created(agent: dict) -> None:
    output.note(f"[green]Created[/] {output.cell(agent['id'])}")
    render_agent(agent)


@command(app, "create")
def create(session: Session,
           name: Annotated[str, typer.Argument(help="Its name.", show_default=False)],
           description: Annotated[Optional[str], typer.Option(help="What it does.")] = None):
    """Create an agent."""
    body = {"name": name, **({"description": description} if description is not None else {})}
    session.emit(session.client().post("/agents", body), render_created)


@command(app, "list")
def list_(session: Session):
    """List your organisation's agents."""
    session.emit(session.client().get("/agents"), lambda d: output.table(
        ["id", "name", "tools", "updated"],
        ((a["id"], a.get("name"), len(a.get("availableTools") or []), output.when(a.get("updatedAt")))
         for a in d["items"]), empty="no agents"))


@command(app, "show")
def show(session: Session, agent_id: AgentId):
    """Show an agent and its tools."""
    session.emit(session.client().get(f"/agents/{agent_id}"), render_agent)


@command(app, "delete")
def delete(session: Session, agent_id: AgentId, yes: YesOption = False):
    """Delete an agent."""
    delete_confirmed(session, yes, f"Delete agent {agent_id}?", f"/agents/{agent_id}")
