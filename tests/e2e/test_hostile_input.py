"""Hostile and odd input through the deployed API, the kb_search Lambda and the bucket:
a 4xx naming the problem (in the error envelope), never a 5xx, a crash or a lost file."""
import json

import pytest
import requests

from tests.conftest import read_local_env
from tests.e2e.conftest import invoke, wait_for_status

BUCKET = "kb-documents-local"


@pytest.fixture(scope="module")
def kb(api):
    return api.call("POST", "/knowledge-bases", {"name": "Hostile", "description": "d"}).json()["data"]


def _raw(api, method: str, path: str, data: bytes):
    return requests.request(method, api.base_url + path, data=data, timeout=120,
                            headers={"Authorization": f"Bearer {api.key}", "Content-Type": "application/json"})


def _refused(answer, status: int, code: str) -> dict:
    assert answer.status_code == status, answer.text[:500]
    body = answer.json()
    assert body["success"] is False and body["error"]["code"] == code, body
    return body["error"]


def test_deep_nesting_is_refused_at_any_depth(api, kb):
    for depth in (40, 5000):
        body = b'{"query": "x", "filters": ' + b'{"metadata": ' * depth + b"1" + b"}" * depth + b"}"
        error = _refused(_raw(api, "POST", f"/knowledge-bases/{kb['id']}/search", body), 400, "INVALID_JSON"
                         if depth > 900 else "INVALID_INPUT")
        assert "nests deeper than 32 levels" in error["message"]


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_are_not_json(api, kb, constant):
    error = _refused(_raw(api, "POST", f"/knowledge-bases/{kb['id']}/search",
                          b'{"query": "x", "topK": ' + constant + b"}"), 400, "INVALID_JSON")
    assert constant.decode().lstrip("-") in error["message"]


def test_an_oversized_body_is_refused_before_it_is_parsed(api, kb):
    body = json.dumps({"query": "x", "padding": "y" * (7 * 1024 * 1024)}).encode()
    error = _refused(_raw(api, "POST", f"/knowledge-bases/{kb['id']}/search", body), 413, "BODY_TOO_LARGE")
    assert "the limit is 7340032" in error["message"]


def test_agent_tools_are_checked_and_completed_at_creation_so_invoking_them_works(api, kb):
    bad = api.call("POST", "/agents", {"name": "x", "availableTools": [
        {"name": "search_x", "type": "knowledge_base", "config": {"knowledgeBaseId": kb["id"], "defaultTopK": 0}}]})
    assert "availableTools[0].config.defaultTopK" in _refused(bad, 400, "INVALID_INPUT")["message"]
    bad = api.call("POST", "/agents", {"name": "x", "availableTools": [
        {"name": "fn", "type": "function", "schema": "not a schema"}]})
    assert "availableTools[0].schema" in _refused(bad, 400, "INVALID_INPUT")["message"]
    # A knowledge-base tool given without its schema gets the service's, with its defaults.
    agent = api.call("POST", "/agents", {"name": "x", "availableTools": [
        {"name": "search_x", "type": "knowledge_base", "config": {"knowledgeBaseId": kb["id"]}}]}).json()["data"]
    tool = agent["availableTools"][0]
    assert tool["schema"]["properties"]["topK"]["default"] == tool["config"]["defaultTopK"] == 5
    answer = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke", {"query": "anything"})
    assert answer.status_code == 200 and answer.json()["success"] is True
    for top_k in (2.5, "²", 0):
        answer = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke", {"query": "x", "topK": top_k})
        assert _refused(answer, 400, "INVALID_ARGUMENTS")["message"].startswith("topK:")
    # Other tools keep their free form: no description or schema is fine.
    other = api.call("POST", "/agents", {"name": "y", "availableTools": [
        {"name": "web", "type": "http", "description": None, "schema": None},
        {"name": "calc", "type": "function", "schema": {"properties": {}}}]})
    assert other.status_code == 201, other.text
    assert [set(t) for t in other.json()["data"]["availableTools"]] == [{"id", "name", "type"},
                                                                        {"id", "name", "type", "schema"}]


