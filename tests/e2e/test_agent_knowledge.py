"""Issue 16 through the deployed stack over HTTP: entries de-duplicate, knowledge_search
is an agent tool, and knowledge is extracted from conversations, a long one by the
jobs function after a 202. The chat model is a local server that speaks
the OpenAI protocol, reached by the functions' real `openai` client (LLM_BASE_URL)."""
import json
import secrets
import sys
import time

import pytest

from tests.conftest import ROOT
from tests.integration.openai_server import OpenAIChatServer

sys.path.insert(0, str(ROOT / "infra"))
from deploy import wait_until_updated  # noqa: E402

pytestmark = pytest.mark.serial  # changes the API's and the jobs function's settings, which restarts their workers
LLM_FUNCTIONS = ("kb-service-api", "kb-service-jobs")
ITEMS = {"items": [
    {"title": "Deploy day", "content": "Production deploys happen on Tuesdays after the change review.",
     "type": "procedure", "level": "organisation", "confidence": 0.95},
    {"title": "Weather", "content": "It might rain later today.", "type": "fact", "level": "individual",
     "confidence": 0.2},
]}


def _set_llm(lambda_client, variables: dict) -> None:
    for name in LLM_FUNCTIONS:
        current = lambda_client.get_function_configuration(FunctionName=name)["Environment"]["Variables"]
        current = {k: v for k, v in current.items() if not k.startswith("LLM_")}
        lambda_client.update_function_configuration(FunctionName=name,
                                                    Environment={"Variables": {**current, **variables}})
        wait_until_updated(lambda_client, name)


@pytest.fixture(scope="module")
def chat_model(lambda_client):
    with OpenAIChatServer([json.dumps(ITEMS)]) as server:
        try:
            _set_llm(lambda_client, {"LLM_PROVIDER": "openai", "LLM_MODEL": "gpt-local",
                                     "LLM_BASE_URL": server.base_url, "LLM_API_KEY": "sk-local"})
            yield server
        finally:
            _set_llm(lambda_client, {"LLM_PROVIDER": "", "LLM_MODEL": "", "LLM_BASE_URL": ""})


@pytest.fixture(scope="module")
def learner(api):
    kb = api.call("POST", "/knowledge-bases", {"name": f"Learnt {secrets.token_hex(3)}"}).json()["data"]
    agent = api.call("POST", "/agents", {"name": "Learner"}).json()["data"]
    yield kb, agent
    api.call("DELETE", f"/agents/{agent['id']}")
    api.call("DELETE", f"/knowledge-bases/{kb['id']}")


def test_an_entry_posted_twice_is_one_entry(api, learner):
    kb, _ = learner
    body = {"title": "Otters", "content": "Sea otters hold hands while they sleep."}
    first = api.call("POST", f"/knowledge-bases/{kb['id']}/entries", body)
    again = api.call("POST", f"/knowledge-bases/{kb['id']}/entries", body)
    assert first.status_code == 201 and again.status_code == 200, again.text
    assert again.json()["data"]["id"] == first.json()["data"]["id"]


def test_knowledge_search_as_a_tool(api, learner, stranger):
    kb, agent = learner
    api.call("POST", f"/knowledge-bases/{kb['id']}/entries",
             {"title": "Grid storage costs", "content": "Utility-scale battery storage costs fell by about 80"
                                                        " percent between 2013 and 2023."})
    answer = api.call("POST", f"/agents/{agent['id']}/tools", {"type": "knowledge_search"})
    assert answer.status_code == 201, answer.text
    tool = answer.json()["data"]
    assert api.call("POST", f"/agents/{agent['id']}/tools", {"type": "knowledge_search"}).json()["error"]["code"] \
        == "TOOL_ALREADY_LINKED"
    bad = api.call("POST", f"/agents/{agent['id']}/tools", {"type": "calculator"})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("type:")
    openai = api.call("GET", f"/agents/{agent['id']}/tools?format=openai").json()["data"]
    assert "knowledge_search" in [t["function"]["name"] for t in openai]
    mcp = api.call("GET", f"/agents/{agent['id']}/tools?format=mcp").json()["data"]["tools"]
    assert "knowledge_search" in [t["name"] for t in mcp]
    run = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke",
                   {"query": "how much cheaper did battery storage get?"}).json()
    assert run["success"] is True and run["results"][0]["title"] == "Grid storage costs"
    assert run["results"][0]["url"].startswith("knowledge://entries/") and 0.3 <= run["results"][0]["score"] <= 1
    nothing = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke",
                       {"query": "a banana and strawberry smoothie recipe"}).json()
    assert nothing["resultCount"] == 0
    assert stranger.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke",
                         {"query": "battery storage"}).status_code == 404


