"""Issue 16 on real PostgreSQL: entries de-duplicate, and the knowledge_search tool
answers seed 001's shape with scores that mean relevance."""
import secrets

import pytest

from chalicelib.agents import FORMATS, service
from chalicelib.agents.invoke import invoke_tool
from chalicelib.api.views import entry_view, tool_result_view
from chalicelib.auth import issue_key
from chalicelib.documents import entries
from chalicelib.errors import Invalid
from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.storage import connection

RESEARCH = [
    ("Solid-state batteries", "Solid-state lithium batteries replace the liquid electrolyte with a ceramic,"
                              " which raises energy density and lowers the fire risk."),
    ("Grid storage costs", "Utility-scale battery storage costs fell by about 80 percent between 2013 and 2023."),
    ("Perovskite solar cells", "Perovskite solar cells reached 26 percent efficiency in the laboratory but still"
                               " degrade quickly under humidity."),
]


def test_the_same_content_posted_again_is_the_same_entry(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Notes", description="")
    first = entries.create_entry(principal, kb["id"], title="Tides", content="The moon drives the tides.",
                                 metadata={})
    again = entries.create_entry(principal, kb["id"], title="Tides again",
                                 content="  The moon drives\n the tides. ", metadata={})
    assert first.created and not again.created and again.id == first.id
    assert entry_view(again)["title"] == "Tides"
    other = entries.create_entry(principal, kb["id"], title="Tides", content="The sun drives the tides a little.",
                                 metadata={})
    assert other.created and other.id != first.id
    with connection() as conn:
        count = conn.execute("SELECT count(*) AS n FROM documents WHERE kb_id = %s AND kind = 'entry'",
                             (kb["id"],)).fetchone()["n"]
    assert count == 2
    # Another knowledge base holds its own copy.
    elsewhere = create_knowledge_base(principal, name="Elsewhere", description="")
    copy = entries.create_entry(principal, elsewhere["id"], title="Tides", content="The moon drives the tides.",
                                metadata={})
    assert copy.created and copy.id != first.id


@pytest.fixture
def researched(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Research", description="")
    ids = [entries.create_entry(principal, kb["id"], title=t, content=c, metadata={}).id for t, c in RESEARCH]
    agent = service.create_agent(principal, name="Researcher", description="", tools=[])
    tool = service.add_knowledge_search(principal, agent["id"], name=None, description=None,
                                        max_results=None, min_score=None)
    return principal, agent, tool, ids


def test_knowledge_search_is_a_tool_in_every_format(researched):
    principal, agent, tool, _ = researched
    assert tool["name"] == "knowledge_search" and tool["type"] == "knowledge_search"
    assert [t["status"] for t in service.list_tools(principal, agent["id"])] == ["ok"]
    for fmt in FORMATS:
        listed = service.tool_definitions(principal, agent["id"], fmt)
        listed = listed["tools"] if fmt == "mcp" else listed
        names = [d.get("name") or d["function"]["name"] for d in listed]
        assert names == ([] if fmt == "worker" else ["knowledge_search"]), fmt  # seed 002's worker runs kb tools only
    with pytest.raises(Invalid) as err:
        service.add_knowledge_search(principal, agent["id"], name=None, description=None,
                                     max_results=None, min_score=None)
    assert err.value.code == "TOOL_ALREADY_LINKED"
    with pytest.raises(Invalid):  # given whole, twice
        service.update_agent(principal, agent["id"], {"available_tools": [
            {"name": "a", "type": "knowledge_search"}, {"name": "b", "type": "knowledge_search"}]})


def test_knowledge_search_answers_relevant_entries_and_nothing_for_unrelated_queries(researched):
    principal, agent, tool, ids = researched
    answer = tool_result_view(invoke_tool(principal, agent["id"], tool["id"], {"query": "how cheap is battery storage now?"}))
    assert answer["success"] is True and answer["resultCount"] >= 1
    top = answer["results"][0]
    assert set(top) == {"title", "url", "content", "score"}
    assert top["url"] == f"knowledge://entries/{ids[1]}" and top["title"] == "Grid storage costs"
    assert 0.3 <= top["score"] <= 1
    assert [r["score"] for r in answer["results"]] == sorted((r["score"] for r in answer["results"]), reverse=True)
    # The issue's case: a smoothie recipe is about none of it.
    unrelated = tool_result_view(invoke_tool(principal, agent["id"], tool["id"],
                                             {"query": "a banana and strawberry smoothie recipe"}))
    assert unrelated["resultCount"] == 0 and unrelated["results"] == []
    with pytest.raises(Invalid) as err:
        invoke_tool(principal, agent["id"], tool["id"], {"query": "x", "topK": 3})
    assert err.value.code == "INVALID_ARGUMENTS" and "topK" in err.value.message
    one = invoke_tool(principal, agent["id"], tool["id"], {"query": "batteries", "maxResults": 1.0})
    assert len(one.entries) == 1


def test_knowledge_search_reads_entries_by_level_and_never_another_organisations(service_env):
    org = f"org-{secrets.token_hex(4)}"
    principal, _ = issue_key(org, "alice")
    kb = create_knowledge_base(principal, name="Shared", description="", visibility="public")
    personal = entries.store_entry(principal, kb["id"], entries.Knowledge(
        title="Coffee", content="Alice prefers her coffee with oat milk and no sugar.", level="individual"))
    shared = entries.store_entry(principal, kb["id"], entries.Knowledge(
        title="Deploys", content="Production deploys happen on Tuesdays after the change review.",
        level="organisation"))
    colleague, _ = issue_key(org, f"bob-{secrets.token_hex(3)}")
    stranger, _ = issue_key(f"org-{secrets.token_hex(4)}", "zed")

    def urls(who, query):
        return [entries.entry_url(p.document_id) for p in entries.search_entries(who, query, 5)]

    assert entries.entry_url(personal.id) in urls(principal, "how does Alice take her coffee")
    assert entries.entry_url(personal.id) not in urls(colleague, "how does Alice take her coffee")
    assert entries.entry_url(shared.id) in urls(colleague, "when do production deploys happen")
    assert urls(stranger, "when do production deploys happen") == []  # a public knowledge base, an organisation's entry


PUMP = ("Pump maintenance: to reset the pump, hold the red button for five seconds until the light blinks."
        " Then open the valve slowly. If error XQ-4471 shows, the valve is stuck and must be cleaned."
        " Clean the valve with warm water and a soft brush, never with solvents. Replace the gasket every year."
        # long enough that the tight budget below stays over maxTokens' least (50) with the
        # chunk floor merging the short pieces
        " After a reset the pump runs a self test for two minutes; do not open the valve until the light"
        " stays green. A pump that needs a reset more than once a week has a worn pressure switch.")


@pytest.fixture
def equipped(tenant):
    from tests.integration.test_search import _ingest

    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Manuals", description="")
    _ingest(kb["id"], "pump.txt", PUMP, chunk_tokens=50)
    _ingest(kb["id"], "volcano.txt", "Stratovolcanoes build steep cones from layers of lava and ash.")
    entries.create_entry(principal, kb["id"], title="Pump reset tip",
                         content="Last time the pump reset only worked after the valve was cleaned first.",
                         metadata={})
    agent = service.create_agent(principal, name="Technician", description="", tools=[])
    tool = service.link_knowledge_base(principal, agent["id"], kb_id=kb["id"], quick_add=True, name=None,
                                       description=None, top_k=None, min_score=None, strategy="semantic",
                                       max_tokens=3000)
    service.add_knowledge_search(principal, agent["id"], name=None, description=None, max_results=None,
                                 min_score=None)
    return principal, agent, tool


def test_tool_settings_are_kept_checked_and_used(equipped):
    principal, agent, tool = equipped
    assert {k: tool["config"][k] for k in ("strategy", "maxTokens", "rerank")} == \
        {"strategy": "semantic", "maxTokens": 3000, "rerank": None}  # rerank null: as the knowledge base says
    run = invoke_tool(principal, agent["id"], tool["id"], {"query": "reset the pump"})
    assert run.result.strategy == "semantic"
    edited = service.edit_knowledge_base_tool(principal, agent["id"], tool["id"], {"strategy": "keyword",
                                                                                   "maxTokens": 60})
    assert edited["config"]["strategy"] == "keyword" and edited["config"]["defaultTopK"] == 5
    run = invoke_tool(principal, agent["id"], tool["id"], {"query": "reset the pump"})
    assert run.result.strategy == "keyword" and run.result.tokens_used <= 60
    for change, field in (({"strategy": "fuzzy"}, "strategy"), ({"maxTokens": 10}, "maxTokens"),
                          ({"rerank": "yes"}, "rerank")):
        with pytest.raises(Invalid) as err:
            service.edit_knowledge_base_tool(principal, agent["id"], tool["id"], change)
        assert err.value.message.startswith(field)


def test_context_fits_the_budget_and_the_allocation(equipped):
    from chalicelib.agents.context import assemble, parse_context_request
    from chalicelib.api.views import context_view

    principal, agent, tool = equipped

    def context(**body):
        return context_view(assemble(principal, agent["id"], parse_context_request(
            {"message": "how do I reset the pump?", **body})))

    whole = context(maxTokens=4000)
    sources = {p["source"] for p in whole["passages"]}
    assert sources == {"knowledgeBases", "knowledge"}
    assert whole["totalTokens"] == sum(p["tokens"] for p in whole["passages"]) <= 4000
    assert "volcano.txt" not in [p["title"] for p in whole["passages"]]  # below the tool's minScore
    assert any(p.get("url", "").startswith("knowledge://entries/") for p in whole["passages"])
    assert all(p["toolId"] == tool["id"] for p in whole["passages"] if p["source"] == "knowledgeBases")
    assert "[1] " in whole["context"] and "red button" in whole["context"]

    titles = [p["title"] for p in whole["passages"]]
    assert titles.count("Pump reset tip") == 1  # an entry of a linked knowledge base once, as knowledge
    manual = sum(p["tokens"] for p in whole["passages"] if p["source"] == "knowledgeBases")
    entry = whole["allocation"]["knowledge"]["used"]

    tight = context(maxTokens=manual - 5 + entry, allocation={"knowledgeBases": 0.5, "knowledge": 0.5})
    assert tight["totalTokens"] <= manual - 5 + entry
    assert tight["allocation"]["knowledge"]["used"] == entry  # the entry fits its half
    # The manual gets its half and what the entry left of the other half, and still not all of it.
    assert tight["allocation"]["knowledgeBases"]["used"] > tight["allocation"]["knowledgeBases"]["allocated"]
    assert tight["allocation"]["knowledgeBases"]["omitted"] >= 1 or any(p["truncated"] for p in tight["passages"])
    only_kbs = context(maxTokens=400, allocation={"knowledge": 0})
    assert {p["source"] for p in only_kbs["passages"]} == {"knowledgeBases"}
    only_knowledge = context(maxTokens=400, allocation={"knowledge": 1})
    assert {p["source"] for p in only_knowledge["passages"]} == {"knowledge"}

    for body, field in (({"maxTokens": 10}, "maxTokens"), ({"allocation": {"knowledge": 0.5, "files": 0.5}},
                                                           "allocation.files"),
                        ({"allocation": {"knowledge": 0.5, "knowledgeBases": 0.6}}, "allocation"),
                        ({"messages": "x"}, "messages")):
        with pytest.raises(Invalid) as err:
            parse_context_request({"message": "x", **body})
        assert err.value.message.startswith(field), err.value.message


def test_an_agent_in_auto_mode_gets_knowledge_from_the_context_not_as_tools(equipped):
    principal, agent, _ = equipped
    assert agent["knowledge_mode"] == "tool"
    assert len(service.tool_definitions(principal, agent["id"], "openai")) == 2
    service.update_agent(principal, agent["id"], {"knowledge_mode": "auto"})
    assert service.tool_definitions(principal, agent["id"], "openai") == []
    assert service.tool_definitions(principal, agent["id"], "mcp") == {"tools": []}
    assert len(service.list_tools(principal, agent["id"])) == 2  # still the agent's, still invocable