def test_digits_that_are_not_decimal_are_a_400(api):
    assert _refused(api.call("GET", "/knowledge-bases", params={"limit": "²"}), 400, "INVALID_INPUT")


@pytest.mark.parametrize("payload,status,field", [
    ({"apiKey": 12345, "knowledgeBaseId": "kb_x", "query": "q"}, 401, "apiKey"),
    ({"apiKey": ["kbk_x"], "knowledgeBaseId": "kb_x", "query": "q"}, 401, "apiKey"),
    ({"knowledgeBaseId": "kb_x", "query": "q", "topK": float("nan")}, 400, "topK"),
    ({"knowledgeBaseId": "kb_x", "query": "q", "minScore": float("inf")}, 400, "minScore"),
    ({"knowledgeBaseId": "kb_x", "query": "q", "filters": json.loads('{"a":' * 60 + "1" + "}" * 60)}, 400, "filters"),
    ({"knowledgeBaseId": 7, "query": "q"}, 400, "knowledgeBaseId"),
    ({"agentId": {"x": 1}, "toolId": "t", "arguments": {}}, 400, "agentId"),
])
def test_kb_search_answers_every_bad_payload_in_the_envelope(lambda_client, api, payload, status, field):
    payload = {"apiKey": api.key, **payload}
    answer = invoke(lambda_client, json.loads(json.dumps(payload)))  # NaN travels as Python's json writes it
    assert answer["success"] is False and answer["error"]["status"] == status, answer
    assert field in answer["error"]["message"]


def test_a_key_with_a_newline_is_ingested_like_any_file(api, kb, s3):
    key = f"kb/{kb['id']}/notes\nline two.txt"
    s3.put_object(Bucket=read_local_env().get("KB_BUCKET", BUCKET), Key=key,
                  Body=b"The odd-named file talks about lighthouse keepers.")
    doc, _ = wait_for_status(api, kb["id"], "notes\nline two.txt")
    assert doc["status"] == "PROCESSED" and doc["chunks"] == 1
    found = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "lighthouse keepers"}).json()["data"]
    assert found["results"][0]["source"] == "notes\nline two.txt"


def test_a_search_field_the_service_does_not_know_is_a_400_not_ignored(api, kb, lambda_client):
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "x", "top_k": 1})
    assert "did you mean topK?" in _refused(answer, 400, "INVALID_INPUT")["message"]
    answer = api.call("POST", "/search", {"knowledgeBaseIds": [kb["id"]], "query": "x", "debug": "yes"})
    assert _refused(answer, 400, "INVALID_INPUT")["message"].startswith("debug:")
    answer = invoke(lambda_client, {"apiKey": api.key, "knowledgeBaseId": kb["id"], "query": "x", "top_k": 1})
    assert answer["error"]["status"] == 400 and answer["error"]["message"].startswith("top_k:")
    assert invoke(lambda_client, {"apiKey": api.key, "knowledgeBaseId": kb["id"], "query": "x", "topK": 1})["success"]


def test_a_filter_operator_the_service_does_not_know_is_a_400_naming_it(api, kb, lambda_client):
    bad = {"andAll": [{"equals": {"key": "team", "value": "energy"}}, {"between": {"key": "year", "value": [1, 2]}}]}
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "x", "filter": bad})
    assert _refused(answer, 400, "INVALID_FILTER")["message"].startswith("filter.andAll[1].between: is not a filter operator")
    answer = invoke(lambda_client, {"apiKey": api.key, "knowledgeBaseId": kb["id"], "query": "x", "filter": bad})
    assert answer["error"]["status"] == 400 and "between" in answer["error"]["message"]
    good = {"orAll": [{"equals": {"key": "team", "value": "energy"}}, {"greaterThan": {"key": "year", "value": 2022}}]}
    assert api.call("POST", "/search", {"knowledgeBaseIds": [kb["id"]], "query": "x", "filter": good}).status_code == 200


