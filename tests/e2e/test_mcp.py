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
from tests.e2e.conftest import wait_for_status

KB_GONE = "Knowledge base not found. It may have been deleted."
KB_CLI = ROOT / ".venv" / "bin" / "kb"
BUCKET = "kb-documents-local"
CARE = """# Pump care

## Cleaning the filter

Once a month, switch the pump off, unscrew the filter housing under the inlet and rinse the mesh
filter under warm water until no sand is left in it. Check the rubber seal for cracks, put the
filter back with the arrow pointing towards the pump and screw the housing on by hand.
"""


@pytest.fixture(scope="module")
def agent(api, s3, shared_docs):
    """An agent with two knowledge-base tools; the second one's knowledge base is deleted.
    The first holds an entry, a Markdown guide and a PDF, in folders."""
    kept = api.call("POST", "/knowledge-bases", {"name": "Pump manual",
                                                 "description": "Service procedures for the garden pump"}).json()["data"]
    api.call("POST", f"/knowledge-bases/{kept['id']}/entries",
             {"title": "Resetting the pump", "content": "Hold the red button for five seconds to reset the pump."})
    s3.put_object(Bucket=BUCKET, Key=f"kb/{kept['id']}/guides/care.md", Body=CARE.encode())
    s3.put_object(Bucket=BUCKET, Key=f"kb/{kept['id']}/essays/crazyones.pdf",
                  Body=(shared_docs / "crazyones.pdf").read_bytes())
    for name in ("care.md", "crazyones.pdf"):
        assert wait_for_status(api, kept["id"], name)[0]["status"] == "PROCESSED"
    gone = api.call("POST", "/knowledge-bases", {"name": "Old notes"}).json()["data"]
    agent = api.call("POST", "/agents", {"name": "Pump helper"}).json()["data"]
    for kb in (kept, gone):
        assert api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                        {"quickAdd": True, "knowledgeBaseId": kb["id"]}).status_code == 200
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
    assert [(t.name, t.description, t.inputSchema, t.outputSchema) for t in listed] == [
        (t["name"], t["description"], t["inputSchema"], t["outputSchema"]) for t in expected]
    assert [t.name for t in listed] == ["search_pump_manual", "search_old_notes"]
    assert listed[0].description.startswith("Search the Pump manual knowledge base: Service procedures for the"
                                            " garden pump.")
    assert all(p["description"] for t in listed for p in t.inputSchema["properties"].values())
    assert found.isError is False
    answer = found.structuredContent  # the SDK's client checked it against the outputSchema
    assert answer["success"] is True and "red button" in answer["results"][0]["content"]
    assert (answer["results"][0]["path"], answer["results"][0]["page"], answer["results"][0]["section"]) == (
        None, None, None)  # an entry
    assert found.content[0].text.split("\n\n", 1)[1] == f"[1] Resetting the pump\n{answer['results'][0]['content']}"
    assert gone.isError is True and gone.content[0].text == KB_GONE
    assert gone.structuredContent == {"success": False, "error": True, "message": KB_GONE}
    assert unknown.isError is True and "no tool named search_nothing" in unknown.content[0].text


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_result_names_each_passages_path_page_and_section(api, agent, transport):
    """Over MCP a model reads a text block it can cite from, and gets the same as structured content."""
    async def session_run():
        async with TRANSPORTS[transport](api, agent["id"]) as session:
            return [await session.call_tool("search_pump_manual", {"query": query, "topK": 1})
                    for query in ("how do I clean the filter?", "here's to the crazy ones, the misfits, the rebels")]

    guide, essay = anyio.run(session_run)
    for result in (guide, essay):
        assert result.isError is False and len(result.content) == 1
    top = guide.structuredContent["results"][0]
    assert (top["source"], top["path"], top["page"], top["section"]) == (
        "care.md", "guides/care.md", None, "Pump care > Cleaning the filter")
    text = guide.content[0].text
    assert text.startswith("Pump manual: 1 passage from 1 source (care.md)")
    assert text.split("\n\n", 1)[1] == f"[1] guides/care.md — Pump care > Cleaning the filter\n{top['content']}"
    top = essay.structuredContent["results"][0]
    assert (top["path"], top["page"]) == ("essays/crazyones.pdf", 1)
    assert essay.content[0].text.split("\n\n", 1)[1].startswith("[1] essays/crazyones.pdf p. 1")
    assert not essay.content[0].text.lstrip().startswith("{")  # prose, not an escaped JSON string


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


@pytest.fixture
def listener():
    """A local HTTP server that records every request it gets: what a schema's $ref names."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    seen = []

    class Record(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("User-Agent")))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"type": "string"}')

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", seen
    server.shutdown()


def test_tool_schemas_are_data_nothing_they_name_is_fetched_or_run(api, db, listener):
    """Issue 29: a $ref to an internal address (blind SSRF from inside the VPC) and a
    backtracking pattern (a worker held 30 s) are refused when written; schemas stored before
    that are never evaluated: an MCP call of such a tool answers at once and nothing leaves."""
    url, seen = listener
    for schema, keyword in (({"type": "object", "properties": {"x": {"$ref": f"{url}/internal/secret"}}}, "$ref"),
                            ({"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}},
                             "pattern")):
        answer = api.call("POST", "/agents", {"name": "probe", "availableTools": [
            {"name": "probe", "type": "function", "schema": schema}]})
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["message"].startswith(f"availableTools[0].schema.properties.x.{keyword}")
    agent = api.call("POST", "/agents", {"name": "Stored before", "availableTools": [
        {"name": "lookup", "type": "function", "schema": {"type": "object"}}]}).json()["data"]
    hostile = {"type": "object", "properties": {
        "x": {"type": "string", "pattern": "^(a+)+$"}, "y": {"$ref": f"{url}/internal/secret"}}}
    db.execute("UPDATE agents SET available_tools = jsonb_set(available_tools, '{0,schema}', %s::jsonb)"
               " WHERE id = %s", (json.dumps(hostile), agent["id"]))

    async def call():
        async with http_session(api, agent["id"]) as session:
            return await session.call_tool("lookup", {"x": "a" * 40 + "!", "y": "z"})

    result = anyio.run(call)
    assert result.isError is True and "is not run by this service" in result.content[0].text
    assert seen == []
