"""kb apply / kb export: seed 004's knowledge/v1 definitions (kbcli/manifests.py) made true
through the API, and written back from it.

apply creates what is missing and changes what differs, prints one line per change, and
changes nothing the second time. A knowledge base's embedding and chunking are fixed at
creation: a file that says otherwise is reported, not applied (delete and apply again), and
the run exits 1. Knowledge-base tools an agent has beyond its file stay unless --prune."""
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import typer

from kbcli import manifests, output
from kbcli.client import CliError, Client
from kbcli.manifests import AgentSpec, KnowledgeBaseSpec
from kbcli.session import Session, command


@dataclass
class Change:
    kind: str  # knowledgebase | agent | tool
    name: str
    action: str  # created | configured | unchanged | removed | failed
    detail: str = ""

    def as_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "action": self.action, "detail": self.detail}


def knowledge_bases_by_name(client: Client) -> tuple[dict[str, dict], dict[str, list[str]]]:
    """The caller's organisation's knowledge bases it sees, by name (another organisation's
    public ones carry no organizationId and are not the caller's to define), and the names
    several of them share, with their ids."""
    by_name: dict[str, dict] = {}
    shared: dict[str, list[str]] = {}
    for kb in client.every("/knowledge-bases", {"limit": 100}):
        if kb.get("organizationId"):
            if kb["name"] in by_name:
                shared.setdefault(kb["name"], [by_name[kb["name"]]["id"]]).append(kb["id"])
            by_name[kb["name"]] = kb
    return by_name, shared


def _ambiguous(name: str, ids: list[str]) -> str:
    return (f"AMBIGUOUS_NAME: {len(ids)} knowledge bases are named {name} ({', '.join(ids)});"
            " rename one before applying definitions by name")


def own_knowledge_bases(client: Client) -> dict[str, dict]:
    """As knowledge_bases_by_name, refusing a name several share (an export names each one)."""
    by_name, shared = knowledge_bases_by_name(client)
    for name, ids in shared.items():
        code, message = _ambiguous(name, ids).split(": ", 1)
        raise CliError(code, message)
    return by_name


def _kb_changes(spec: KnowledgeBaseSpec, kb: dict) -> tuple[dict, list[str]]:
    """(the PATCH body, what differs in what is fixed at creation)."""
    patch, fixed = {}, []
    if spec.description is not None and spec.description != (kb.get("description") or ""):
        patch["description"] = spec.description
    if spec.visibility is not None and spec.visibility != kb["visibility"]:
        patch["visibility"] = spec.visibility
    if spec.access is not None and spec.access != kb.get("access"):
        patch["access"] = spec.access
    if spec.rerank is not None and spec.rerank != (kb.get("search") or {}).get("rerank", False):
        patch["search"] = {"rerank": spec.rerank}
    embedding, chunking = kb.get("embedding") or {}, kb.get("chunking") or {}
    for field, wanted, have in (("embedding_provider", spec.provider, embedding.get("provider")),
                                ("embedding_model", spec.model, embedding.get("model")),
                                ("chunking.max_chunk_size", spec.chunk_tokens, chunking.get("chunkTokens")),
                                ("chunking.parent_tokens", spec.parent_tokens, chunking.get("parentTokens")),
                                ("chunking.child_tokens", spec.child_tokens, chunking.get("childTokens")),
                                ("chunking.overlap", spec.chunk_overlap, chunking.get("chunkOverlap")),
                                ("chunking.strategy", spec.strategy, chunking.get("strategy", "fixed"))):
        if wanted is not None and wanted != have:
            fixed.append(f"{field} is {have} here, {wanted} in the file")
    return patch, fixed


