"""An agent's tools as a Model Context Protocol server, over streamable HTTP at
/agents/{agentId}/mcp, on the official SDK (mcp). Stateless and answering JSON, so one
Lambda invocation serves one request: the SDK's ASGI handler runs inside the Chalice view
(api/mcp_server.py). Its tools are the agent's tools exactly as
`GET /agents/{agentId}/tools?format=mcp` lists them; calling one runs the same invocation
as the HTTP invoke endpoint."""
from chalice import Blueprint, Response

from chalicelib.agents import service
from chalicelib.api.http import authenticated

blueprint = Blueprint(__name__)


@blueprint.route("/agents/{agent_id}/mcp", methods=["POST", "GET", "DELETE"],
                 content_types=["application/json", "text/event-stream"])
@authenticated(blueprint)
def mcp_endpoint(principal, agent_id):
    service.get_agent(principal, agent_id)  # 404 in the envelope before any protocol
    from chalicelib.api import mcp_server  # the SDK: only the API function has its layer

    status, headers, body = mcp_server.serve(principal, agent_id, blueprint.current_request)
    return Response(body=body, status_code=status, headers=headers)
