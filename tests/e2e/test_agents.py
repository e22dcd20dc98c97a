"""Agents linking knowledge bases as tools, over HTTP through the emulator."""
import json

import pytest

from tests.e2e.conftest import invoke, wait_for_status

BUCKET = "kb-documents-local"
MANUAL = """# Pump manual

## Troubleshooting

If the pump hums but does not turn, the impeller is jammed: switch it off and clear the intake.
A red blinking light means the thermal fuse tripped; let the pump cool for thirty minutes.
"""


@pytest.fixture(scope="module")
def product_docs(api, s3):
    kb = api.call("POST", "/knowledge-bases", {"name": "Product Documentation"}).json()["data"]
    s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/pump-manual.md", Body=MANUAL.encode())
    doc, _ = wait_for_status(api, kb["id"], "pump-manual.md")
    assert doc["status"] == "PROCESSED"
    return kb


@pytest.fixture
def agent(api):
    answer = api.call("POST", "/agents", {"name": "Support bot", "description": "Answers customers"})
    assert answer.status_code == 201, answer.text
    return answer.json()["data"]


def _tools(api, agent, fmt=None):
    answer = api.call("GET", f"/agents/{agent['id']}/tools" + (f"?format={fmt}" if fmt else ""))
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def test_agent_crud(api):
    created = api.call("POST", "/agents", {"name": "A", "description": "d", "availableTools": [
        {"name": "get_weather", "type": "function", "description": "Weather",
         "schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]})
    assert created.status_code == 201
    agent = created.json()["data"]
    assert agent["id"].startswith("agent_") and agent["availableTools"][0]["id"]
    assert agent["id"] in [a["id"] for a in api.call("GET", "/agents").json()["data"]["items"]]
    patched = api.call("PATCH", f"/agents/{agent['id']}", {"name": "B"}).json()["data"]
    assert patched["name"] == "B" and patched["availableTools"] == agent["availableTools"]
    assert api.call("PATCH", f"/agents/{agent['id']}", {"owner": "x"}).status_code == 400
    bad = api.call("POST", "/agents", {"name": "x", "availableTools": [{"name": "bad name", "type": "function"}]})
    assert bad.status_code == 400 and "availableTools[0].name" in bad.json()["error"]["message"]
    assert api.call("POST", "/agents", {"description": "no name"}).status_code == 400
    assert api.call("DELETE", f"/agents/{agent['id']}").status_code == 200
    assert api.call("GET", f"/agents/{agent['id']}").status_code == 404
    assert api.call("DELETE", f"/agents/{agent['id']}").status_code == 404


def test_quick_add_duplicate_link_edit_and_remove(api, agent, product_docs):
    available = api.call("GET", f"/agents/{agent['id']}/available-knowledge-bases").json()["data"]
    entry = next(k for k in available if k["id"] == product_docs["id"])
    assert entry["linked"] is False and entry["stats"]["documentCount"] >= 1

    linked = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                      {"quickAdd": True, "knowledgeBaseId": product_docs["id"]})
    assert linked.status_code == 200, linked.text  # seed 000: 200 and data.tool
    tool = linked.json()["data"]["tool"]
    assert tool["name"] == "search_product_documentation"
    assert tool["description"] == ("Search the Product Documentation knowledge base. Answers the passages that best"
                                   " match the query, each with its document's path and its page or section.")
    assert tool["config"] == {"knowledgeBaseId": product_docs["id"], "knowledgeBaseName": "Product Documentation",
                              "defaultTopK": 5, "defaultMinScore": 0.3,
                              "strategy": "hybrid", "maxTokens": 4000, "rerank": None, "mode": "read-only"}
    available = api.call("GET", f"/agents/{agent['id']}/available-knowledge-bases").json()["data"]
    assert next(k for k in available if k["id"] == product_docs["id"])["linked"] is True

    again = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                     {"knowledgeBaseId": product_docs["id"], "toolName": "other", "toolDescription": "x"})
    assert again.status_code == 400 and again.json()["error"]["code"] == "KB_ALREADY_LINKED"

    edited = api.call("PATCH", f"/agents/{agent['id']}/knowledge-base-tools/{tool['id']}",
                      {"toolName": "search_product_docs", "defaultTopK": 3, "defaultMinScore": 0.2})
    assert edited.status_code == 200, edited.text
    assert edited.json()["data"]["tool"]["name"] == "search_product_docs"
    assert edited.json()["data"]["tool"]["schema"]["properties"]["topK"]["default"] == 3
    for body, status in (({"defaultTopK": 50}, 400), ({"toolName": "bad name"}, 400), ({"color": 1}, 400)):
        assert api.call("PATCH", f"/agents/{agent['id']}/knowledge-base-tools/{tool['id']}", body).status_code == status
    assert api.call("PATCH", f"/agents/{agent['id']}/knowledge-base-tools/tool_kb_nope",
                    {"defaultTopK": 2}).status_code == 404

    audit = api.call("GET", f"/agents/{agent['id']}/audit-log").json()["data"]["items"]
    assert [a["action"] for a in audit] == ["create_agent", "link_knowledge_base", "edit_knowledge_base_tool"]
    assert audit[2]["before"]["name"] == "search_product_documentation"
    assert audit[2]["after"]["name"] == "search_product_docs" and audit[2]["userId"] and audit[2]["at"]

    assert api.call("DELETE", f"/agents/{agent['id']}/tools/{tool['id']}").status_code == 200
    assert _tools(api, agent)["items"] == []
    assert api.call("DELETE", f"/agents/{agent['id']}/tools/{tool['id']}").status_code == 404
    assert api.call("GET", f"/agents/{agent['id']}/audit-log").json()["data"]["items"][-1]["action"] == "remove_tool"


def test_linking_with_explicit_names_and_errors(api, agent, product_docs, stranger):
    body = {"knowledgeBaseId": product_docs["id"], "toolName": "search_product_docs",
            "toolDescription": "Search product documentation knowledge base", "defaultTopK": 7}
    tool = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools", body).json()["data"]["tool"]
    assert tool["config"]["defaultTopK"] == 7 and tool["config"]["defaultMinScore"] == 0.3
    missing = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools", {"knowledgeBaseId": "kb_nope", "quickAdd": True})
    assert missing.status_code == 404
    assert api.call("POST", "/agents/agent_nope/knowledge-base-tools",
                    {"knowledgeBaseId": product_docs["id"], "quickAdd": True}).status_code == 404
    other_kb = stranger.call("POST", "/knowledge-bases", {"name": "Not yours"}).json()["data"]
    assert api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                    {"knowledgeBaseId": other_kb["id"], "quickAdd": True}).status_code == 404
    assert stranger.call("GET", f"/agents/{agent['id']}").status_code == 404
    assert stranger.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke", {"query": "x"}).status_code == 404
    second = api.call("POST", "/knowledge-bases", {"name": "Second"}).json()["data"]
    clash = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                     {"knowledgeBaseId": second["id"], "toolName": "search_product_docs", "toolDescription": "d"})
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "TOOL_NAME_TAKEN"
    no_name = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools", {"knowledgeBaseId": second["id"]})
    assert no_name.status_code == 400 and no_name.json()["error"]["message"].startswith("toolName")