def _apply_knowledge_base(client: Client, spec: KnowledgeBaseSpec, existing: dict[str, dict]) -> Change:
    kb = existing.get(spec.name)
    if kb is None:
        body: dict = {"name": spec.name, "description": spec.description or "",
                      # access lists mean an org knowledge base unless the file says otherwise
                      "visibility": spec.visibility or ("org" if spec.access else "private")}
        if spec.access:
            body["access"] = spec.access
        if spec.rerank is not None:
            body["search"] = {"rerank": spec.rerank}
        embedding = {k: v for k, v in (("provider", spec.provider), ("model", spec.model)) if v}
        chunking = {k: v for k, v in (("chunkTokens", spec.chunk_tokens), ("chunkOverlap", spec.chunk_overlap),
                                      ("parentTokens", spec.parent_tokens), ("childTokens", spec.child_tokens),
                                      ("strategy", spec.strategy)) if v is not None}
        body.update({k: v for k, v in (("embedding", embedding), ("chunking", chunking)) if v})
        existing[spec.name] = created = client.post("/knowledge-bases", body)
        return Change("knowledgebase", spec.name, "created", created["id"])
    patch, fixed = _kb_changes(spec, kb)
    if fixed:
        return Change("knowledgebase", spec.name, "failed", "; ".join(fixed) + " (fixed at creation: delete it"
                      " and apply again)")
    if not patch:
        return Change("knowledgebase", spec.name, "unchanged")
    existing[spec.name] = client.patch(f"/knowledge-bases/{kb['id']}", patch)
    return Change("knowledgebase", spec.name, "configured", ", ".join(patch))


def _apply_agent(client: Client, spec: AgentSpec, kbs: dict[str, dict], agents: dict[str, dict],
                 prune: bool) -> list[Change]:
    missing = sorted({t.knowledge_base for t in spec.knowledge} - set(kbs))
    if missing:
        return [Change("agent", spec.name, "failed", f"no knowledge base named {missing[0]} in your organisation")]
    agent, changes = agents.get(spec.name), []
    if agent is None:
        agent = client.post("/agents", {"name": spec.name, "description": spec.description or ""})
        changes.append(Change("agent", spec.name, "created", agent["id"]))
    elif spec.description is not None and spec.description != (agent.get("description") or ""):
        client.patch(f"/agents/{agent['id']}", {"description": spec.description})
        changes.append(Change("agent", spec.name, "configured", "description"))
    else:
        changes.append(Change("agent", spec.name, "unchanged"))
    tools_path = f"/agents/{agent['id']}/knowledge-base-tools"
    linked = {(t.get("config") or {}).get("knowledgeBaseId"): t for t in agent.get("availableTools") or []
              if t.get("type") == "knowledge_base"}
    wanted_ids = set()
    for tool_spec in spec.knowledge:
        kb_id = kbs[tool_spec.knowledge_base]["id"]
        wanted_ids.add(kb_id)
        label = f"{spec.name}/{tool_spec.knowledge_base}"
        settings = tool_spec.settings()
        tool = linked.get(kb_id)
        if tool is None:
            body = {"knowledgeBaseId": kb_id, **{k: v for k, v in settings.items() if k not in ("toolName",
                                                                                              "toolDescription")}}
            if "toolName" in settings and "toolDescription" in settings:
                body.update(toolName=settings["toolName"], toolDescription=settings["toolDescription"])
            else:
                body["quickAdd"] = True
            tool = client.post(tools_path, body)["tool"]
            action = "created"
        else:
            action = "unchanged"
        differs = {k: v for k, v in settings.items() if _tool_value(tool, k) != v}
        if differs:
            client.patch(f"{tools_path}/{tool['id']}", differs)
            action = "created" if action == "created" else "configured"
        changes.append(Change("tool", label, action, tool.get("name", "") if action == "created"
                              else ", ".join(differs)))
    for kb_id, tool in linked.items():
        if kb_id not in wanted_ids and prune:
            client.delete(f"/agents/{agent['id']}/tools/{tool['id']}")
            changes.append(Change("tool", f"{spec.name}/{tool.get('name')}", "removed"))
    return changes


def _tool_value(tool: dict, field: str):
    if field == "toolName":
        return tool.get("name")
    if field == "toolDescription":
        return tool.get("description")
    return (tool.get("config") or {}).get(field)


