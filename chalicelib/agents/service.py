"""Agents and the knowledge bases they link as tools. An agent belongs to its owner
(the organisation's admins manage them all); every change to the tools array happens
under a row lock, and every write is audited."""
from typing import Optional

from chalicelib.agents import redact
from chalicelib.agents import tools as kbtools
from chalicelib.agents.tools import KNOWLEDGE_BASE, KNOWLEDGE_SEARCH
from chalicelib.auth import Principal
from chalicelib.auth.access import require_writer
from chalicelib.errors import Invalid, NotFound
from chalicelib.ids import new_id
from chalicelib.storage import agents, audit, connection, knowledge_bases


_PUBLIC = {"name": "name", "description": "description", "available_tools": "availableTools",
           "knowledge_mode": "knowledgeMode"}
# How an agent's runtime gets knowledge: "tool", the model calls the knowledge tools; "auto",
# the runtime asks POST /agents/{agentId}/context each turn, and the tool lists given to
# the model leave the knowledge tools out.
KNOWLEDGE_MODES = ("tool", "auto")


def _not_found(agent_id: str) -> NotFound:
    return NotFound.thing("agent", agent_id)


def create_agent(principal: Principal, *, name: str, description: str, tools: list,
                 knowledge_mode: str = "tool") -> dict:
    require_writer(principal, "create agents")
    tools = kbtools.check_tools_array(tools)
    with connection() as conn, conn.transaction():
        _check_links(conn, principal, tools)
        row = agents.insert(conn, principal, agent_id=new_id("agent"), name=name,
                            description=description, tools=tools, knowledge_mode=knowledge_mode)
        _audit(conn, principal, "create_agent", row["id"], after=_public(row, _PUBLIC))
    return row


def _public(row: dict, fields) -> dict:
    return {_PUBLIC[k]: row[k] for k in fields}


def _audit(conn, principal: Principal, action: str, agent_id: str, *, tool_id: Optional[str] = None,
           before=None, after=None) -> None:
    audit.write(conn, principal, action, "agent", agent_id, agent_id=agent_id, tool_id=tool_id,
                before=before, after=after)


def _check_links(conn, principal: Principal, tools: list[dict], already: frozenset = frozenset()) -> None:
    """availableTools given whole obey the tool endpoints' rules: each knowledge base the
    caller can see (or one the agent already links: an admin may keep a colleague's link
    to a private one), and linked once."""
    seen = set()
    for index, tool in enumerate(tools):
        if tool.get("type") != KNOWLEDGE_BASE:
            continue
        kb_id = tool["config"]["knowledgeBaseId"]
        if kb_id in seen:
            raise Invalid(f"availableTools[{index}]: the agent already links knowledge base {kb_id}",
                          code="KB_ALREADY_LINKED")
        if kb_id not in already and knowledge_bases.get_visible(conn, principal, kb_id) is None:
            raise NotFound.thing("knowledge base", kb_id)
        seen.add(kb_id)


def get_agent(principal: Principal, agent_id: str) -> dict:
    with connection() as conn:
        row = agents.get(conn, principal, agent_id)
        if row is None:
            raise _not_found(agent_id)
        return _as_seen(conn, principal, [row])[0]


def list_agents(principal: Principal) -> list[dict]:
    with connection() as conn:
        return _as_seen(conn, principal, agents.list_own(conn, principal))


def _as_seen(conn, principal: Principal, rows: list[dict]) -> list[dict]:
    """Agents as the caller may see them: a tool linking a knowledge base it cannot see (an
    admin's view of a colleague's agent) without what names that knowledge base."""
    seen = redact.seen_kbs(conn, principal, [k for r in rows for k in _linked_kb_ids(r["available_tools"])])
    return [{**r, "available_tools": redact.tools_as_seen(r["available_tools"], seen)} for r in rows]


def _as_stored(tools: list[dict], stored: list[dict], visible: set[str]) -> list[dict]:
    """availableTools given whole by a caller who sees some links redacted: a tool linking a
    knowledge base it cannot see passes through unchanged, as it is stored."""
    hidden = {t["id"]: t for t in stored if redact.links_hidden(t, visible)}
    return [hidden.get(t.get("id"), t) for t in tools]


def update_agent(principal: Principal, agent_id: str, changes: dict) -> dict:
    """Audited like the tool endpoints: the fields that changed, before and after."""
    require_writer(principal, "change agents")
    if "available_tools" in changes:
        changes["available_tools"] = kbtools.check_tools_array(changes["available_tools"])
    with connection() as conn, conn.transaction():
        before = agents.get(conn, principal, agent_id, for_update=True)
        if before is None:
            raise _not_found(agent_id)
        if "available_tools" in changes:
            linked = _linked_kb_ids(before["available_tools"])
            changes["available_tools"] = _as_stored(changes["available_tools"], before["available_tools"],
                                                    redact.seen_kbs(conn, principal, linked))
            _check_links(conn, principal, changes["available_tools"], frozenset(linked))
        row = agents.update(conn, principal, agent_id, changes)
        changed = [k for k in changes if before[k] != row[k]]
        if changed:
            _audit(conn, principal, "update_agent", agent_id,
                   before=_public(before, changed), after=_public(row, changed))
        return _as_seen(conn, principal, [row])[0]