def test_extraction_without_a_model_says_so(api, learner):
    kb, agent = learner
    answer = api.call("POST", f"/agents/{agent['id']}/knowledge/extract",
                      {"messages": [{"role": "user", "content": "We deploy on Tuesdays."}], "knowledgeBaseId": kb["id"]})
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "LLM_NOT_CONFIGURED", answer.text


def test_a_session_records_a_conversation_and_without_a_model_stays_open(api, learner, stranger):
    """Issue 31 item 1: a session is recorded message by message; completing it with
    extraction needs a model (503, the session kept open), `extract: false` ends it."""
    kb, agent = learner
    path = f"/agents/{agent['id']}/sessions"
    session = _body(api.call("POST", path, {"knowledgeBaseId": kb["id"],
                                            "messages": [{"role": "user", "content": "When do we deploy?"}]}), 201)
    assert (session["status"], session["messageCount"], session["extraction"]) == ("OPEN", 1, None)
    one = f"{path}/{session['id']}"
    assert _body(api.call("POST", f"{one}/messages", {"role": "assistant", "content": "On Tuesdays."}))["messageCount"] == 2
    both = [{"role": "user", "content": "Thanks"}, {"role": "tool", "content": "{}"}]
    assert _body(api.call("POST", f"{one}/messages", {"messages": both}))["messageCount"] == 4
    bad = api.call("POST", f"{one}/messages", {"messages": [{"role": "robot", "content": "hi"}]})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("messages[0].role"), bad.text
    answer = api.call("POST", f"{one}/complete", {})
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "LLM_NOT_CONFIGURED", answer.text
    assert _body(api.call("GET", one))["status"] == "OPEN"
    ended = _body(api.call("POST", f"{one}/complete", {"extract": False}))
    assert (ended["status"], ended["extraction"], ended["messages"][1]) == (
        "COMPLETED", None, {"role": "assistant", "content": "On Tuesdays."})
    late = api.call("POST", f"{one}/messages", {"role": "user", "content": "one more"})
    assert late.status_code == 409 and late.json()["error"]["code"] == "SESSION_COMPLETED", late.text
    assert stranger.call("GET", one).status_code == 404


def _body(response, status=200):
    assert response.status_code == status, response.text
    return response.json()["data"]


@pytest.mark.parametrize("body, field", [
    ({"knowledgeBaseId": "kb_x"}, "messages"),
    ({"messages": [{"role": "robot", "content": "hi"}], "knowledgeBaseId": "kb_x"}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "knowledgeBaseId"),
    ({"messages": [{"role": "user", "content": "hi"}], "knowledgeBaseId": "kb_x", "minConfidence": 2}, "minConfidence"),
    ({"messages": [{"role": "user", "content": "hi"}], "knowledgeBaseId": "kb_x", "model": "gpt"}, "model"),
])
def test_extraction_input_is_checked(api, learner, body, field):
    _, agent = learner
    answer = api.call("POST", f"/agents/{agent['id']}/knowledge/extract", body)
    assert answer.status_code == 400 and answer.json()["error"]["message"].startswith(field), answer.text


def test_extraction_short_and_long(api, learner, chat_model):
    kb, agent = learner
    messages = [{"role": "user", "content": "When do we deploy?"},
                {"role": "assistant", "content": "Production deploys happen every Tuesday after the change review."}]
    answer = api.call("POST", f"/agents/{agent['id']}/knowledge/extract", {"messages": messages, "knowledgeBaseId": kb["id"]})
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert data["counts"] == {"created": 1, "merged": 0, "updated": 0, "dropped": 1} and data["model"] == "openai:gpt-local"
    entry_id = data["created"][0]["id"]
    # A long conversation: 202, and the job to poll, which merges into what the first made.
    long = messages + [{"role": "user", "content": "Let me paste the whole release log. " + "Release notes. " * 700}]
    answer = api.call("POST", f"/agents/{agent['id']}/knowledge/extract", {"messages": long, "knowledgeBaseId": kb["id"]})
    assert answer.status_code == 202, answer.text
    job = answer.json()["data"]
    assert job["status"] in ("PENDING", "RUNNING", "SUCCEEDED")
    deadline = time.monotonic() + 90
    while job["status"] in ("PENDING", "RUNNING") and time.monotonic() < deadline:
        time.sleep(1)
        job = api.call("GET", job["statusUrl"]).json()["data"]
    assert job["status"] == "SUCCEEDED", job
    assert job["result"]["counts"] == {"created": 0, "merged": 1, "updated": 0, "dropped": 1}
    assert job["result"]["merged"][0]["id"] == entry_id
    assert any("Release notes." in m["content"] for r in chat_model.requests for m in r["messages"])
    assert api.call("GET", f"/agents/{agent['id']}/knowledge/extract/job_nothere").status_code == 404


