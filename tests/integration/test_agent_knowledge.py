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
        assert names == ["knowledge_search"], fmt
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