def delete_agent(principal: Principal, agent_id: str) -> None:
    require_writer(principal, "delete agents")
    with connection() as conn, conn.transaction():
        row = agents.delete(conn, principal, agent_id)
        if row is None:
            raise _not_found(agent_id)
        _audit(conn, principal, "delete_agent", agent_id, before=_public(row, _PUBLIC))


def _linked_kb_ids(tools: list) -> set[str]:
    return {t["config"]["knowledgeBaseId"] for t in tools if t.get("type") == KNOWLEDGE_BASE}


def available_knowledge_bases(principal: Principal, agent_id: str) -> tuple[list[dict], set[str]]:
    """(the knowledge bases the caller can see, the ids of those the agent links)."""
    with connection() as conn:
        agent = agents.get(conn, principal, agent_id)
        if agent is None:
            raise _not_found(agent_id)
        kbs = knowledge_bases.list_visible(conn, principal, limit=1000, after=None)
    return kbs, _linked_kb_ids(agent["available_tools"])


def link_knowledge_base(principal: Principal, agent_id: str, *, kb_id: str, quick_add: bool,
                        name: Optional[str], description: Optional[str], top_k, min_score,
                        strategy=None, max_tokens=None, rerank=None, mode=None) -> dict:
    require_writer(principal, "link knowledge bases to agents")
    top_k, min_score = kbtools.check_defaults(top_k, min_score)
    settings = kbtools.check_settings(strategy, max_tokens, rerank, mode)
    with connection() as conn, conn.transaction():
        agent = agents.get(conn, principal, agent_id, for_update=True)
        if agent is None:
            raise _not_found(agent_id)
        kb = knowledge_bases.get_visible(conn, principal, kb_id)
        if kb is None:
            raise NotFound.thing("knowledge base", kb_id)
        tools = agent["available_tools"]
        if kb_id in _linked_kb_ids(tools):
            raise Invalid(f"the agent already links knowledge base {kb_id}", code="KB_ALREADY_LINKED")
        taken = {t["name"] for t in tools}
        if quick_add:
            name = kbtools.quick_add_name(kb["name"], taken)
            description = kbtools.quick_add_description(kb["name"], kb["description"])
        else:
            if not name:
                raise Invalid.field("toolName", "is required (or send quickAdd: true)")
            if not description:
                raise Invalid.field("toolDescription", "is required (or send quickAdd: true)")
            name = kbtools.check_name(name, taken)
        tool = kbtools.knowledge_base_tool(kb_id=kb_id, kb_name=kb["name"], name=name, description=description,
                                           top_k=top_k, min_score=min_score, **settings._asdict())
        agents.update(conn, principal, agent_id, {"available_tools": tools + [tool]})
        _audit(conn, principal, "link_knowledge_base", agent_id, tool_id=tool["id"], after=tool)
    return tool


def add_knowledge_search(principal: Principal, agent_id: str, *, name: Optional[str], description: Optional[str],
                         max_results, min_score) -> dict:
    """Links the knowledge_search tool (one per agent): seed 001's search over the
    entries the caller may read."""
    require_writer(principal, "add tools to agents")
    max_results, min_score = kbtools.check_knowledge_search_defaults(max_results, min_score)
    with connection() as conn, conn.transaction():
        agent = agents.get(conn, principal, agent_id, for_update=True)
        if agent is None:
            raise _not_found(agent_id)
        tools = agent["available_tools"]
        if any(t.get("type") == KNOWLEDGE_SEARCH for t in tools):
            raise Invalid("the agent already has a knowledge_search tool", code="TOOL_ALREADY_LINKED")
        taken = {t["name"] for t in tools}
        name = kbtools.check_name(name, taken) if name else kbtools.unique_name(KNOWLEDGE_SEARCH, taken)
        tool = kbtools.knowledge_search_tool(name=name, description=description or kbtools.KNOWLEDGE_SEARCH_DESCRIPTION,
                                             max_results=max_results, min_score=min_score)
        agents.update(conn, principal, agent_id, {"available_tools": tools + [tool]})
        _audit(conn, principal, "add_tool", agent_id, tool_id=tool["id"], after=tool)
    return tool


