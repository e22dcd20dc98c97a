"""Routes for agents and their knowledge-base tools."""
from chalice import Blueprint, Response

from chalicelib import limits
from chalicelib.agents import FORMATS, invoke_tool, service
from chalicelib.agents.tools import KNOWLEDGE_SEARCH
from chalicelib.api.http import JSON_HEADERS, authenticated, json_body, ok, query_params
from chalicelib.agents import context
from chalicelib.api.mcp_result import call_result
from chalicelib.api.views import agent_view, audit_view, available_kb_view, context_view, tool_result_view
from chalicelib.errors import Invalid
from chalicelib.validate import (bool_field, choice_field, name_and_description_changes, refuse_unknown,
                                 string_field)

blueprint = Blueprint(__name__)
TOOL_FIELDS = {"toolName", "toolDescription", "defaultTopK", "defaultMinScore", "strategy", "maxTokens", "rerank",
               "mode"}
ADD_TOOL_FIELDS = {"type", "toolName", "toolDescription", "defaultMaxResults", "defaultMinScore"}


@blueprint.route("/agents", methods=["POST"])
@authenticated(blueprint)
def create_agent(principal):
    body = json_body(blueprint.current_request)
    agent = service.create_agent(
        principal, name=string_field(body, "name", required=True, max_length=limits.NAME_MAX_CHARS),
        description=string_field(body, "description", required=False, max_length=limits.DESCRIPTION_MAX_CHARS),
        tools=body.get("availableTools", []),
        knowledge_mode=choice_field(body, "knowledgeMode", service.KNOWLEDGE_MODES, "tool"))
    return ok(agent_view(agent), status=201)


@blueprint.route("/agents", methods=["GET"])
@authenticated(blueprint)
def list_agents(principal):
    return ok({"items": [agent_view(r) for r in service.list_agents(principal)]})


@blueprint.route("/agents/{agent_id}", methods=["GET"])
@authenticated(blueprint)
def get_agent(principal, agent_id):
    return ok(agent_view(service.get_agent(principal, agent_id)))


@blueprint.route("/agents/{agent_id}", methods=["PATCH"])
@authenticated(blueprint)
def update_agent(principal, agent_id):
    body = json_body(blueprint.current_request)
    refuse_unknown(body, {"name", "description", "availableTools", "knowledgeMode"},
                   "cannot be changed; use name, description, availableTools or knowledgeMode")
    changes = name_and_description_changes(body)
    if "availableTools" in body:
        changes["available_tools"] = body["availableTools"]
    if "knowledgeMode" in body:
        changes["knowledge_mode"] = choice_field(body, "knowledgeMode", service.KNOWLEDGE_MODES, "tool")
    return ok(agent_view(service.update_agent(principal, agent_id, changes)))


@blueprint.route("/agents/{agent_id}", methods=["DELETE"])
@authenticated(blueprint)
def delete_agent(principal, agent_id):
    service.delete_agent(principal, agent_id)
    return ok({"id": agent_id, "deleted": True})


@blueprint.route("/agents/{agent_id}/available-knowledge-bases", methods=["GET"])
@authenticated(blueprint)
def available_knowledge_bases(principal, agent_id):
    """Seed 000's answer: `data` is the array of knowledge bases, each with its stats."""
    rows, linked = service.available_knowledge_bases(principal, agent_id)
    return ok([available_kb_view(r, linked, principal) for r in rows])


@blueprint.route("/agents/{agent_id}/knowledge-base-tools", methods=["POST"])
@authenticated(blueprint)
def link_knowledge_base(principal, agent_id):
    body = json_body(blueprint.current_request)
    tool = service.link_knowledge_base(
        principal, agent_id,
        kb_id=string_field(body, "knowledgeBaseId", required=True, max_length=limits.ID_MAX_CHARS),
        quick_add=bool_field(body, "quickAdd"),
        name=string_field(body, "toolName", required=False, max_length=limits.NAME_MAX_CHARS) or None,
        description=string_field(body, "toolDescription", required=False,
                                 max_length=limits.TOOL_DESCRIPTION_MAX_CHARS) or None,
        top_k=body.get("defaultTopK"), min_score=body.get("defaultMinScore"),
        strategy=body.get("strategy"), max_tokens=body.get("maxTokens"), rerank=body.get("rerank"),
        mode=body.get("mode"))
    return ok({"tool": tool})  # seed 000's answer: 200 and data.tool


