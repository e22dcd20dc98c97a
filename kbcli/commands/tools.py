"""kb tools: an agent's knowledge-base tools (browse, add, configure, edit, remove, invoke)."""
import json
import re
from enum import Enum
from typing import Annotated, Optional

import typer

from kbcli import output
from kbcli.client import CliError, Client
from kbcli.commands.agents import render_tools
from kbcli.commands.search import passage_where
from kbcli.output import Styled
from kbcli.session import Session, YesOption, command, delete_confirmed, new_group

app = new_group("tools", "An agent's knowledge-base tools: browse, add, configure, edit, remove, invoke, list.")

AgentOption = Annotated[str, typer.Option("--agent", help="The agent's id (agent_…) or name.", show_default=False)]
KbOption = Annotated[str, typer.Option("--kb", help="The knowledge base's id (kb_…) or name.", show_default=False)]
ToolId = Annotated[str, typer.Argument(help="The tool's id (tool_kb_…) or its name in the agent"
                                              " (search_product_docs).", show_default=False)]
NameOption = Annotated[Optional[str], typer.Option("--name", help="The tool's name as the model sees it"
                                                   " (letters, digits, _ and -).")]
DescriptionOption = Annotated[Optional[str], typer.Option("--description", help="What the model reads about it.")]
TopKOption = Annotated[Optional[int], typer.Option("--top-k", help="Passages per call unless the model asks"
                                                   " otherwise (1-20).")]
MinScoreOption = Annotated[Optional[float], typer.Option("--min-score", help="Least cosine similarity (0-1): the cosine column, not the score.")]


# A tool's id as the API makes them (agents/tools.py): anything else is a tool's name.
TOOL_ID = re.compile(r"^tool_([a-z]+_)?[0-9a-f]{16}$")


class Format(str, Enum):
    openai = "openai"
    anthropic = "anthropic"
    mcp = "mcp"
    worker = "worker"  # seed 002's worker: kind "kb", knowledge-base tools only


def tools_path(agent_id: str) -> str:
    return f"/agents/{agent_id}/knowledge-base-tools"


def tool_id(client: Client, agent: str, tool: str) -> str:
    """A tool's id as given, or the id of the agent's tool of this name (a name is unique
    within an agent)."""
    if TOOL_ID.match(tool):
        return tool
    for item in client.get(f"/agents/{agent}/tools")["items"]:
        if item.get("name") == tool:
            return item["id"]
    raise CliError("NOT_FOUND", f"agent {agent} has no tool named {tool} (`kb tools list --agent {agent}` shows"
                                " its tools)", status=404)


def render_tool(tool: dict) -> None:
    config = tool.get("config") or {}
    output.fields([("id", tool.get("id")), ("name", tool.get("name")), ("description", tool.get("description")),
                   ("knowledge base", f"{config.get('knowledgeBaseId')} ({config.get('knowledgeBaseName')})"),
                   ("default top k", config.get("defaultTopK")), ("default min score", config.get("defaultMinScore"))])


def _defaults(top_k: Optional[int], min_score: Optional[float]) -> dict:
    return {k: v for k, v in (("defaultTopK", top_k), ("defaultMinScore", min_score)) if v is not None}


def render_linked(tool: dict) -> None:
    output.note(f"[green]Linked[/] {output.cell(tool.get('name'))} ({output.cell(tool.get('id'))})")
    render_tool(tool)


def _link(session: Session, agent: str, body: dict) -> None:
    # The API answers seed 000's {"tool": {...}}; kb prints the tool itself, as before.
    session.emit(session.client().post(tools_path(agent), body)["tool"], render_linked)


@command(app, "browse")
def browse(session: Session, agent: AgentOption):
    """The knowledge bases the agent may link, and which it already links."""
    # The API answers seed 000's bare array; kb's JSON stays a list's {"items": [...]}.
    data = {"items": session.client().get(f"/agents/{agent}/available-knowledge-bases")}
    session.emit(data, lambda d: output.table(
        ["id", "name", "visibility", "documents", "linked"],
        ((kb["id"], kb.get("name"), kb.get("visibility"), (kb.get("stats") or {}).get("documentCount"),
          Styled("[green]linked[/]") if kb.get("linked") else "")
         for kb in d["items"]), empty="no knowledge bases to link"))


