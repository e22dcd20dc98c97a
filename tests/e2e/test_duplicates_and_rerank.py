"""K different answers in the top K, and reranking as a knowledge base's default, through the
deployed stack: the HTTP search, a tool over MCP (invoke?format=mcp), /v1 vector-store search
and Bedrock's Retrieve (the emulator's Rerank keeps the order it is given and scores 1.0, 0.9 …)."""
import base64
import secrets

import pytest

from tests.e2e.conftest import wait_for_status

pytestmark = pytest.mark.e2e

STORAGE = """Storage retention
The archive keeps every nightly backup of the depot database for ninety days. After ninety days a
backup is moved to cold storage, where it is kept for seven years before it is deleted for good.
To restore a backup, open the archive console, pick the night you want and press restore; a restore
of a cold backup takes up to twelve hours, because the files are read back from tape first."""
CHARGING = """Charging the buses
Every electric bus of the depot fleet is plugged in overnight at one of the twenty chargers in the
north hall. A charger delivers up to 150 kW and fills an empty battery in about four hours. Drivers
report a charger that shows a red light to the night supervisor, who moves the bus to a free bay and
logs the fault so that the electricians can repair the charger before the morning shift starts."""
# a line of CHARGING replaced: the same answer, nearly
CHARGING_EDITED = CHARGING.replace(
    "north hall. A charger delivers up to 150 kW and fills an empty battery in about four",
    "north hall since the 2024 refit; each charger is rated 150 kW and needs about four")
CANTEEN = """Canteen opening hours
The depot canteen serves breakfast from six to nine and lunch from noon to two. On public holidays it
opens for lunch only. Hot meals are paid for with the staff card; the coffee machine in the night
drivers' room is free and is refilled by the cleaning team every evening."""
DOCUMENTS = {
    "handbook/storage.txt": STORAGE,
    "wiki/backups/storage.txt": STORAGE,         # the same text under another path
    "handbook/charging.md": CHARGING,
    "notes/charging-2024.md": CHARGING_EDITED,   # a line changed
    "handbook/canteen.txt": CANTEEN,             # a different passage
}
PAIRS = [{"handbook/storage.txt", "wiki/backups/storage.txt"}, {"handbook/charging.md", "notes/charging-2024.md"}]
QUERY = "depot backups chargers canteen"


def _upload(api, kb_id: str, documents: dict) -> dict[str, str]:
    for path, text in documents.items():
        answer = api.call("POST", f"/knowledge-bases/{kb_id}/documents",
                          {"path": path, "content": base64.b64encode(text.encode()).decode()})
        assert answer.status_code == 202, answer.text
    ids = {}
    for path in documents:
        doc, _ = wait_for_status(api, kb_id, path)
        assert doc["status"] == "PROCESSED", doc
        ids[path] = doc["id"]
    return ids


@pytest.fixture(scope="module")
def depot(api):
    kb = api.call("POST", "/knowledge-bases", {"name": f"Depot {secrets.token_hex(3)}"}).json()["data"]
    ids = _upload(api, kb["id"], DOCUMENTS)
    agent = api.call("POST", "/agents", {"name": "Depot helper"}).json()["data"]
    linked = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                      {"quickAdd": True, "knowledgeBaseId": kb["id"], "defaultMinScore": 0})
    assert linked.status_code == 200, linked.text
    tool = linked.json()["data"]["tool"]
    yield kb, ids, agent, tool
    api.call("DELETE", f"/agents/{agent['id']}")
    api.call("DELETE", f"/knowledge-bases/{kb['id']}")


def _search(api, kb_id: str, **body) -> dict:
    answer = api.call("POST", f"/knowledge-bases/{kb_id}/search", {"query": QUERY, "topK": 5, **body})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def _check_groups(kept_and_others: list[tuple[str, list[str]]]) -> None:
    """Each of the five paths answered once: the two pairs kept once, each naming the other."""
    assert len(kept_and_others) == 3, kept_and_others
    groups = [{kept, *others} for kept, others in kept_and_others]
    assert all(len(g) == len(others) + 1 for g, (_, others) in zip(groups, kept_and_others))
    assert sorted(map(sorted, groups)) == sorted(map(sorted, [*PAIRS, {"handbook/canteen.txt"}]))


def test_http_search_answers_each_text_once_naming_the_other_paths(api, depot):
    kb, ids, _, _ = depot
    for strategy in ("hybrid", "semantic", "keyword"):
        results = _search(api, kb["id"], strategy=strategy)["results"]
        _check_groups([(r["path"], [a["path"] for a in r["alsoIn"]]) for r in results])
        assert [r["rank"] for r in results] == [1, 2, 3]
        for r in results:
            for also in r["alsoIn"]:
                assert also["documentId"] == ids[also["path"]] and also["knowledgeBaseId"] == kb["id"]
                assert also["source"] == also["path"].rsplit("/", 1)[-1] and also["chunkId"].startswith("chunk_")
            assert r["alsoIn"] or r["path"] == "handbook/canteen.txt"
    # the bare answer agent workers read names them too
    bare = api.call("GET", f"/knowledge-bases/{kb['id']}/query", params={"q": QUERY, "top_k": 5}).json()
    _check_groups([(b["metadata"]["path"], b["metadata"].get("alsoIn", [])) for b in bare])
    # the same answer again, from the results cache: alsoIn kept
    first = _search(api, kb["id"], strategy="semantic")
    again = _search(api, kb["id"], strategy="semantic")
    assert again["metadata"]["resultsCached"] is True
    assert [r["alsoIn"] for r in again["results"]] == [r["alsoIn"] for r in first["results"]]