def edit_knowledge_base_tool(principal: Principal, agent_id: str, tool_id: str, changes: dict) -> dict:
    require_writer(principal, "edit an agent's tools")
    with connection() as conn, conn.transaction():
        agent = agents.get(conn, principal, agent_id, for_update=True)
        if agent is None:
            raise _not_found(agent_id)
        tools = agent["available_tools"]
        index = next((i for i, t in enumerate(tools) if t.get("id") == tool_id), None)
        if index is None:
            raise NotFound.thing("tool", tool_id)
        before = tools[index]
        if before.get("type") != KNOWLEDGE_BASE:
            raise Invalid(f"tool {tool_id} is a {before.get('type')} tool", code="NOT_A_KNOWLEDGE_BASE_TOOL")
        if not changes:  # nothing written, nothing audited
            return redact.tools_as_seen([before], redact.seen_kbs(conn, principal, _linked_kb_ids([before])))[0]
        after = dict(before)
        if "toolName" in changes:
            after["name"] = kbtools.check_name(changes["toolName"], {t["name"] for t in tools if t is not before})
        if "toolDescription" in changes:
            after["description"] = changes["toolDescription"]
        top_k, min_score = kbtools.check_defaults(changes.get("defaultTopK", before["config"]["defaultTopK"]),
                                                  changes.get("defaultMinScore", before["config"]["defaultMinScore"]))
        after = kbtools.with_defaults(after, top_k, min_score)
        now = kbtools.settings_of(before)
        after = kbtools.with_settings(after, kbtools.check_settings(
            changes.get("strategy", now.strategy), changes.get("maxTokens", now.max_tokens),
            changes.get("rerank", now.rerank), changes.get("mode", now.mode)))
        tools = tools[:index] + [after] + tools[index + 1:]
        agents.update(conn, principal, agent_id, {"available_tools": tools})
        _audit(conn, principal, "edit_knowledge_base_tool", agent_id, tool_id=tool_id, before=before, after=after)
        return redact.tools_as_seen([after], redact.seen_kbs(conn, principal, _linked_kb_ids([after])))[0]


def remove_tool(principal: Principal, agent_id: str, tool_id: str) -> None:
    require_writer(principal, "remove an agent's tools")
    with connection() as conn, conn.transaction():
        agent = agents.get(conn, principal, agent_id, for_update=True)
        if agent is None:
            raise _not_found(agent_id)
        tools = agent["available_tools"]
        removed = next((t for t in tools if t.get("id") == tool_id), None)
        if removed is None:
            raise NotFound.thing("tool", tool_id)
        agents.update(conn, principal, agent_id,
                             {"available_tools": [t for t in tools if t is not removed]})
        _audit(conn, principal, "remove_tool", agent_id, tool_id=tool_id, before=removed)


def list_tools(principal: Principal, agent_id: str) -> list[dict]:
    """The agent's tools; a knowledge-base tool shows whether its knowledge base
    still exists (the tool stays either way) and its current name."""
    with connection() as conn:
        agent = agents.get(conn, principal, agent_id)
        if agent is None:
            raise _not_found(agent_id)
        tools = agent["available_tools"]
        linked = list(_linked_kb_ids(tools))
        there = knowledge_bases.reachable(conn, principal, linked)
        seen = redact.seen_kbs(conn, principal, linked)
    shown = []
    for tool in tools:
        if tool.get("type") != KNOWLEDGE_BASE:
            shown.append({**tool, "status": "ok"})
            continue
        kb_id = tool["config"]["knowledgeBaseId"]
        if there.get(kb_id) is not None:
            shown.append({**tool, "status": "ok", "knowledgeBaseName": there[kb_id]})
            # a viewer writes nothing: its model is not offered a tool that would answer 403
            if kbtools.settings_of(tool).mode == kbtools.READ_WRITE and principal.role != "viewer":
                writer = kbtools.write_tool(shown[-1], {t["name"] for t in tools} | {t["name"] for t in shown})
                shown.append({**writer, "status": "ok", "knowledgeBaseName": there[kb_id]})
        elif kb_id in there:  # an admin looking at a colleague's agent that links a private one
            shown.append({**redact.hidden_tool(tool), "status": "knowledge_base_hidden", "knowledgeBaseName": None})
        elif kb_id in seen:
            shown.append({**tool, "status": "knowledge_base_missing",
                          "knowledgeBaseName": tool["config"].get("knowledgeBaseName")})
        else:  # deleted, and private to someone else when it was
            shown.append({**redact.hidden_tool(tool), "status": "knowledge_base_missing", "knowledgeBaseName": None})
    return shown


def tool_definitions(principal: Principal, agent_id: str, fmt: str):
    """The tools as an LLM API takes them; an agent in knowledgeMode auto gets its
    knowledge from the context endpoint, so its knowledge tools are left out."""
    convert = kbtools.FORMATS[fmt]
    auto = get_agent(principal, agent_id)["knowledge_mode"] == "auto"
    definitions = [convert(t) for t in list_tools(principal, agent_id)
                   if not (auto and t.get("type") in (KNOWLEDGE_BASE, KNOWLEDGE_SEARCH))]
    definitions = [d for d in definitions if d is not None]  # the worker's format has only kb tools
    return {"tools": definitions} if fmt == "mcp" else definitions


def audit_log(principal: Principal, agent_id: str) -> list[dict]:
    """The agent's entries; a tool's knowledge-base name shows only to who can see it."""
    with connection() as conn:
        if agents.get(conn, principal, agent_id) is None:
            raise _not_found(agent_id)
        return redact.audit_rows(conn, principal, audit.for_agent(conn, principal, agent_id))