HUGE = "9" * 5000  # past Python's 4,300-digit int() limit: a ValueError, once a 500


@pytest.fixture(scope="module")
def agent(api, kb):
    agent = api.call("POST", "/agents", {"name": "Hostile helper"}).json()["data"]
    api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools", {"quickAdd": True, "knowledgeBaseId": kb["id"]})
    return agent


@pytest.mark.parametrize("method,path,body,params,field", [
    ("POST", "/knowledge-bases/{kb}/search", {"query": "q", "topK": HUGE}, None, "topK"),
    ("POST", "/knowledge-bases/{kb}/search", {"query": "q", "maxTokens": HUGE}, None, "maxTokens"),
    ("GET", "/knowledge-bases", None, {"limit": HUGE}, "limit"),
    ("GET", "/knowledge-bases/{kb}/query", None, {"q": "pump", "top_k": HUGE}, "top_k"),
    ("GET", "/knowledge-search", None, {"q": "pump", "max_results": HUGE}, "max_results"),
    ("POST", "/api-keys", {"name": "k", "expiresInDays": HUGE}, None, "expiresInDays"),
    ("POST", "/agents/{agent}/knowledge-base-tools", {"knowledgeBaseId": "{kb}", "defaultTopK": HUGE}, None,
     "defaultTopK"),
    ("GET", "/audit-log", None, {"nextToken": "9" * 30}, "nextToken"),  # past a bigint
])
def test_numbers_past_any_bound_are_a_400_naming_the_field(api, kb, agent, method, path, body, params, field):
    fill = {"kb": kb["id"], "agent": agent["id"]}
    body = {k: v.format(**fill) if isinstance(v, str) and "{" in v else v for k, v in (body or {}).items()} or None
    answer = api.call(method, path.format(**fill), body, params=params)
    assert answer.status_code == 400, answer.text[:300]
    assert field in answer.json()["error"]["message"]


def test_a_number_past_any_bound_in_the_search_lambda_is_a_400(lambda_client, api, kb):
    answer = invoke(lambda_client, {"apiKey": api.key, "knowledgeBaseId": kb["id"], "query": "q", "topK": HUGE})
    assert answer["success"] is False and answer["error"]["status"] == 400 and "topK" in answer["error"]["message"]


@pytest.mark.parametrize("path", ["/knowledge-bases/%00", "/knowledge-bases/%00/documents", "/agents/%00",
                                  "/agents/%00/tools", "/knowledge-bases/kb_x/documents/a%00b"])
def test_a_nul_in_a_path_id_is_a_400_naming_it(api, path):
    answer = requests.get(api.base_url + path, headers={"Authorization": f"Bearer {api.key}"}, timeout=60)
    error = _refused(answer, 400, "INVALID_INPUT")
    assert "NUL" in error["message"]


def test_mcp_get_is_a_405_at_once_and_odd_header_bytes_are_no_500(api, agent):
    url = f"{api.base_url}/agents/{agent['id']}/mcp"
    auth = {"Authorization": f"Bearer {api.key}"}
    answer = requests.get(url, headers={**auth, "Accept": "text/event-stream"}, timeout=60)
    assert "POST JSON-RPC" in _refused(answer, 405, "METHOD_NOT_ALLOWED")["message"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    answer = requests.post(url, json=body, timeout=60, headers={
        **auth, "Accept": "application/json, text/event-stream", "X-Note": "€ café".encode("utf-8")})
    assert answer.status_code == 200, answer.text[:300]
    assert [t["name"] for t in answer.json()["result"]["tools"]] == ["search_hostile"]
    deep = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ' + b'{"a": ' * 60 + b"1" + b"}" * 61
    answer = requests.post(url, data=deep, timeout=60, headers={
        **auth, "Accept": "application/json, text/event-stream", "Content-Type": "application/json"})
    assert "nests deeper than 32 levels" in _refused(answer, 400, "INVALID_INPUT")["message"]
