"""Seed 001 (knowledge_search, an internal search provider over prior research): the tool
an LLM planner sees (its name, the seed's description, KnowledgeSearchArgs' query and
max_results), called as the planner calls it, answering SearchResult's {title, url,
content, score} with content the whole prior answer (truncated if needed), not the chunk
that matched. The product scores by cosine similarity (0..1, none below 0.3), not ts_rank:
kept (tests/conformance/REQUIREMENTS.md)."""
import pytest

pytestmark = pytest.mark.e2e

SEED_DESCRIPTION = ("Search internal knowledge base for prior research results. Best for finding previously"
                    " researched topics. Returns synthesized answers from past research queries.")
QUESTION = "What are the latest developments in quantum physics?"
ANSWER = "\n\n".join(
    " ".join(f"Based on recent research, result {p}.{i}: entangled qubit arrays of size {p * 10 + i}"
             f" kept coherence longer after error correction." for i in range(5)) for p in range(4))


def data(response, status=200):
    assert response.status_code == status, response.text
    return response.json()["data"]


@pytest.fixture(scope="module")
def research(api):
    """A prior research result: its query as the entry's title, its synthesized answer as
    the content, in a knowledge base of small chunks (the answer spans many)."""
    kb = data(api.call("POST", "/knowledge-bases", {"name": "Research results",
                                                    "chunking": {"chunkTokens": 60, "chunkOverlap": 10}}), 201)
    entry = data(api.call("POST", f"/knowledge-bases/{kb['id']}/entries", {"title": QUESTION, "content": ANSWER}), 201)
    assert entry["chunks"] > 3
    data(api.call("POST", f"/knowledge-bases/{kb['id']}/entries", {
        "title": "Sourdough hydration", "content": "A dough at 75% hydration ferments faster at room temperature."}),
        201)
    return entry


@pytest.fixture(scope="module")
def agent(api):
    agent = data(api.call("POST", "/agents", {"name": "Research planner"}), 201)
    data(api.call("POST", f"/agents/{agent['id']}/tools", {"type": "knowledge_search"}), 201)
    return agent


def knowledge_search(api, agent, arguments):
    """The executor: the planner's tool call, run by the service."""
    tool = next(t for t in data(api.call("GET", f"/agents/{agent['id']}/tools"))["items"]
                if t["type"] == "knowledge_search")
    return api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke", arguments)


def test_the_planner_sees_knowledge_search_with_the_seeds_description_and_args(api, agent):
    (definition,) = data(api.call("GET", f"/agents/{agent['id']}/tools", params={"format": "openai"}))
    function = definition["function"]
    assert function["name"] == "knowledge_search" and function["description"] == SEED_DESCRIPTION
    assert set(function["parameters"]["properties"]) == {"query", "max_results"}
    assert function["parameters"]["required"] == ["query"]


@pytest.mark.parametrize("name", ["max_results", "maxResults"])
def test_max_results_returns_whole_prior_answers(api, agent, research, name):
    answer = knowledge_search(api, agent, {"query": "quantum physics developments", name: 1})
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["success"] is True and result["resultCount"] == 1
    (hit,) = result["results"]
    assert set(hit) == {"title", "url", "content", "score"}
    assert hit["title"] == QUESTION and hit["url"] == research["url"] and hit["url"].startswith("knowledge://")
    assert hit["content"] == ANSWER  # the whole synthesized answer, not the chunk that matched
    assert 0 < hit["score"] <= 1


def test_both_spellings_must_agree_and_stay_in_bounds(api, agent, research):
    assert knowledge_search(api, agent, {"query": "quantum", "max_results": 2, "maxResults": 2}).status_code == 200
    differ = knowledge_search(api, agent, {"query": "quantum", "max_results": 2, "maxResults": 3})
    assert differ.status_code == 400 and differ.json()["error"]["code"] == "INVALID_ARGUMENTS"
    assert knowledge_search(api, agent, {"query": "quantum", "max_results": 50}).status_code == 400
    assert knowledge_search(api, agent, {"query": "quantum", "limit": 5}).status_code == 400


def test_a_topic_never_researched_answers_nothing(api, agent, research):
    result = knowledge_search(api, agent, {"query": "migratory patterns of arctic terns", "max_results": 5}).json()
    assert result["success"] is True and result["results"] == []


def test_the_search_endpoint_answers_the_same_shape(api, research):
    hits = data(api.call("GET", "/knowledge-search", params={"q": "quantum physics developments", "max_results": 3}))
    assert hits and hits[0]["url"] == research["url"] and hits[0]["content"] == ANSWER