@blueprint.route("/agents/{agent_id}/knowledge-base-tools/{tool_id}", methods=["PATCH"])
@authenticated(blueprint)
def edit_knowledge_base_tool(principal, agent_id, tool_id):
    body = json_body(blueprint.current_request)
    refuse_unknown(body, TOOL_FIELDS, f"cannot be changed; use {', '.join(sorted(TOOL_FIELDS))}")
    # Seed 000's `updates.toolName ?? tool.name`: null keeps the value, as an omitted field does.
    # Nothing to change (all null, or {}: what the seed's client sends when no field is set) is
    # the seed's answer too: 200 and the tool as it is.
    body = {k: v for k, v in body.items() if v is not None}
    changes = dict(body)
    if "toolName" in body:
        changes["toolName"] = string_field(body, "toolName", required=True, max_length=limits.NAME_MAX_CHARS)
    if "toolDescription" in body:
        changes["toolDescription"] = string_field(body, "toolDescription", required=True,
                                                  max_length=limits.TOOL_DESCRIPTION_MAX_CHARS)
    return ok({"tool": service.edit_knowledge_base_tool(principal, agent_id, tool_id, changes)})


@blueprint.route("/agents/{agent_id}/tools", methods=["POST"])
@authenticated(blueprint)
def add_tool(principal, agent_id):
    """A tool the service runs that is not a knowledge base's: knowledge_search."""
    body = json_body(blueprint.current_request)
    refuse_unknown(body, ADD_TOOL_FIELDS, f"is not a field of a tool; use {', '.join(sorted(ADD_TOOL_FIELDS))}")
    kind = body.get("type")
    if kind != KNOWLEDGE_SEARCH:
        raise Invalid.field("type", f"must be {KNOWLEDGE_SEARCH} (link a knowledge base through"
                                    " /agents/{agentId}/knowledge-base-tools)")
    tool = service.add_knowledge_search(
        principal, agent_id,
        name=string_field(body, "toolName", required=False, max_length=limits.NAME_MAX_CHARS) or None,
        description=string_field(body, "toolDescription", required=False,
                                 max_length=limits.TOOL_DESCRIPTION_MAX_CHARS) or None,
        max_results=body.get("defaultMaxResults"), min_score=body.get("defaultMinScore"))
    return ok(tool, status=201)


@blueprint.route("/agents/{agent_id}/tools/{tool_id}", methods=["DELETE"])
@authenticated(blueprint)
def remove_tool(principal, agent_id, tool_id):
    service.remove_tool(principal, agent_id, tool_id)
    return ok({"id": tool_id, "deleted": True})


@blueprint.route("/agents/{agent_id}/tools", methods=["GET"])
@authenticated(blueprint)
def list_tools(principal, agent_id):
    fmt = query_params(blueprint.current_request).get("format")
    if fmt is None:
        return ok({"items": service.list_tools(principal, agent_id)})
    if fmt not in FORMATS:
        raise Invalid.field("format", f"must be one of {', '.join(FORMATS)}")
    return ok(service.tool_definitions(principal, agent_id, fmt))


@blueprint.route("/agents/{agent_id}/audit-log", methods=["GET"])
@authenticated(blueprint)
def audit_log(principal, agent_id):
    return ok({"items": [audit_view(r) for r in service.audit_log(principal, agent_id)]})


@blueprint.route("/agents/{agent_id}/context", methods=["POST"])
@authenticated(blueprint)
def assemble_context(principal, agent_id):
    """Passages for the agent's next turn within maxTokens, shared as allocation says."""
    request = context.parse_context_request(json_body(blueprint.current_request))
    return ok(context_view(context.assemble(principal, agent_id, request)))


@blueprint.route("/agents/{agent_id}/tools/{tool_id}/invoke", methods=["POST"])
@authenticated(blueprint)
def invoke(principal, agent_id, tool_id):
    """Answers the tool result itself (not the data envelope): it goes to the model as is;
    with format=mcp, as MCP's CallToolResult (what `kb mcp` relays over stdio)."""
    fmt = query_params(blueprint.current_request).get("format")
    if fmt not in (None, "mcp"):
        raise Invalid.field("format", "must be mcp (or absent: the tool result itself)")
    view = tool_result_view(invoke_tool(principal, agent_id, tool_id, json_body(blueprint.current_request)))
    return Response(body=call_result(view) if fmt else view, status_code=200, headers=JSON_HEADERS)