def test_a_tool_over_mcp_answers_each_text_once(api, depot):
    _, _, agent, tool = depot
    answer = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke?format=mcp",
                      {"query": QUERY, "topK": 5})
    assert answer.status_code == 200, answer.text
    result = answer.json()  # MCP's CallToolResult
    passages = result["structuredContent"]["results"]
    _check_groups([(p["path"], [a["path"] for a in p.get("alsoIn", [])]) for p in passages])
    text = result["content"][0]["text"]
    for p in passages:
        for also in p.get("alsoIn", []):
            assert f"also in {also['path']}" in text
    assert "alsoIn" not in next(p for p in passages if p["path"] == "handbook/canteen.txt")


def test_v1_vector_store_search_names_the_other_files(api, depot):
    kb, ids, _, _ = depot
    answer = api.call("POST", f"/v1/vector_stores/{kb['id']}/search", {"query": QUERY, "max_num_results": 5})
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    by_id = {doc_id: path for path, doc_id in ids.items()}
    _check_groups([(by_id[d["file_id"]], [by_id[f] for f in d["attributes"]["also_in"].split(",")]
                    if "also_in" in d["attributes"] else []) for d in data])


def test_bedrock_retrieve_names_the_other_sources(api, depot, local_env):
    kb, _, _, _ = depot
    answer = api.call("POST", f"/knowledgebases/{kb['id']}/retrieve", {
        "retrievalQuery": {"text": QUERY},
        "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 5}}})
    assert answer.status_code == 200, answer.text
    prefix = f"s3://{local_env['KB_BUCKET']}/kb/{kb['id']}/"
    results = answer.json()["retrievalResults"]
    _check_groups([(r["location"]["s3Location"]["uri"].removeprefix(prefix),
                    [uri.removeprefix(prefix) for uri in r["metadata"].get("alsoIn", [])]) for r in results])


# ---- reranking as a knowledge base's default ------------------------------------------------

def test_a_knowledge_base_reranks_every_search_that_does_not_say(api):
    bad = api.call("POST", "/knowledge-bases", {"name": "x", "search": {"rerank": "yes"}})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("search.rerank"), bad.text
    bad = api.call("POST", "/knowledge-bases", {"name": "x", "search": {"reranker": True}})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("search.reranker"), bad.text
    answer = api.call("POST", "/knowledge-bases",
                      {"name": f"Reranked {secrets.token_hex(3)}", "search": {"rerank": True}})
    assert answer.status_code == 201, answer.text
    kb = answer.json()["data"]
    agent = None
    try:
        assert kb["search"] == {"rerank": True}
        _upload(api, kb["id"], {"handbook/storage.txt": STORAGE, "handbook/charging.md": CHARGING,
                                "handbook/canteen.txt": CANTEEN})
        # the HTTP search: reranked unless it says rerank false
        results = _search(api, kb["id"], strategy="semantic", topK=3)["results"]
        assert [r["rerankScore"] for r in results] == [1.0, 0.9, 0.8]
        plain = _search(api, kb["id"], strategy="semantic", topK=3, rerank=False)["results"]
        assert all("rerankScore" not in r for r in plain)
        # Bedrock's retrieve without a rerankingConfiguration: reranked by default
        retrieve = api.call("POST", f"/knowledgebases/{kb['id']}/retrieve", {
            "retrievalQuery": {"text": QUERY},
            "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 3}}}).json()
        assert [r["score"] for r in retrieve["retrievalResults"]] == [1.0, 0.9, 0.8]
        # /v1: ranker auto follows the knowledge base, none does not rerank
        auto = api.call("POST", f"/v1/vector_stores/{kb['id']}/search", {"query": QUERY, "max_num_results": 3}).json()
        assert [d["score"] for d in auto["data"]] == [1.0, 0.9, 0.8]
        none = api.call("POST", f"/v1/vector_stores/{kb['id']}/search",
                        {"query": QUERY, "max_num_results": 3, "ranking_options": {"ranker": "none"}}).json()
        assert [d["score"] for d in none["data"]] != [1.0, 0.9, 0.8]
        # a tool linked without a rerank setting follows the knowledge base
        agent = api.call("POST", "/agents", {"name": "Reranked helper"}).json()["data"]
        linked = api.call("POST", f"/agents/{agent['id']}/knowledge-base-tools",
                          {"quickAdd": True, "knowledgeBaseId": kb["id"], "defaultMinScore": 0})
        assert linked.status_code == 200, linked.text
        tool = linked.json()["data"]["tool"]
        assert tool["config"]["rerank"] is None
        run = api.call("POST", f"/agents/{agent['id']}/tools/{tool['id']}/invoke", {"query": QUERY, "topK": 3})
        assert [p["rerankScore"] for p in run.json()["results"]] == [1.0, 0.9, 0.8], run.text
        # turned off: no search reranks unless it asks
        changed = api.call("PATCH", f"/knowledge-bases/{kb['id']}", {"search": {"rerank": False}})
        assert changed.status_code == 200 and changed.json()["data"]["search"] == {"rerank": False}, changed.text
        assert all("rerankScore" not in r for r in _search(api, kb["id"], strategy="semantic", topK=3)["results"])
        asked = _search(api, kb["id"], strategy="semantic", topK=3, rerank=True)["results"]
        assert [r["rerankScore"] for r in asked] == [1.0, 0.9, 0.8]
        bad = api.call("PATCH", f"/knowledge-bases/{kb['id']}", {"search": {"rerank": None}})
        assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("search.rerank"), bad.text
    finally:
        if agent is not None:
            api.call("DELETE", f"/agents/{agent['id']}")
        api.call("DELETE", f"/knowledge-bases/{kb['id']}")
