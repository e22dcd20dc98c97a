"""An agent's tools as a Model Context Protocol server, over streamable HTTP at
/agents/{agentId}/mcp, on the official SDK (mcp). Stateless and answering JSON, so one
Lambda invocation serves one request: the SDK's ASGI handler runs inside the Chalice view
(api/mcp_server.py). Its tools are the agent's tools exactly as
`GET /agents/{agentId}/tools?format=mcp` lists them; calling one runs the same invocation
as the HTTP invoke endpoint."""
from chalice import Blueprint, Response

from chalicelib.agents import service
from chalicelib.api.http import authenticated, json_body
from chalicelib.errors import MethodNotAllowed

blueprint = Blueprint(__name__)


@blueprint.route("/agents/{agent_id}/mcp", methods=["POST", "GET", "DELETE"],
                 content_types=["application/json", "text/event-stream"])
@authenticated(blueprint)
def mcp_endpoint(principal, agent_id):
    service.get_agent(principal, agent_id)  # 404 in the envelope before any protocol
    request = blueprint.current_request
    if request.method == "GET":
        # A GET opens the SDK's server-sent event stream, which a stateless server never
        # writes to: the request hung until API Gateway's 29 s.
        raise MethodNotAllowed("this MCP server is stateless and sends no event stream: POST JSON-RPC requests")
    if request.method == "POST":
        json_body(request)  # bounded, finite and storable like every other body, before the SDK reads it
    from chalicelib.api import mcp_server  # the SDK: only the API function has its layer

    status, headers, body = mcp_server.serve(principal, agent_id, request)
    return Response(body=body, status_code=status, headers=headers)