def test_non_knowledge_base_tools_can_be_removed_but_not_edited_as_one(api):
    agent = api.call("POST", "/agents", {"name": "x", "availableTools": [
        {"id": "tool_fn_1", "name": "get_weather", "type": "function", "description": "Weather"}]}).json()["data"]
    answer = api.call("PATCH", f"/agents/{agent['id']}/knowledge-base-tools/tool_fn_1", {"defaultTopK": 2})
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "NOT_A_KNOWLEDGE_BASE_TOOL"
    assert _tools(api, agent)["items"][0]["status"] == "ok"
    assert api.call("DELETE", f"/agents/{agent['id']}/tools/tool_fn_1").status_code == 200


def test_invoke_over_http_and_lambda_and_definitions(api, agent, product_docs, lambda_client):
    tool = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                    {"quickAdd": True, "knowledgeBaseId": product_docs["id"], "defaultMinScore": 0.1}).json()["data"]["tool"]
    result = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke", {"query": "pump light blinking red"})
    assert result.status_code == 200
    body = result.json()
    assert body["success"] is True and body["knowledgeBaseName"] == "Product Documentation"
    assert "thermal fuse" in body["results"][0]["content"] and body["results"][0]["source"] == "pump-manual.md"
    assert set(body["metadata"]) == {"totalTokensUsed", "cached"} and body["summary"]
    assert api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke", {"topK": 3}).status_code == 400
    assert api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke",
                    {"query": "x", "topK": 99}).json()["error"]["code"] == "INVALID_ARGUMENTS"

    direct = invoke(lambda_client, {"agentId": agent["id"], "toolId": tool["id"], "apiKey": api.key,
                                    "arguments": {"query": "pump light blinking red"}})
    assert direct["success"] is True and direct["results"][0]["content"] == body["results"][0]["content"]

    openai_tools = _tools(api, agent, "openai")
    assert openai_tools[0]["type"] == "function" and openai_tools[0]["function"]["name"] == tool["name"]
    assert _tools(api, agent, "anthropic")[0]["input_schema"] == tool["schema"]
    assert _tools(api, agent, "mcp")["tools"][0]["inputSchema"] == tool["schema"]
    assert api.call("GET", f"/agents/{agent['id']}/tools?format=gemini").status_code == 400