def apply(client: Client, specs: list, *, prune: bool = False) -> list[Change]:
    """Knowledge bases first (agents' tools name them), then agents. A failure of one
    definition is reported and the rest go on."""
    changes: list[Change] = []
    kbs, shared = knowledge_bases_by_name(client)  # a shared name fails only the definitions that use it
    for spec in (s for s in specs if isinstance(s, KnowledgeBaseSpec)):
        if spec.name in shared:
            changes.append(Change("knowledgebase", spec.name, "failed", _ambiguous(spec.name, shared[spec.name])))
            continue
        try:
            changes.append(_apply_knowledge_base(client, spec, kbs))
        except CliError as error:
            changes.append(Change("knowledgebase", spec.name, "failed", f"{error.code}: {error.message}"))
    agent_specs = [s for s in specs if isinstance(s, AgentSpec)]
    if agent_specs:
        agents = {a["name"]: a for a in client.get("/agents")["items"]}
        for spec in agent_specs:
            named = sorted({t.knowledge_base for t in spec.knowledge} & set(shared))
            if named:
                changes.append(Change("agent", spec.name, "failed", _ambiguous(named[0], shared[named[0]])))
                continue
            try:
                changes += _apply_agent(client, spec, kbs, agents, prune)
            except CliError as error:
                changes.append(Change("agent", spec.name, "failed", f"{error.code}: {error.message}"))
    return changes


def render_changes(items: list[dict]) -> None:
    colours = {"created": "green", "configured": "yellow", "removed": "yellow", "failed": "red", "unchanged": "dim"}
    for c in items:
        detail = f" ({output.cell(c['detail'])})" if c["detail"] else ""
        output.note(f"{c['kind']}/{output.cell(c['name'])} [{colours[c['action']]}]{c['action']}[/]{detail}")


FileOption = Annotated[list[str], typer.Option("--filename", "-f", help="A YAML file or a folder of them"
                                               " (apiVersion: knowledge/v1; repeatable).", show_default=False)]


def register(app: typer.Typer) -> None:
    @command(app, "apply")
    def apply_command(session: Session, filename: FileOption,
                      prune: Annotated[bool, typer.Option("--prune", help="Also remove an agent's knowledge-base"
                                                          " tools its file does not list.")] = False):
        """Create or change knowledge bases and agents to match knowledge/v1 YAML files."""
        specs = manifests.load(filename)
        if not specs:
            raise CliError("NO_DEFINITIONS", f"no knowledge/v1 documents in {', '.join(filename)}", exit_code=2)
        changes = [c.as_dict() for c in apply(session.client(), specs, prune=prune)]
        session.emit(changes, render_changes)
        if any(c["action"] == "failed" for c in changes):
            raise typer.Exit(1)

    @command(app, "export")
    def export_command(session: Session,
                       out: Annotated[Optional[Path], typer.Option("--out", "-o", help="A folder: writes"
                                      " knowledge/NAME.yaml and agents/NAME.yaml there (default: YAML on stdout).",
                                      show_default=False)] = None):
        """Your organisation's knowledge bases and your agents as knowledge/v1 YAML."""
        client = session.client()
        kbs = own_knowledge_bases(client)
        names = {kb["id"]: name for name, kb in kbs.items()}
        documents = ([manifests.knowledge_base_document(kb) for kb in kbs.values()]
                     + [manifests.agent_document(a, names) for a in client.get("/agents")["items"]])
        if out is None:
            typer.echo(manifests.dump(documents), nl=False)
            return
        written = []
        for document in documents:
            folder = "knowledge" if document["kind"] == "KnowledgeBase" else "agents"
            path = out / folder / f"{_file_name(document['metadata']['id'])}.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(manifests.dump([document]), encoding="utf-8")
            written.append(str(path))
        session.emit({"written": written}, lambda d: [output.note(f"wrote {output.cell(p)}") for p in d["written"]])


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name).strip("-.") or "unnamed"
