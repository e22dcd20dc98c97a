"""Agents and the knowledge bases they link as tools. Every change to the tools
array happens under a row lock, and link, edit, remove and PATCH are audited."""
from typing import Optional

from chalicelib.agents import tools as kbtools
from chalicelib.agents.tools import KNOWLEDGE_BASE
from chalicelib.auth import Principal
from chalicelib.errors import Invalid, NotFound
from chalicelib.ids import new_id
from chalicelib.storage import agents, connection, knowledge_bases


_PUBLIC = {"name": "name", "description": "description", "available_tools": "availableTools"}


def _not_found(agent_id: str) -> NotFound:
    return NotFound.thing("agent", agent_id)


def create_agent(principal: Principal, *, name: str, description: str, tools: list) -> dict:
    tools = kbtools.check_tools_array(tools)
    with connection() as conn:
        _check_links(conn, principal, tools)
        return agents.insert(conn, principal, agent_id=new_id("agent"), name=name,
                             description=description, tools=tools)


def _check_links(conn, principal: Principal, tools: list[dict]) -> None:
    """availableTools given whole obey the tool endpoints' rules: each knowledge base the
    caller can see, and linked once."""
    seen = set()
    for index, tool in enumerate(tools):
        if tool.get("type") != KNOWLEDGE_BASE:
            continue
        kb_id = tool["config"]["knowledgeBaseId"]
        if kb_id in seen:
            raise Invalid(f"availableTools[{index}]: the agent already links knowledge base {kb_id}",
                          code="KB_ALREADY_LINKED")
        if knowledge_bases.get_visible(conn, principal, kb_id) is None:
            raise NotFound.thing("knowledge base", kb_id)
        seen.add(kb_id)


def get_agent(principal: Principal, agent_id: str) -> dict:
    with connection() as conn:
        row = agents.get(conn, principal, agent_id)
    if row is None:
        raise _not_found(agent_id)
    return row


def list_agents(principal: Principal) -> list[dict]:
    with connection() as conn:
        return agents.list_in_org(conn, principal)


def update_agent(principal: Principal, agent_id: str, changes: dict) -> dict:
    """Audited like the tool endpoints: the fields that changed, before and after."""
    if "available_tools" in changes:
        changes["available_tools"] = kbtools.check_tools_array(changes["available_tools"])
    with connection() as conn, conn.transaction():
        before = agents.get(conn, principal, agent_id, for_update=True)
        if before is None:
            raise _not_found(agent_id)
        if "available_tools" in changes:
            _check_links(conn, principal, changes["available_tools"])
        row = agents.update(conn, principal, agent_id, changes)
        changed = [k for k in changes if before[k] != row[k]]
        if changed:
            agents.write_audit(conn, principal, agent_id=agent_id, action="update_agent", tool_id=None,
                               before={_PUBLIC[k]: before[k] for k in changed},
                               after={_PUBLIC[k]: row[k] for k in changed})
    return row


def delete_agent(principal: Principal, agent_id: str) -> None:
    with connection() as conn:
        if not agents.delete(conn, principal, agent_id):
            raise _not_found(agent_id)


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
                        name: Optional[str], description: Optional[str], top_k, min_score) -> dict:
    top_k, min_score = kbtools.check_defaults(top_k, min_score)
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
            description = f"Search {kb['name']} knowledge base"
        else:
            if not name:
                raise Invalid.field("toolName", "is required (or send quickAdd: true)")
            if not description:
                raise Invalid.field("toolDescription", "is required (or send quickAdd: true)")
            name = kbtools.check_name(name, taken)
        tool = kbtools.knowledge_base_tool(kb_id=kb_id, kb_name=kb["name"], name=name, description=description,
                                           top_k=top_k, min_score=min_score)
        agents.update(conn, principal, agent_id, {"available_tools": tools + [tool]})
        agents.write_audit(conn, principal, agent_id=agent_id, action="link_knowledge_base",
                            tool_id=tool["id"], before=None, after=tool)
    return tool


def edit_knowledge_base_tool(principal: Principal, agent_id: str, tool_id: str, changes: dict) -> dict:
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
        after = dict(before)
        if "toolName" in changes:
            after["name"] = kbtools.check_name(changes["toolName"], {t["name"] for t in tools if t is not before})
        if "toolDescription" in changes:
            after["description"] = changes["toolDescription"]
        top_k, min_score = kbtools.check_defaults(changes.get("defaultTopK", before["config"]["defaultTopK"]),
                                                  changes.get("defaultMinScore", before["config"]["defaultMinScore"]))
        after = kbtools.with_defaults(after, top_k, min_score)
        tools = tools[:index] + [after] + tools[index + 1:]
        agents.update(conn, principal, agent_id, {"available_tools": tools})
        agents.write_audit(conn, principal, agent_id=agent_id, action="edit_knowledge_base_tool",
                            tool_id=tool_id, before=before, after=after)
    return after


def remove_tool(principal: Principal, agent_id: str, tool_id: str) -> None:
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
        agents.write_audit(conn, principal, agent_id=agent_id, action="remove_tool", tool_id=tool_id,
                            before=removed, after=None)


def list_tools(principal: Principal, agent_id: str) -> list[dict]:
    """The agent's tools; a knowledge-base tool shows whether its knowledge base
    still exists (the tool stays either way) and its current name."""
    with connection() as conn:
        agent = agents.get(conn, principal, agent_id)
        if agent is None:
            raise _not_found(agent_id)
        tools = agent["available_tools"]
        names = knowledge_bases.visible_names(conn, principal, list(_linked_kb_ids(tools)))
    shown = []
    for tool in tools:
        if tool.get("type") != KNOWLEDGE_BASE:
            shown.append({**tool, "status": "ok"})
            continue
        kb_id = tool["config"]["knowledgeBaseId"]
        present = kb_id in names
        shown.append({**tool, "status": "ok" if present else "knowledge_base_missing",
                      "knowledgeBaseName": names.get(kb_id, tool["config"].get("knowledgeBaseName"))})
    return shown


def tool_definitions(principal: Principal, agent_id: str, fmt: str):
    convert = kbtools.FORMATS[fmt]
    definitions = [convert(t) for t in list_tools(principal, agent_id)]
    return {"tools": definitions} if fmt == "mcp" else definitions


def audit_log(principal: Principal, agent_id: str) -> list[dict]:
    with connection() as conn:
        if agents.get(conn, principal, agent_id) is None:
            raise _not_found(agent_id)
        return agents.audit_entries(conn, principal, agent_id)