def test_a_deleted_knowledge_base_warns_and_fails_gracefully(api, agent, lambda_client):
    kb = api.call("POST", "/knowledge-bases", {"name": "Short lived"}).json()["data"]
    tool = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                    {"quickAdd": True, "knowledgeBaseId": kb["id"]}).json()["data"]["tool"]
    assert api.call("DELETE", f"/knowledge-bases/{kb['id']}").status_code == 200
    shown = next(t for t in _tools(api, agent)["items"] if t["id"] == tool["id"])
    assert shown["status"] == "knowledge_base_missing" and shown["knowledgeBaseName"] == "Short lived"
    result = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke", {"query": "anything"})
    assert result.status_code == 200
    assert result.json() == {"success": False, "error": True,
                             "message": "Knowledge base not found. It may have been deleted."}
    direct = invoke(lambda_client, {"agentId": agent["id"], "toolId": tool["id"], "apiKey": api.key,
                                    "arguments": {"query": "anything"}})
    assert direct == result.json()


def test_an_agent_conversation_through_the_openai_client(api, agent, product_docs):
    """The real openai client talks to a local chat server, which calls the linked
    tool; the test runs that call through the invoke endpoint and sends the result
    back, and the passage from the ingested manual reaches the model."""
    import openai

    from tests.e2e.chat_server import ChatServer

    tool = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                    {"quickAdd": True, "knowledgeBaseId": product_docs["id"], "defaultMinScore": 0.1}).json()["data"]["tool"]
    definitions = _tools(api, agent, "openai")
    by_name = {t["name"]: t for t in _tools(api, agent)["items"]}
    with ChatServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
        messages = [{"role": "system", "content": "Answer from the knowledge base."},
                    {"role": "user", "content": "Why does my pump blink red?"}]
        first = client.chat.completions.create(model="local-model", messages=messages, tools=definitions)
        call = first.choices[0].message.tool_calls[0]
        assert call.function.name == tool["name"]
        called = by_name[call.function.name]
        result = api.call("POST", f"/agents/{agent['id']}/tools/{called['id']}/invoke",
                          json.loads(call.function.arguments)).json()
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
        final = client.chat.completions.create(model="local-model", messages=messages, tools=definitions)
    assert server.requests[0]["tools"] == definitions
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "thermal fuse" in tool_message["content"]
    assert "thermal fuse" in final.choices[0].message.content


def test_patching_the_tools_array_obeys_the_tool_endpoints_rules_and_is_audited(api, agent, product_docs, stranger):
    tool = {"name": "search_docs", "type": "knowledge_base", "config": {"knowledgeBaseId": product_docs["id"]}}
    twice = api.call("PATCH", f"/agents/{agent['id']}", {"availableTools": [tool, {**tool, "name": "again"}]})
    assert twice.status_code == 400 and twice.json()["error"]["code"] == "KB_ALREADY_LINKED"
    assert api.call("POST", "/agents", {"name": "z", "availableTools": [tool, {**tool, "name": "again"}]}).status_code == 400
    foreign = stranger.call("POST", "/knowledge-bases", {"name": "Eve's"}).json()["data"]
    hidden = {**tool, "config": {"knowledgeBaseId": foreign["id"]}}
    assert api.call("PATCH", f"/agents/{agent['id']}", {"availableTools": [hidden]}).status_code == 404
    assert api.call("POST", "/agents", {"name": "z", "availableTools": [hidden]}).status_code == 404
    refused = api.call("GET", f"/agents/{agent['id']}/audit-log").json()["data"]["items"]
    assert [a["action"] for a in refused] == ["create_agent"]  # refused: nothing more
    patched = api.call("PATCH", f"/agents/{agent['id']}", {"name": "Support", "availableTools": [tool]})
    assert patched.status_code == 200, patched.text
    audit = api.call("GET", f"/agents/{agent['id']}/audit-log").json()["data"]["items"]
    assert [a["action"] for a in audit] == ["create_agent", "update_agent"]
    assert audit[1]["before"] == {"name": "Support bot", "availableTools": []}
    assert audit[1]["after"]["name"] == "Support" and audit[1]["after"]["availableTools"][0]["name"] == "search_docs"
    api.call("PATCH", f"/agents/{agent['id']}", {"name": "Support"})  # no change, no entry
    assert len(api.call("GET", f"/agents/{agent['id']}/audit-log").json()["data"]["items"]) == 2
