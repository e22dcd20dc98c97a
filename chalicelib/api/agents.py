"""Routes for agents and their knowledge-base tools."""
from chalice import Blueprint, Response

from chalicelib.agents import FORMATS, ToolError, invoke_tool, service
from chalicelib.api.http import (JSON_HEADERS, ApiError, authenticated, invalid, json_body,
                                 name_and_description_changes, ok, query_params, refuse_unknown,
                                 string_field)

blueprint = Blueprint(__name__)


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except ToolError as err:
        raise ApiError(err.status, err.code, err.message) from None


@blueprint.route("/agents", methods=["POST"])
@authenticated(blueprint)
def create_agent(principal):
    body = json_body(blueprint.current_request)
    agent = _call(service.create_agent, principal,
                  name=string_field(body, "name", required=True, max_length=200),
                  description=string_field(body, "description", required=False, max_length=2000),
                  tools=body.get("availableTools", []))
    return ok(agent, status=201)


@blueprint.route("/agents", methods=["GET"])
@authenticated(blueprint)
def list_agents(principal):
    return ok({"items": service.list_agents(principal)})


@blueprint.route("/agents/{agent_id}", methods=["GET"])
@authenticated(blueprint)
def get_agent(principal, agent_id):
    return ok(_call(service.get_agent, principal, agent_id))


@blueprint.route("/agents/{agent_id}", methods=["PATCH"])
@authenticated(blueprint)
def update_agent(principal, agent_id):
    body = json_body(blueprint.current_request)
    refuse_unknown(body, {"name", "description", "availableTools"},
                   "cannot be changed; use name, description or availableTools")
    changes = name_and_description_changes(body)
    if "availableTools" in body:
        changes["available_tools"] = body["availableTools"]
    return ok(_call(service.update_agent, principal, agent_id, changes))


@blueprint.route("/agents/{agent_id}", methods=["DELETE"])
@authenticated(blueprint)
def delete_agent(principal, agent_id):
    _call(service.delete_agent, principal, agent_id)
    return ok({"id": agent_id, "deleted": True})


@blueprint.route("/agents/{agent_id}/available-knowledge-bases", methods=["GET"])
@authenticated(blueprint)
def available_knowledge_bases(principal, agent_id):
    return ok({"items": _call(service.available_knowledge_bases, principal, agent_id)})


@blueprint.route("/agents/{agent_id}/knowledge-base-tools", methods=["POST"])
@authenticated(blueprint)
def link_knowledge_base(principal, agent_id):
    body = json_body(blueprint.current_request)
    quick_add = body.get("quickAdd", False)
    if not isinstance(quick_add, bool):
        raise invalid("quickAdd", "must be true or false")
    tool = _call(service.link_knowledge_base, principal, agent_id,
                 kb_id=string_field(body, "knowledgeBaseId", required=True, max_length=64),
                 quick_add=quick_add,
                 name=string_field(body, "toolName", required=False, max_length=200) or None,
                 description=string_field(body, "toolDescription", required=False, max_length=1000) or None,
                 top_k=body.get("defaultTopK"), min_score=body.get("defaultMinScore"))
    return ok(tool, status=201)


@blueprint.route("/agents/{agent_id}/knowledge-base-tools/{tool_id}", methods=["PATCH"])
@authenticated(blueprint)
def edit_knowledge_base_tool(principal, agent_id, tool_id):
    body = json_body(blueprint.current_request)
    allowed = {"toolName", "toolDescription", "defaultTopK", "defaultMinScore"}
    refuse_unknown(body, allowed, f"cannot be changed; use {', '.join(sorted(allowed))}")
    if not body:
        raise invalid("body", f"send at least one of {', '.join(sorted(allowed))}")
    changes = dict(body)
    if "toolName" in body:
        changes["toolName"] = string_field(body, "toolName", required=True, max_length=200)
    if "toolDescription" in body:
        changes["toolDescription"] = string_field(body, "toolDescription", required=True, max_length=1000)
    return ok(_call(service.edit_knowledge_base_tool, principal, agent_id, tool_id, changes))


@blueprint.route("/agents/{agent_id}/tools/{tool_id}", methods=["DELETE"])
@authenticated(blueprint)
def remove_tool(principal, agent_id, tool_id):
    _call(service.remove_tool, principal, agent_id, tool_id)
    return ok({"id": tool_id, "deleted": True})


@blueprint.route("/agents/{agent_id}/tools", methods=["GET"])
@authenticated(blueprint)
def list_tools(principal, agent_id):
    fmt = query_params(blueprint.current_request).get("format")
    if fmt is None:
        return ok({"items": _call(service.list_tools, principal, agent_id)})
    if fmt not in FORMATS:
        raise invalid("format", f"must be one of {', '.join(FORMATS)}")
    return ok(_call(service.tool_definitions, principal, agent_id, fmt))


@blueprint.route("/agents/{agent_id}/audit-log", methods=["GET"])
@authenticated(blueprint)
def audit_log(principal, agent_id):
    return ok({"items": _call(service.audit_log, principal, agent_id)})


@blueprint.route("/agents/{agent_id}/tools/{tool_id}/invoke", methods=["POST"])
@authenticated(blueprint)
def invoke(principal, agent_id, tool_id):
    """Answers the tool result itself (not the data envelope): it goes to the model as is."""
    result = _call(invoke_tool, principal, agent_id, tool_id, json_body(blueprint.current_request))
    return Response(body=result, status_code=200, headers=JSON_HEADERS)
