"""Reranking (issue 16) through boto3's bedrock-agent-runtime client: against a local
server that speaks Rerank and scores by shared words (so its order is knowable), and
against ministack's own Rerank (a mock that keeps the order it is given)."""
import pytest

from chalicelib.agents import service
from chalicelib.agents.invoke import invoke_tool
from chalicelib.api.views import search_view, tool_result_view
from chalicelib.errors import Invalid
from chalicelib.knowledge_bases import create_knowledge_base, parse_search_settings, update_knowledge_base
from chalicelib.retrieval import parse_search_request, search
from tests.integration.bedrock_server import RerankServer
from tests.integration.test_search import _ingest

PASSAGES = {
    "pump.txt": "To bring the pump back after a fault, hold its red button until the light blinks.",
    "valve.txt": "Valve maintenance: a stuck valve stops the pump; clean the valve seat.",
    "words.txt": "Reset pump button: inventory codes for spare parts, listed by warehouse shelf.",
    "volcano.txt": "Stratovolcanoes build steep cones from layers of lava and ash.",
}
QUERY = "reset pump button"


@pytest.fixture
def aws(monkeypatch, local_env):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"):
        monkeypatch.setenv(name, local_env[name])
    monkeypatch.delenv("AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME", raising=False)


@pytest.fixture
def manuals(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Manuals", description="")
    for name, text in PASSAGES.items():
        _ingest(kb["id"], name, text)
    return principal, kb


def _search(principal, kb, **body):
    return search_view(search(principal, parse_search_request([kb["id"]], {"query": QUERY, **body})))


def test_rerank_reorders_the_top_candidates_and_reports_its_score(manuals, aws, monkeypatch):
    principal, kb = manuals
    plain = _search(principal, kb, topK=3, strategy="semantic")
    assert all("rerankScore" not in r for r in plain["results"])  # off by default
    with RerankServer() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME", server.endpoint_url)
        reranked = _search(principal, kb, topK=3, strategy="semantic", rerank=True)
    sources = [r["source"] for r in reranked["results"]]
    assert sources[0] == "words.txt"  # all three words; by meaning it is not the first
    assert [r["source"] for r in plain["results"]][0] != "words.txt"
    scores = [r["rerankScore"] for r in reranked["results"]]
    assert scores == sorted(scores, reverse=True) and scores[0] == 1.0
    assert [r["rank"] for r in reranked["results"]] == [1, 2, 3]
    sent = server.requests[0]
    assert sent["queries"][0]["textQuery"]["text"] == QUERY
    assert len(sent["sources"]) == 4  # the candidate pool, wider than topK, was sent
    # a few more than topK come back, to take the place of passages that repeat another's text
    assert sent["rerankingConfiguration"]["bedrockRerankingConfiguration"]["numberOfResults"] == 4


def test_a_tool_with_rerank_and_the_strict_body(manuals, aws, monkeypatch):
    principal, kb = manuals
    agent = service.create_agent(principal, name="Fixer", description="", tools=[])
    tool = service.link_knowledge_base(principal, agent["id"], kb_id=kb["id"], quick_add=True, name=None,
                                       description=None, top_k=2, min_score=0.0, rerank=True)
    with RerankServer() as server:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME", server.endpoint_url)
        answer = tool_result_view(invoke_tool(principal, agent["id"], tool["id"], {"query": QUERY}))
    assert answer["results"][0]["source"] == "words.txt" and answer["results"][0]["rerankScore"] == 1.0
    with pytest.raises(Invalid) as err:
        parse_search_request([kb["id"]], {"query": QUERY, "rerank": "yes"})
    assert err.value.message.startswith("rerank")


def test_against_ministacks_rerank(manuals, aws):
    principal, kb = manuals
    plain = _search(principal, kb, topK=3, strategy="semantic")
    reranked = _search(principal, kb, topK=3, strategy="semantic", rerank=True)
    # ministack keeps the order: the same passages, scored 1.0, 0.9, 0.8.
    assert [r["source"] for r in reranked["results"]] == [r["source"] for r in plain["results"]]
    assert [r["rerankScore"] for r in reranked["results"]] == [1.0, 0.9, 0.8]


def test_a_knowledge_base_defaults_to_rerank_only_where_the_deployment_has_a_reranker(manuals, aws, monkeypatch):
    principal, kb = manuals
    update_knowledge_base(principal, kb["id"], parse_search_settings({"rerank": True}))
    reranked = _search(principal, kb, topK=3, strategy="semantic")
    assert [r["rerankScore"] for r in reranked["results"]] == [1.0, 0.9, 0.8]  # ministack's, by default
    assert all("rerankScore" not in r for r in _search(principal, kb, topK=3, strategy="semantic", rerank=False)["results"])
    monkeypatch.setenv("RERANKER", "none")
    with pytest.raises(Invalid) as err:
        parse_search_settings({"rerank": True})
    assert err.value.message.startswith("search.rerank") and "no reranker" in err.value.message
    assert parse_search_settings({"rerank": False}) == {"default_rerank": False}
    with pytest.raises(Invalid) as err:
        create_knowledge_base(principal, name="Reranked", description="", search=parse_search_settings({"rerank": True}))
    assert err.value.message.startswith("search.rerank")
    # set before the reranker went: searches answer, not reranked (topK 2: not the answer cached above)
    assert all("rerankScore" not in r for r in _search(principal, kb, topK=2, strategy="semantic")["results"])