@command(app, "add")
def add(session: Session, agent: AgentOption, kb: KbOption,
        quick: Annotated[bool, typer.Option("--quick", help="Name and describe the tool from the knowledge"
                                                           " base (search_<name>).")] = False,
        name: NameOption = None, description: DescriptionOption = None,
        top_k: TopKOption = None, min_score: MinScoreOption = None):
    """Link a knowledge base to an agent as a search tool (--quick, or give --name and --description)."""
    if quick and (name or description):
        raise CliError("INVALID_OPTION", "--quick names and describes the tool itself; drop --name/--description"
                                         " or --quick", exit_code=2)
    body: dict = {"knowledgeBaseId": kb, **_defaults(top_k, min_score)}
    if quick:
        body["quickAdd"] = True
    else:
        body.update({k: v for k, v in (("toolName", name), ("toolDescription", description)) if v is not None})
    _link(session, agent, body)


@command(app, "configure")
def configure(session: Session, agent: AgentOption, kb: KbOption,
              name: Annotated[str, typer.Option("--name", help="The tool's name as the model sees it.",
                                                show_default=False)],
              description: Annotated[str, typer.Option("--description", help="What the model reads about it.",
                                                       show_default=False)],
              top_k: TopKOption = None, min_score: MinScoreOption = None):
    """Link a knowledge base with a name, description and defaults of your own."""
    _link(session, agent, {"knowledgeBaseId": kb, "toolName": name, "toolDescription": description,
                           **_defaults(top_k, min_score)})


@command(app, "edit")
def edit(session: Session, tool: ToolId, agent: AgentOption, name: NameOption = None,
         description: DescriptionOption = None, top_k: TopKOption = None, min_score: MinScoreOption = None):
    """Change a knowledge-base tool's name, description or defaults."""
    body = {k: v for k, v in (("toolName", name), ("toolDescription", description)) if v is not None}
    body.update(_defaults(top_k, min_score))
    if not body:
        raise CliError("NOTHING_TO_CHANGE", "give --name, --description, --top-k or --min-score", exit_code=2)
    client = session.client()
    session.emit(client.patch(f"{tools_path(agent)}/{tool_id(client, agent, tool)}", body)["tool"], render_tool)


@command(app, "remove")
def remove(session: Session, tool: ToolId, agent: AgentOption, yes: YesOption = False):
    """Remove a tool (by id or name) from an agent."""
    found = tool_id(session.client(), agent, tool)
    shown = tool if tool == found else f"{tool} ({found})"
    delete_confirmed(session, yes, f"Remove tool {shown} from agent {agent}?", f"/agents/{agent}/tools/{found}",
                     done="Removed")


@command(app, "list")
def list_(session: Session, agent: AgentOption,
          format_: Annotated[Optional[Format], typer.Option("--format", help="The definitions an LLM API takes"
                                                            " (printed as JSON).")] = None):
    """An agent's tools, with each one's status (knowledge_base_missing once its knowledge base is gone)."""
    data = session.client().get(f"/agents/{agent}/tools", params={"format": format_.value if format_ else None})
    if format_ is not None:
        output.print_json(data)
        return
    session.emit(data, lambda d: render_tools(d["items"]))


def render_invocation(result: dict) -> None:
    output.note(f"{output.cell(result.get('knowledgeBaseName'))}, {output.cell(json.dumps(result.get('query')))}:"
                f" {output.cell(result.get('resultCount'))} results")
    output.table(["#", "score", "cosine", "path", "section", "passage"], (
        (hit.get("rank"), hit.get("similarity"), hit.get("vectorScore"), passage_where(hit), hit.get("section"),
         " ".join((hit.get("content") or "").split()))
        for hit in result.get("results") or []), empty="no passages")


@command(app, "invoke")
def invoke(session: Session, tool: ToolId,
           query: Annotated[str, typer.Argument(help="The query, as a model would send it.", show_default=False)],
           agent: AgentOption, top_k: TopKOption = None, min_score: MinScoreOption = None):
    """Run a tool as an agent runtime would, and print the result the model would read."""
    arguments = {"query": query, **{k: v for k, v in (("topK", top_k), ("minScore", min_score)) if v is not None}}
    client = session.client()
    result = client.request("POST", f"/agents/{agent}/tools/{tool_id(client, agent, tool)}/invoke", json=arguments,
                            raw=True)
    if isinstance(result, dict) and result.get("success") is False:
        # A readable failure for the model (its knowledge base was deleted), answered with a 200.
        if session.json:
            output.print_json(result)
        else:
            output.err.print(f"[bold red]Tool failed[/]: {output.cell(result.get('message'))}")
        raise typer.Exit(1)
    session.emit(result, render_invocation)