def test_context_and_knowledge_mode_over_http(api, learner):
    kb, _ = learner
    agent = api.call("POST", "/agents", {"name": "Auto", "knowledgeMode": "auto"}).json()["data"]
    try:
        assert agent["knowledgeMode"] == "auto"
        api.call("POST", f"/knowledge-bases/{kb['id']}/entries",
                 {"title": "Pump reset", "content": "To reset the pump, hold the red button for five seconds."})
        link = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                        {"knowledgeBaseId": kb["id"], "quickAdd": True, "strategy": "semantic", "maxTokens": 500,
                         "rerank": False})
        assert link.status_code == 200 and link.json()["data"]["tool"]["config"]["strategy"] == "semantic", link.text
        assert api.call("GET", f"/agents/{agent['id']}/tools?format=anthropic").json()["data"] == []
        answer = api.call("POST", f"/agents/{agent['id']}/context",
                          {"message": "how do I reset the pump?", "maxTokens": 300,
                           "allocation": {"knowledgeBases": 0.6, "knowledge": 0.4}})
        assert answer.status_code == 200, answer.text
        data = answer.json()["data"]
        assert 0 < data["totalTokens"] <= 300 and "red button" in data["context"]
        assert {p["source"] for p in data["passages"]} == {"knowledge"}  # the entry, once
        bad = api.call("POST", f"/agents/{agent['id']}/context", {"message": "x", "allocation": {"files": 1}})
        assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("allocation.files")
        assert api.call("PATCH", f"/agents/{agent['id']}", {"knowledgeMode": "sometimes"}).status_code == 400
        assert api.call("PATCH", f"/agents/{agent['id']}", {"knowledgeMode": "tool"}).json()["data"]["knowledgeMode"] \
            == "tool"
        assert len(api.call("GET", f"/agents/{agent['id']}/tools?format=anthropic").json()["data"]) == 1
    finally:
        api.call("DELETE", f"/agents/{agent['id']}")


def test_search_with_rerank_over_http(api, learner):
    """Through the deployed API to the emulator's Rerank (which keeps the order it is given)."""
    kb, _ = learner
    body = {"query": "sea otters sleeping", "strategy": "semantic", "topK": 2}
    plain = api.call("POST", f"/knowledge-bases/{kb['id']}/search", body).json()["data"]["results"]
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {**body, "rerank": True})
    assert answer.status_code == 200, answer.text
    results = answer.json()["data"]["results"]
    assert all("rerankScore" not in r for r in plain)
    assert [r["documentId"] for r in results] == [r["documentId"] for r in plain]
    assert [r["rerankScore"] for r in results] == [1.0, 0.9][:len(results)]
    bad = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {**body, "rerank": "please"})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("rerank")


def test_completing_a_session_extracts_what_it_taught_once(api, learner, chat_model):
    """Issue 31 item 1: completion queues the extraction into the session's knowledge base
    (202 and the job); completing again answers the same job (200)."""
    kb, agent = learner
    path = f"/agents/{agent['id']}/sessions"
    session = _body(api.call("POST", path, {"messages": [
        {"role": "user", "content": "Session marker 7431: when is the deploy window?"},
        {"role": "assistant", "content": "Production deploys happen on Tuesdays after the change review."}]}), 201)
    one = f"{path}/{session['id']}"
    answer = api.call("POST", f"{one}/complete", {})
    assert answer.status_code == 400 and answer.json()["error"]["message"].startswith("knowledgeBaseId"), answer.text
    answer = api.call("POST", f"{one}/complete", {"knowledgeBaseId": kb["id"]})
    assert answer.status_code == 202, answer.text
    job = answer.json()["data"]["extraction"]
    deadline = time.monotonic() + 90
    while job["status"] in ("PENDING", "RUNNING") and time.monotonic() < deadline:
        time.sleep(1)
        job = api.call("GET", job["statusUrl"]).json()["data"]
    assert job["status"] == "SUCCEEDED", job
    counts = job["result"]["counts"]
    assert counts["created"] + counts["merged"] == 1 and counts["dropped"] == 1, counts
    assert any("Session marker 7431" in m["content"] for r in chat_model.requests for m in r["messages"])
    again = _body(api.call("POST", f"{one}/complete", {"knowledgeBaseId": kb["id"]}))
    assert (again["status"], again["extraction"]["jobId"]) == ("COMPLETED", job["jobId"])
