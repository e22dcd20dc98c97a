"""Hierarchical chunking through the deployed API: children of childTokens indexed, their parent
of up to parentTokens answered and counted against maxTokens, settings checked against the
embedding model's window, and a knowledge base made with another strategy kept as it is until a
rebuild moves it."""
import base64
import random
import secrets
import time

import pytest

from chalicelib.embeddings.tokens import count_tokens
from tests.e2e.conftest import wait_for_status

# One section of about 400 tokens: several children of 60, one parent of up to 300 around each.
MANUAL = "# Cooling pump\n\n" + " ".join(
    f"Step {n}. Open valve {n} of the cooling pump and wait until the gauge reads {n + 2} bar." for n in range(1, 25))


def _data(response, status=200):
    assert response.status_code == status, response.text
    return response.json()["data"]


def _chunks(db, kb_id: str) -> list[dict]:
    return db.execute("SELECT c.chunk_index, c.token_count FROM chunks c JOIN documents d ON d.id = c.document_id"
                      " AND c.version = d.chunks_version WHERE c.kb_id = %s AND d.kind = 'file' ORDER BY c.chunk_index",
                      (kb_id,)).fetchall()


def _ingest(api, kb_id: str) -> None:
    _data(api.call("POST", f"/knowledge-bases/{kb_id}/documents",
                   {"filename": "pump.md", "content": base64.b64encode(MANUAL.encode()).decode()}), 202)
    doc, seen = wait_for_status(api, kb_id, "pump.md")
    assert doc["status"] == "PROCESSED", (doc, seen)


@pytest.fixture(scope="module")
def hierarchical(api, db):
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Hierarchical {secrets.token_hex(3)}", "chunking": {
        "strategy": "hierarchical", "parentTokens": 300, "childTokens": 60, "chunkOverlap": 10}}), 201)
    _ingest(api, kb["id"])
    return kb


def test_children_are_indexed_and_their_parent_answered(api, db, hierarchical):
    assert hierarchical["chunking"] == {"strategy": "hierarchical", "parentTokens": 300, "childTokens": 60,
                                        "chunkOverlap": 10}
    assert _data(api.call("GET", f"/knowledge-bases/{hierarchical['id']}"))["chunking"] == hierarchical["chunking"]
    rows = _chunks(db, hierarchical["id"])
    assert len(rows) >= 6 and max(r["token_count"] for r in rows) <= 60
    found = _data(api.call("POST", f"/knowledge-bases/{hierarchical['id']}/search",
                           {"query": "valve 12 pressure", "strategy": "keyword", "topK": 1}))
    passage = found["results"][0]
    first, last = passage["parent"]["firstChunkIndex"], passage["parent"]["lastChunkIndex"]
    assert first <= passage["chunkIndex"] <= last and last - first >= 2
    assert "valve 12 " in passage["content"] and 60 < passage["tokens"] <= 300


def test_max_tokens_counts_the_parent_returned(api, hierarchical):
    path = f"/knowledge-bases/{hierarchical['id']}/search"
    whole = _data(api.call("POST", path, {"query": "cooling pump valve gauge", "strategy": "keyword", "topK": 3}))
    for passage in whole["results"]:  # the text answered, its children's shared overlap once
        assert passage["tokens"] == count_tokens(passage["content"])
    assert whole["metadata"]["totalTokensUsed"] == sum(p["tokens"] for p in whole["results"])
    first = whole["results"][0]["tokens"]
    cut = _data(api.call("POST", path, {"query": "cooling pump valve gauge", "strategy": "keyword", "topK": 3,
                                        "maxTokens": first + 50}))
    assert cut["metadata"]["totalTokensUsed"] <= first + 50 and cut["results"][0]["tokens"] == first
    assert len(cut["results"]) == 1 or cut["results"][1]["truncated"]


