"""The MCP server through the official SDK's own client, over both transports: streamable
HTTP to the deployed /agents/{agentId}/mcp, and stdio to `kb mcp --agent` (issue 15)."""
import json
import os
import subprocess
from contextlib import asynccontextmanager

import anyio
import pytest
import requests
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from tests.conftest import ROOT

KB_GONE = "Knowledge base not found. It may have been deleted."
KB_CLI = ROOT / ".venv" / "bin" / "kb"


@pytest.fixture(scope="module")
def agent(api):
    """An agent with two knowledge-base tools; the second one's knowledge base is deleted."""
    kept = api.call("POST", "/knowledge-bases", {"name": "Pump manual"}).json()["data"]
    api.call("POST", f"/knowledge-bases/{kept['id']}/entries",
             {"title": "Resetting the pump", "content": "Hold the red button for five seconds to reset the pump."})
    gone = api.call("POST", "/knowledge-bases", {"name": "Old notes"}).json()["data"]
    agent = api.call("POST", "/agents", {"name": "Pump helper"}).json()["data"]
    for kb in (kept, gone):
        assert api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                        {"quickAdd": True, "knowledgeBaseId": kb["id"]}).status_code == 201
    assert api.call("DELETE", f"/knowledge-bases/{gone['id']}").status_code == 200
    return agent


@asynccontextmanager
async def http_session(api, agent_id: str):
    url = f"{api.base_url}/agents/{agent_id}/mcp"
    async with streamablehttp_client(url, headers={"Authorization": f"Bearer {api.key}"}) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def stdio_session(api, agent_id: str):
    params = StdioServerParameters(command=str(KB_CLI), args=["mcp", "--agent", agent_id],
                                   env={"KB_API_URL": api.base_url, "KB_API_KEY": api.key,
                                        "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


TRANSPORTS = {"streamable-http": http_session, "stdio": stdio_session}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_lists_and_calls_the_agents_tools(api, agent, transport):
    expected = api.call("GET", f"/agents/{agent['id']}/tools?format=mcp").json()["data"]["tools"]

    async def session_run():
        async with TRANSPORTS[transport](api, agent["id"]) as session:
            listed = (await session.list_tools()).tools
            found = await session.call_tool("search_pump_manual", {"query": "how do I reset the pump?", "topK": 1})
            gone = await session.call_tool("search_old_notes", {"query": "anything"})
            unknown = await session.call_tool("search_nothing", {"query": "x"})
            return listed, found, gone, unknown

    listed, found, gone, unknown = anyio.run(session_run)
    assert [(t.name, t.description, t.inputSchema) for t in listed] == [
        (t["name"], t["description"], t["inputSchema"]) for t in expected]
    assert [t.name for t in listed] == ["search_pump_manual", "search_old_notes"]
    assert found.isError is False
    answer = json.loads(found.content[0].text)
    assert answer["success"] is True and "red button" in answer["results"][0]["content"]
    assert gone.isError is True and json.loads(gone.content[0].text)["message"] == KB_GONE
    assert unknown.isError is True and "no tool named search_nothing" in unknown.content[0].text


def test_the_http_endpoint_takes_the_api_keys_and_hides_other_tenants_agents(api, agent, stranger):
    url = f"{api.base_url}/agents/{agent['id']}/mcp"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    no_key = requests.post(url, json=body, headers=accept)
    assert no_key.status_code == 401 and no_key.json()["error"]["code"] == "UNAUTHORIZED"
    foreign = requests.post(url, json=body, headers={**accept, "Authorization": f"Bearer {stranger.key}"})
    assert foreign.status_code == 404 and foreign.json()["error"]["code"] == "NOT_FOUND"


def test_kb_mcp_refuses_an_unknown_agent_before_serving(api):
    run = subprocess.run([str(KB_CLI), "mcp", "--agent", "agent_nope"], input="", capture_output=True, text=True,
                         env={"KB_API_URL": api.base_url, "KB_API_KEY": api.key, "PATH": "/usr/bin:/bin"},
                         timeout=60)
    assert run.returncode == 1 and "NOT_FOUND" in run.stderr and run.stdout == ""
