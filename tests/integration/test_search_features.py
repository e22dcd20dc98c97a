"""Strategies, filters, scores, token budgets, priorities and entries on real PostgreSQL."""
import json
import secrets

import pytest

from chalicelib.api.views import entry_hit_view, entry_view
from chalicelib.documents import entries
from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.retrieval import SearchRequest
from chalicelib.embeddings import get_provider
from chalicelib.errors import Invalid
from chalicelib.retrieval.request import parse_filters, parse_search_request
from chalicelib.storage import connection
from tests.integration.test_search import _ingest, search


def create_entry(principal, kb_id, **kwargs) -> dict:
    return entry_view(entries.create_entry(principal, kb_id, **kwargs))


def search_entries(principal, query: str, max_results: int) -> list[dict]:
    return [entry_hit_view(p) for p in entries.search_entries(principal, query, max_results)]


@pytest.fixture
def library(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Library", description="")
    ids = {
        "volcano.txt": _ingest(kb["id"], "volcano.txt", "Stratovolcanoes build steep cones from layers of lava and ash."),
        "reef.txt": _ingest(kb["id"], "reef.txt", "Coral reefs grow slowly in warm shallow seas."),
        "manual.txt": _ingest(kb["id"], "manual.txt", "Error code XQ-4471 means the pump valve is stuck."),
    }
    with connection() as conn:
        conn.execute("UPDATE chunks SET metadata = '{\"tags\": [\"geo\", \"hot\"], \"team\": \"earth\"}'"
                     " WHERE document_id = %s", (ids["volcano.txt"],))
        conn.execute("UPDATE chunks SET metadata = '{\"tags\": [\"sea\"], \"team\": \"ocean\"}'"
                     " WHERE document_id = %s", (ids["reef.txt"],))
        conn.execute("UPDATE documents SET processed_at = now() - interval '400 days' WHERE id = %s",
                     (ids["volcano.txt"],))
    return principal, kb, ids


def _sources(answer):
    return [r["source"] for r in answer["results"]]


def _req(kb, query, **kw):
    if "filters" in kw:
        kw["filters"] = parse_filters(kw["filters"])
    return SearchRequest(knowledge_base_ids=(kb["id"],), query=query, **kw)


def test_keyword_search_finds_exact_codes_that_embeddings_miss(library):
    principal, kb, _ = library
    answer = search(principal, _req(kb, "XQ-4471", strategy="keyword"))
    assert _sources(answer) == ["manual.txt"]
    assert 0 < answer["results"][0]["similarity"] < 1
    assert answer["metadata"]["strategy"] == "keyword" and answer["metadata"]["cached"] is False
    assert search(principal, _req(kb, "zebra giraffe", strategy="keyword"))["resultCount"] == 0


def test_hybrid_fuses_both_lists_and_debug_shows_each_score(library):
    principal, kb, _ = library
    answer = search(principal, _req(kb, "lava and ash", strategy="hybrid", top_k=3, debug=True))
    top = answer["results"][0]
    assert top["source"] == "volcano.txt"
    assert set(top["scores"]) == {"vectorScore", "keywordScore", "fusedScore"}
    assert top["scores"]["vectorScore"] > 0 and top["scores"]["keywordScore"] > 0
    assert top["similarity"] == pytest.approx(1.0)  # first in both lists
    # Without debug too: minScore's score (vectorScore) is shown, and similarity is the fused score.
    plain = search(principal, _req(kb, "lava", strategy="hybrid"))["results"]
    assert all(r["similarity"] == r["scores"]["fusedScore"] and r["scores"]["vectorScore"] is not None for r in plain)
    assert [r["similarity"] for r in plain] == sorted((r["similarity"] for r in plain), reverse=True)
    # Seed 003's debug view: both lists before fusion, each by its own score; the fused top is
    # first in both; the query vector only when asked, and it is the query's embedding.
    debug = answer["metadata"]["debug"]
    assert set(debug) == {"candidates"} and set(debug["candidates"]) == {"semantic", "keyword"}
    for listed in debug["candidates"].values():
        assert listed[0]["chunkId"] == top["chunkId"]
        assert [c["score"] for c in listed] == sorted((c["score"] for c in listed), reverse=True)
    assert len(debug["candidates"]["semantic"]) == 3  # the knowledge base's every chunk, the pool being deeper
    assert "debug" not in search(principal, _req(kb, "lava", strategy="hybrid"))["metadata"]
    with_vector = search(principal, _req(kb, "lava and ash", strategy="semantic", debug=True,
                                         debug_query_vector=True))["metadata"]["debug"]
    [(entry)] = with_vector["queryVectors"]
    expected = get_provider("local").embed_query("lava and ash")
    assert entry["model"] == "local:all-MiniLM-L6-v2" and entry["vector"] == pytest.approx(expected, abs=1e-5)
    assert with_vector["candidates"]["keyword"] == []
    with pytest.raises(Invalid):
        parse_search_request(["kb_x"], {"query": "x", "debug": {"vector": True}})


def test_min_score_drops_weak_matches(library):
    principal, kb, _ = library
    everything = search(principal, _req(kb, "coral reef", strategy="semantic", top_k=3))
    assert everything["resultCount"] == 3
    cut = everything["results"][0]["similarity"] - 0.01
    strict = search(principal, _req(kb, "coral reef", strategy="semantic", top_k=3, min_score=cut))
    assert _sources(strict) == ["reef.txt"]


@pytest.mark.parametrize("filters,expected", [
    ({"filename": "reef.txt"}, {"reef.txt"}),
    ({"filename": "*.txt"}, {"reef.txt", "volcano.txt", "manual.txt"}),
    ({"tags": ["hot"]}, {"volcano.txt"}),
    ({"tags": ["sea", "geo"]}, {"reef.txt", "volcano.txt"}),
    ({"metadata": {"team": "ocean"}}, {"reef.txt"}),
])
def test_filters_narrow_in_sql(library, filters, expected):
    principal, kb, _ = library
    for strategy in ("semantic", "hybrid"):
        answer = search(principal, _req(kb, "nature", strategy=strategy, top_k=10, filters=filters))
        assert set(_sources(answer)) == expected


def test_document_id_filter(library):
    principal, kb, ids = library
    answer = search(principal, _req(kb, "anything", top_k=10, filters={"documentIds": [ids["manual.txt"]]}))
    assert _sources(answer) == ["manual.txt"]


def test_recency_priority_puts_fresh_documents_first(library):
    principal, kb, _ = library
    by_similarity = search(principal, _req(kb, "volcano lava", strategy="semantic", top_k=3))
    by_recency = search(principal, _req(kb, "volcano lava", strategy="semantic", top_k=3, prioritize_by="recency"))
    assert _sources(by_similarity)[0] == "volcano.txt"
    assert _sources(by_recency)[-1] == "volcano.txt"
    assert [r["rank"] for r in by_recency["results"]] == [1, 2, 3]


def test_token_budget_truncates_and_reports_omissions(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Long", description="")
    # sentences that differ (chunks that repeat each other's text would answer once)
    words = "ice snow rock valley moraine crevasse melt flow summit ridge basin river stream lake fjord cirque".split()
    long = " ".join(f"Paragraph {i} about glaciers: {words[i % 16]} {words[i * 7 % 16]} {words[(i * 11 + 3) % 16]}"
                    f" {words[(i * 5 + 1) % 16]} moving slowly downhill." for i in range(100))
    _ingest(kb["id"], "glacier.txt", long, chunk_tokens=300)
    answer = search(principal, _req(kb, "glaciers", strategy="semantic", top_k=5, max_tokens=150))
    meta = answer["metadata"]
    assert meta["totalTokensUsed"] <= 150
    assert answer["results"][-1]["truncated"] is True
    assert answer["results"][-1]["content"].endswith(".")
    with connection() as conn:
        chunks = conn.execute("SELECT count(*) AS n FROM chunks WHERE kb_id = %s", (kb["id"],)).fetchone()["n"]
    assert chunks >= 3
    # Passages fit whole until one does not: it is cut, and those after it left out.
    assert [r["truncated"] for r in answer["results"]] == [False] * (answer["resultCount"] - 1) + [True]
    assert meta["omittedCount"] == min(5, chunks) - answer["resultCount"] > 0
    assert f"{meta['omittedCount']} more left out" in answer["summary"]


def test_several_knowledge_bases_merge(tenant):
    principal, _ = tenant
    a = create_knowledge_base(principal, name="A", description="")
    b = create_knowledge_base(principal, name="B", description="")
    _ingest(a["id"], "a.txt", "Owls hunt mice at night.")
    _ingest(b["id"], "b.txt", "Owls have silent feathers for hunting.")
    answer = search(principal, SearchRequest(knowledge_base_ids=(a["id"], b["id"]), query="owls hunting", top_k=5))
    assert {r["knowledgeBaseId"] for r in answer["results"]} == {a["id"], b["id"]}
    scores = [r["similarity"] for r in answer["results"]]
    assert scores == sorted(scores, reverse=True)
    assert answer["knowledgeBaseName"] == "A, B"


def test_entries_are_searchable_at_once_and_titles_weigh_more(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Answers", description="")
    titled = create_entry(principal, kb["id"], title="Kubernetes autoscaling",
                          content="Use the horizontal pod autoscaler with CPU targets.", metadata={"agent": "r1"})
    body_only = create_entry(principal, kb["id"], title="Cluster notes",
                             content="We once discussed kubernetes autoscaling briefly in passing, among many other things.",
                             metadata={})
    assert titled["url"] == f"knowledge://entries/{titled['id']}"
    answer = search(principal, _req(kb, "kubernetes autoscaling", strategy="keyword", top_k=5))
    assert answer["results"][0]["documentId"] == titled["id"]
    assert answer["results"][0]["source"] == "Kubernetes autoscaling"
    found = search_entries(principal, "kubernetes autoscaling", 5)
    assert [f["url"] for f in found][:2] == [titled["url"], body_only["url"]]
    assert all(0 <= f["score"] <= 1 for f in found) and found[0]["title"] == "Kubernetes autoscaling"


def test_knowledge_search_shows_only_the_callers_entries(tenant):
    from chalicelib.auth import issue_key

    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Mine", description="", visibility="public")
    create_entry(principal, kb["id"], title="Secret recipe", content="Add cardamom to the dough.", metadata={})
    other, _ = issue_key(f"org-{secrets.token_hex(4)}", "zed")
    assert search_entries(other, "cardamom dough", 5) == []
    assert len(search_entries(principal, "cardamom dough", 5)) == 1


@pytest.mark.parametrize("query", ["\u0011", "___", "?!", "the and of"])
def test_queries_without_searchable_words_answer_empty_not_an_error(library, query):
    principal, kb, _ = library
    for strategy in ("keyword", "hybrid"):
        answer = search(principal, _req(kb, query, strategy=strategy))
        assert answer["resultCount"] >= 0
    assert search(principal, _req(kb, query, strategy="keyword"))["resultCount"] == 0


REFUND = ("Refunds: if you are not satisfied with your purchase, you can ask for a full refund within 30 days."
          " Contact support with your order number and we will return the payment to your original card.")


def test_a_quick_added_tool_finds_the_refund_policy_for_money_back(tenant):
    """The issue's case: the refund passage is the top semantic hit, yet a tool made by
    quick add answered nothing, because its threshold was applied to the fused score."""
    from chalicelib.agents import service
    from chalicelib.agents.invoke import invoke_tool

    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Help centre", description="")
    _ingest(kb["id"], "refunds.txt", REFUND)
    _ingest(kb["id"], "shipping.txt", "Shipping: orders leave our warehouse within two business days.")
    _ingest(kb["id"], "volcano.txt", "Stratovolcanoes build steep cones from layers of lava and ash.")
    agent = service.create_agent(principal, name="Support", description="", tools=[])
    tool = service.link_knowledge_base(principal, agent["id"], kb_id=kb["id"], quick_add=True,
                                       name=None, description=None, top_k=None, min_score=None)
    run = invoke_tool(principal, agent["id"], tool["id"], {"query": "How can I get my money back?"})
    assert [p.source for p in run.result.passages] == ["refunds.txt"]  # the unrelated two are below 0.3


@pytest.mark.parametrize("strategy", ["semantic", "keyword", "hybrid"])
def test_min_score_is_the_cosine_similarity_whatever_the_strategy(tenant, strategy):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Help", description="")
    _ingest(kb["id"], "refunds.txt", REFUND)
    _ingest(kb["id"], "card.txt", "The support card game has a full deck of refund cards and order tokens.")
    query = "full refund order"  # both share words with it; only one answers it
    everything = search(principal, _req(kb, query, strategy="semantic", top_k=5))
    cosine = {r["source"]: r["similarity"] for r in everything["results"]}
    cut = (cosine["refunds.txt"] + cosine["card.txt"]) / 2
    assert cosine["refunds.txt"] > cut > cosine["card.txt"]
    answer = search(principal, _req(kb, query, strategy=strategy, top_k=5, min_score=cut, debug=True))
    assert _sources(answer) == ["refunds.txt"]
    assert answer["results"][0]["scores"]["vectorScore"] == pytest.approx(cosine["refunds.txt"], abs=1e-5)


@pytest.fixture
def reports(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Reports", description="")
    attributes = {
        "a.txt": {"year": 2023, "team": "energy", "tags": ["solar", "grid"], "region": "north-east"},
        "b.txt": {"year": 2021, "team": "energy", "tags": ["wind"], "region": "south"},
        "c.txt": {"year": 2024, "team": "ocean", "tags": ["reef"], "region": "north"},
        "d.txt": {"year": "2024", "team": "100%_sure"},  # a year as text is not a number
        "e.txt": {},
    }
    for name, metadata in attributes.items():
        doc_id = _ingest(kb["id"], name, f"Annual report {name}: progress on the programme.")
        with connection() as conn:
            conn.execute("UPDATE chunks SET metadata = %s::jsonb WHERE document_id = %s",
                         (json.dumps(metadata), doc_id))
    return principal, kb


@pytest.mark.parametrize("expression,expected", [
    ({"andAll": [{"greaterThan": {"key": "year", "value": 2022}}, {"equals": {"key": "team", "value": "energy"}}]},
     {"a.txt"}),
    ({"equals": {"key": "team", "value": "ocean"}}, {"c.txt"}),
    ({"equals": {"key": "year", "value": 2024.0}}, {"c.txt"}),
    ({"notEquals": {"key": "team", "value": "energy"}}, {"c.txt", "d.txt", "e.txt"}),
    ({"greaterThanOrEquals": {"key": "year", "value": 2023}}, {"a.txt", "c.txt"}),
    ({"lessThan": {"key": "year", "value": 2023}}, {"b.txt"}),
    ({"lessThanOrEquals": {"key": "year", "value": 2021}}, {"b.txt"}),
    ({"in": {"key": "team", "value": ["ocean", "sky"]}}, {"c.txt"}),
    ({"notIn": {"key": "team", "value": ["energy"]}}, {"c.txt", "d.txt", "e.txt"}),
    ({"startsWith": {"key": "region", "value": "north"}}, {"a.txt", "c.txt"}),
    ({"startsWith": {"key": "team", "value": "100%_"}}, {"d.txt"}),
    ({"startsWith": {"key": "team", "value": "1%"}}, set()),  # % is a character, not a wildcard
    ({"listContains": {"key": "tags", "value": "wind"}}, {"b.txt"}),
    ({"stringContains": {"key": "region", "value": "east"}}, {"a.txt"}),
    ({"stringContains": {"key": "tags", "value": "ee"}}, {"c.txt"}),  # a member of a list
    ({"orAll": [{"equals": {"key": "team", "value": "ocean"}}, {"listContains": {"key": "tags", "value": "wind"}}]},
     {"b.txt", "c.txt"}),
    ({"andAll": [{"equals": {"key": "team", "value": "energy"}},
                 {"orAll": [{"listContains": {"key": "tags", "value": "grid"}},
                            {"lessThan": {"key": "year", "value": 2000}}]}]}, {"a.txt"}),
])
def test_bedrock_filter_operators_select_in_sql(reports, expression, expected):
    principal, kb = reports
    for strategy in ("semantic", "keyword", "hybrid"):
        answer = search(principal, SearchRequest(knowledge_base_ids=(kb["id"],), query="annual report",
                                                 strategy=strategy, top_k=10,
                                                 filters=parse_filters(None, expression)))
        assert set(_sources(answer)) == expected, strategy


def test_the_filter_expression_and_the_filters_shorthand_both_apply(reports):
    principal, kb = reports
    answer = search(principal, SearchRequest(
        knowledge_base_ids=(kb["id"],), query="annual report", top_k=10,
        filters=parse_filters({"filename": "[ab]*"}, {"equals": {"key": "team", "value": "energy"}})))
    assert _sources(answer) == []  # a glob has no brackets: "[ab]*" names no file
    answer = search(principal, SearchRequest(
        knowledge_base_ids=(kb["id"],), query="annual report", top_k=10,
        filters=parse_filters({"filename": "a*"}, {"equals": {"key": "team", "value": "energy"}})))
    assert _sources(answer) == ["a.txt"]


def test_hybrid_weights_move_the_ranking_between_the_two_signals(library):
    principal, kb, _ = library
    query = "volcanic eruption XQ-4471"  # the code only matches by words (BM25), the rest by meaning
    semantic = search(principal, _req(kb, query, strategy="semantic", top_k=3))
    keyword = search(principal, _req(kb, query, strategy="keyword", top_k=3))
    assert _sources(semantic)[0] != _sources(keyword)[0]
    only_meaning = search(principal, _req(kb, query, top_k=3, hybrid_weights=(1.0, 0.0)))
    only_words = search(principal, _req(kb, query, top_k=3, hybrid_weights=(0.0, 1.0)))
    assert _sources(only_meaning)[0] == _sources(semantic)[0]
    assert _sources(only_words)[0] == _sources(keyword)[0]
