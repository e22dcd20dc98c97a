"""The SDK side of /agents/{agentId}/mcp (api/mcp.py): an agent's MCP server and one
HTTP request through the SDK's stateless streamable-HTTP handler. Imported only when an
MCP request comes: the SDK ships in a layer of its own, on the API function alone."""
import asyncio

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from chalicelib.agents import invoke_tool, service
from chalicelib.api.mcp_result import call_result
from chalicelib.api.views import tool_result_view
from chalicelib.auth import Principal
from chalicelib.errors import ServiceError

SERVER_NAME = "kb-service"


def agent_server(principal: Principal, agent_id: str) -> Server:
    """The MCP server of one agent, as the caller sees it."""
    server = Server(SERVER_NAME, instructions="Search the knowledge bases this agent links.")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(**t) for t in service.tool_definitions(principal, agent_id, "mcp")["tools"]]

    # No validation of the arguments against the tool's schema by the SDK: a stored schema
    # is a caller's data, and evaluating it fetched what its $ref named and ran its patterns
    # (agents/schemas.py). invoke_tool checks the arguments of the tools the service runs.
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict):
        tool = next((t for t in service.list_tools(principal, agent_id) if t["name"] == name), None)
        if tool is None:
            return _error_result(f"the agent has no tool named {name}")
        try:
            result = tool_result_view(invoke_tool(principal, agent_id, tool["id"], arguments))
        except ServiceError as err:
            return _error_result(f"{err.code}: {err.message}")
        return as_sdk_result(call_result(result))

    return server


def as_sdk_result(answer: dict):
    """mcp_result.call_result's answer as a call_tool handler returns it. A result that is
    not an error goes as (content, structuredContent), which the SDK checks against the
    tool's outputSchema before sending; an error result (a deleted knowledge base's soft
    result) goes as it is."""
    result = types.CallToolResult.model_validate(answer)
    return result if result.isError else (result.content, result.structuredContent)


def _error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], isError=True)


def serve(principal: Principal, agent_id: str, request) -> tuple[int, dict, str]:
    status, headers, body = asyncio.run(_serve(agent_server(principal, agent_id), request))
    # API Gateway sets the length of what it sends on
    return status, {k: v for k, v in headers.items() if k.lower() != "content-length"}, body.decode("utf-8")


async def _serve(server: Server, request) -> tuple[int, dict, bytes]:
    """One HTTP request through the SDK's stateless streamable-HTTP handler (ASGI)."""
    manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
        "scheme": "https", "path": request.context.get("path", "/mcp"), "raw_path": b"", "root_path": "",
        "query_string": b"", "server": ("kb-service", 443), "client": ("127.0.0.1", 0),
        # HTTP header bytes are Latin-1; what API Gateway decoded otherwise becomes "?" (a
        # non-Latin-1 character here raised UnicodeEncodeError: a 500).
        "headers": [(k.lower().encode("latin-1", "replace"), v.encode("latin-1", "replace"))
                    for k, v in request.headers.items()],
    }
    body, sent = request.raw_body or b"", False
    answer = {"status": 500, "headers": {}, "body": b""}

    async def receive():
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)  # no disconnect to report: the request ends with the answer
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode("latin-1"): v.decode("latin-1") for k, v in message.get("headers", [])}
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return answer["status"], answer["headers"], answer["body"]
