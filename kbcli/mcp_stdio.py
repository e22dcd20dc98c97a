"""`kb mcp --agent ID`: an agent's tools as an MCP server on stdin/stdout, for desktop
clients, on the official SDK. It talks to the API like every other command: tools/list is
`GET /agents/{id}/tools?format=mcp`, a call is `POST .../tools/{toolId}/invoke?format=mcp`
(the CallToolResult itself: structured content and the readable text), so both are exactly
what the deployed MCP endpoint (/agents/{id}/mcp) answers."""
import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from kbcli.client import CliError, Client


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], isError=True)


def agent_server(client: Client, agent_id: str) -> Server:
    server = Server("kb-service", instructions="Search the knowledge bases this agent links.")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        listed = client.get(f"/agents/{agent_id}/tools", params={"format": "mcp"})["tools"]
        return [types.Tool(**t) for t in listed]

    @server.call_tool()
    async def call_tool(name: str, arguments: dict):
        try:
            tools = client.get(f"/agents/{agent_id}/tools")["items"]
            tool = next((t for t in tools if t["name"] == name), None)
            if tool is None:
                return _error(f"the agent has no tool named {name}")
            result = types.CallToolResult.model_validate(client.request(
                "POST", f"/agents/{agent_id}/tools/{tool['id']}/invoke", json=arguments, params={"format": "mcp"},
                raw=True))
        except CliError as err:
            return _error(f"{err.code}: {err.message}")
        # As the deployed server does: a result that is not an error is checked against the
        # tool's outputSchema by the SDK; a deleted knowledge base's soft result goes as it is.
        return result if result.isError else (result.content, result.structuredContent)

    return server


def serve(client: Client, agent_id: str) -> None:
    """Blocks until the client closes stdin. The agent is checked first, so a wrong id or key
    is an error on stderr and an exit status, not a server without tools."""
    client.get(f"/agents/{agent_id}")
    server = agent_server(client, agent_id)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
