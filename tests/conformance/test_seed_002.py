"""Seed 002 (a worker's kb tool): the tool definition the worker is given (kind "kb", an
input_schema with query and an integer top_k, an empty config) and the call it makes when
the LLM uses it: GET {kb_query_url}/knowledge-base/query/?q={query}&top_k={top_k} with its
key, answering [{"text", "metadata": {"source", "page"}}]. On AWS the API's stage is `api`,
so the URL is the seed's /api/knowledge-base/query/; the local stack's URL ends in that
stage too. The search covers every knowledge base the key's user may read in its own
organisation, or those named by kb=."""
import base64
import secrets

import pytest
import requests

from tests.e2e.conftest import wait_for_status

pytestmark = pytest.mark.e2e

REFUND = ("Our refund policy allows returns within 30 days of purchase. Refunds are paid to the original"
          " payment method within five working days.")
DIGITAL = "Digital products are non-refundable once downloaded, unless the download was faulty."


def refund_policy_pdf() -> bytes:
    """refund-policy.pdf: the refund text on page 2, as in the seed's example."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "Company policies. This handbook covers shipping and warranty terms for all customers."
                         " Read the section that applies to your order before contacting support. Orders ship"
                         " from the central warehouse on weekdays, and every parcel carries a tracking number."
                         " Warranty claims need the serial number printed under the lid of the device.")
    pdf.add_page()
    pdf.multi_cell(0, 8, REFUND + " " + DIGITAL)
    return bytes(pdf.output())


def data(response, status=200):
    assert response.status_code == status, response.text
    return response.json()["data"]


@pytest.fixture(scope="module")
def kbs(api, colleague, stranger):
    """Policies (the worker's own, with the PDF), Shipping (shared with the organisation by
    a colleague), the colleague's private Drafts, and another organisation's public KB.
    Entries are their writer's alone unless their level says wider (seed 003's levels)."""
    policies = data(api.call("POST", "/knowledge-bases", {"name": "Policies"}), 201)
    answer = api.call("POST", f"/knowledge-bases/{policies['id']}/documents", {
        "filename": "refund-policy.pdf", "content": base64.b64encode(refund_policy_pdf()).decode()})
    assert answer.status_code in (200, 201, 202), answer.text
    doc, _ = wait_for_status(api, policies["id"], "refund-policy.pdf")
    assert doc["status"] == "PROCESSED", doc
    shipping = data(colleague.call("POST", "/knowledge-bases", {"name": "Shipping", "visibility": "org"}), 201)
    data(colleague.call("POST", f"/knowledge-bases/{shipping['id']}/entries", {
        "title": "shipping-times", "content": "Refunds for lost parcels are paid once the courier confirms the loss.",
        "level": "organisation"}),
        201)
    drafts = data(colleague.call("POST", "/knowledge-bases", {"name": "Drafts"}), 201)
    data(colleague.call("POST", f"/knowledge-bases/{drafts['id']}/entries", {
        "title": "draft-refunds", "content": "Draft: refunds within 90 days of purchase for premium members."}), 201)
    public = data(stranger.call("POST", "/knowledge-bases", {"name": f"Elsewhere {secrets.token_hex(3)}",
                                                              "visibility": "public"}), 201)
    data(stranger.call("POST", f"/knowledge-bases/{public['id']}/entries", {
        "title": "other-refunds", "content": "Our refund policy allows returns within 14 days of purchase.",
        "level": "public"}), 201)
    yield {"policies": policies, "shipping": shipping, "drafts": drafts, "public": public}
    stranger.call("DELETE", f"/knowledge-bases/{public['id']}")


def worker_query(api, query: str, top_k: int, slash: str = "/", key="default", **extra):
    """What the worker sends: GET {kb_query_url}/knowledge-base/query/?q=&top_k= with its key."""
    return api.call("GET", f"/knowledge-base/query{slash}", params={"q": query, "top_k": top_k, **extra}, key=key)


@pytest.mark.parametrize("slash", ["/", ""])
def test_the_worker_query_answers_the_seeds_passages(api, kbs, slash):
    answer = worker_query(api, "How long do I have to return a purchase for a refund?", 5, slash)
    assert answer.status_code == 200, answer.text
    passages = answer.json()
    assert isinstance(passages, list) and 1 <= len(passages) <= 5
    for passage in passages:
        assert isinstance(passage["text"], str) and passage["text"]
        assert set(passage["metadata"]) >= {"source", "page"}
    first = passages[0]
    assert "30 days" in first["text"]
    assert (first["metadata"]["source"], first["metadata"]["page"]) == ("refund-policy.pdf", 2)


def test_every_knowledge_base_the_user_may_read_in_its_organisation(api, kbs):
    sources = {p["metadata"]["source"] for p in worker_query(api, "refunds", 20).json()}
    assert "refund-policy.pdf" in sources and "shipping-times" in sources  # its own, its organisation's
    assert "draft-refunds" not in sources  # a colleague's private one
    assert "other-refunds" not in sources  # another organisation's public one


def test_kb_names_the_knowledge_bases(api, kbs):
    only = worker_query(api, "refunds", 20, kb=kbs["shipping"]["id"]).json()
    assert {p["metadata"]["source"] for p in only} == {"shipping-times"}
    both = worker_query(api, "refunds", 20, kb=f"{kbs['shipping']['id']},{kbs['public']['id']}").json()
    assert {p["metadata"]["source"] for p in both} == {"shipping-times", "other-refunds"}  # named: any it may see
    assert worker_query(api, "refunds", 5, kb=kbs["drafts"]["id"]).status_code == 404
    assert len(worker_query(api, "refunds", 1).json()) == 1


def test_bad_requests_are_named(api, kbs):
    for params, field in (({"top_k": 3}, "q"), ({"q": "refunds", "top_k": 0}, "top_k"),
                          ({"q": "refunds", "top_k": "five"}, "top_k"), ({"q": "refunds", "page": 2}, "page")):
        answer = api.call("GET", "/knowledge-base/query/", params=params)
        assert answer.status_code == 400 and answer.json()["error"]["message"].startswith(field), answer.text
    assert worker_query(api, "refunds", 5, key=None).status_code == 401


def test_an_organisation_without_knowledge_bases_answers_an_empty_list(local_env):
    from tests.e2e.conftest import Api, new_key

    empty = Api(local_env["KB_API_URL"], new_key(local_env, f"seed-empty-{secrets.token_hex(4)}", "worker"))
    answer = worker_query(empty, "refunds", 5)
    assert answer.status_code == 200 and answer.json() == []


def test_the_worker_tool_definition_and_its_call(api, kbs):
    agent = data(api.call("POST", "/agents", {"name": "Voice agent"}), 201)
    data(api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools", {
        "knowledgeBaseId": kbs["policies"]["id"], "toolName": "search_docs", "defaultTopK": 5,
        "toolDescription": "Search the company knowledge base for policy, product, and procedure information."}))
    data(api.call("POST", f"/agents/{agent['id']}/tools", {"type": "knowledge_search"}), 201)
    (tool,) = data(api.call("GET", f"/agents/{agent['id']}/tools", params={"format": "worker"}))  # kb tools only
    assert tool["name"] == "search_docs" and tool["kind"] == "kb" and tool["config"] == {}
    assert tool["description"].startswith("Search the company knowledge base")
    schema = tool["input_schema"]
    assert schema["type"] == "object" and schema["required"] == ["query"]
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["top_k"]["type"] == "integer" and schema["properties"]["top_k"]["default"] == 5
    # The LLM calls the tool; the worker sends its arguments as q and top_k.
    arguments = {"query": "Can I return a downloaded product?", "top_k": 2}
    passages = worker_query(api, arguments["query"], arguments["top_k"]).json()
    assert len(passages) <= 2 and any("non-refundable" in p["text"] for p in passages)


def test_the_url_is_the_seeds_on_the_api_stage(local_env):
    """The local stack's API URL is the emulator's path to the `api` stage, as /api is on AWS."""
    assert "/api/" in local_env["KB_API_URL"] + "/"
    assert requests.get(local_env["KB_API_URL"] + "/knowledge-base/query/", params={"q": "x"}, timeout=30
                        ).status_code == 401