def test_children_crowding_the_top_still_make_as_many_passages_as_asked(api):
    # Six pages in other words, each using "calibration" less often than the one before: the
    # best keyword hits a search of five reads first are the first two pages' children, which
    # answer as two or three parents; the lists are then read deeper for the other pages.
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Crowded {secrets.token_hex(3)}", "chunking": {
        "strategy": "hierarchical", "parentTokens": 300, "childTokens": 60, "chunkOverlap": 10}}), 201)
    words = ("river stone lamp orbit maple cotton signal ladder harbor violet copper meadow rocket velvet"
             " canyon pillow garlic tunnel marble falcon winter cactus saddle mirror").split()
    for page in range(6):
        rng = random.Random(page)
        text = " ".join(" ".join(rng.sample(words, 8) + ["calibration"] * (6 - page)) + "." for _ in range(10))
        _data(api.call("POST", f"/knowledge-bases/{kb['id']}/documents", {
            "filename": f"page{page}.md", "content": base64.b64encode(f"# Page {page}\n\n{text}".encode()).decode()}), 202)
    for page in range(6):
        doc, seen = wait_for_status(api, kb["id"], f"page{page}.md")
        assert doc["status"] == "PROCESSED", (doc, seen)
    for rerank in (False, True):  # the reranker is sent 40 hits and answers as many as parents take
        found = _data(api.call("POST", f"/knowledge-bases/{kb['id']}/search",
                               {"query": "calibration", "strategy": "keyword", "topK": 5, "rerank": rerank}))["results"]
        assert len(found) == 5, rerank
        assert len({(p["documentId"], p["parent"]["firstChunkIndex"]) for p in found}) == 5
        assert {p["source"] for p in found} >= {"page0.md", "page1.md", "page2.md"}


@pytest.mark.parametrize("chunking, field", [
    ({"strategy": "hierarchical", "parentTokens": 500, "childTokens": 215}, "chunking.childTokens"),
    ({"strategy": "hierarchical", "parentTokens": 100, "childTokens": 200}, "chunking.parentTokens"),
    ({"strategy": "hierarchical", "chunkTokens": 300}, "chunking.chunkTokens"),
    ({"strategy": "fixed", "parentTokens": 600}, "chunking.parentTokens"),
    ({"parentTokens": 600, "childTokens": 100, "chunkOverlap": 51}, "chunking.chunkOverlap"),
    ({"strategy": "hierarchical", "children": 100}, "chunking.children"),
])
def test_settings_the_model_cannot_hold_are_a_400_naming_the_field(api, chunking, field):
    answer = api.call("POST", "/knowledge-bases", {"name": "x", "chunking": chunking})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"].startswith(f"{field}:")


def test_a_knowledge_base_keeps_its_chunking_until_a_rebuild_moves_it_to_hierarchical(api, db):
    # what every knowledge base made before hierarchical chunking has: fixed (or semantic) sizes
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Older {secrets.token_hex(3)}",
                                                     "chunking": {"chunkTokens": 400, "chunkOverlap": 0}}), 201)
    path = f"/knowledge-bases/{kb['id']}"
    _ingest(api, kb["id"])
    assert db.execute("SELECT child_tokens FROM knowledge_bases WHERE id = %s", (kb["id"],)).fetchone()["child_tokens"] is None
    kept = _data(api.call("GET", path))
    assert kept["chunking"] == {"chunkTokens": 400, "chunkOverlap": 0, "strategy": "fixed"}
    assert min(r["token_count"] for r in _chunks(db, kb["id"])[:-1]) > 100  # cut to the model's window, not 60

    assert api.call("POST", f"{path}/rebuild", {"chunking": {"strategy": "hierarchical", "childTokens": 300}}
                    ).json()["error"]["message"].startswith("chunking.childTokens:")
    rebuild = _data(api.call("POST", f"{path}/rebuild", {"chunking": {
        "strategy": "hierarchical", "parentTokens": 300, "childTokens": 60}}), 202)
    # a new strategy takes its defaults for what the request leaves out: overlap 50, at most half a child
    assert rebuild["chunking"] == {"strategy": "hierarchical", "parentTokens": 300, "childTokens": 60,
                                   "chunkOverlap": 30}
    deadline = time.monotonic() + 120
    while rebuild["status"] == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
        rebuild = _data(api.call("GET", f"{path}/rebuild"))
    assert rebuild["status"] == "SUCCEEDED", rebuild
    assert _data(api.call("GET", path))["chunking"] == rebuild["chunking"]
    rows = _chunks(db, kb["id"])
    assert len(rows) >= 6 and max(r["token_count"] for r in rows) <= 60
