"""Issue 31's search extras through the deployed API: batch queries, the results cache and
what drops it, summaries with the chunk to fetch, the userId filter, the retrieval event."""
import base64
import hashlib
import json
import secrets
import time

import boto3
import pytest

from tests.e2e.conftest import Api, new_key, wait_for_status

LONG = ("The cooling pump resets when its red lever is held for ten seconds. After a reset the pump"
        " primes itself, which takes about two minutes, and the green lamp blinks until the pressure"
        " holds. If the lamp stays red the impeller is blocked and the housing must be opened by a"
        " technician with the service key.")


@pytest.fixture(scope="module")
def world(local_env):
    """An organisation knowledge base with one entry by each of two users of the organisation."""
    org = f"e2e-extras-{secrets.token_hex(4)}"
    url = local_env["KB_API_URL"]
    ada = Api(url, new_key(local_env, org, "ada"))  # the first user: admin
    ed = Api(url, new_key(local_env, org, "ed", role="editor"))
    kb = ada.call("POST", "/knowledge-bases", {"name": "Extras", "visibility": "org"}).json()["data"]["id"]
    posted = {}
    for who, api, title, content in (("ada", ada, "Pump reset", LONG),
                                     ("ed", ed, "Pump lamp", "The pump's green lamp blinks while it primes.")):
        answer = api.call("POST", f"/knowledge-bases/{kb}/entries",
                          {"title": title, "content": content, "level": "organisation"})
        assert answer.status_code == 201, answer.text
        entry = answer.json()["data"]["id"]
        user = api.call("GET", f"/knowledge-bases/{kb}/documents/{entry}").json()["data"]["createdBy"]
        posted[who] = {"entry": entry, "user": user}
    return {"ada": ada, "ed": ed, "kb": kb, "posted": posted}


def _search(api: Api, kb: str, query: str, **options) -> dict:
    answer = api.call("POST", "/search", {"knowledgeBaseIds": [kb], "query": query, **options})
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def test_a_batch_answers_each_query_in_its_place_with_its_own_error(world):
    kb, ada = world["kb"], world["ada"]
    queries = [{"knowledgeBaseIds": [kb], "query": "how do I reset the pump", "topK": 1},
               {"knowledgeBaseIds": ["kb_absent"], "query": "pump"},
               {"knowledgeBaseIds": [kb], "query": "pump", "topK": 99},
               "not a query",
               {"knowledgeBaseIds": [kb], "query": "green lamp", "strategy": "keyword", "topK": 2}]
    answer = ada.call("POST", "/search/batch", {"queries": queries})
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    items = data["results"]
    assert [i["index"] for i in items] == [0, 1, 2, 3, 4]
    assert [i["success"] for i in items] == [True, False, False, False, True]
    assert data["metadata"] == {"queryCount": 5, "succeeded": 2, "failed": 3}
    assert (items[1]["status"], items[1]["error"]["code"]) == (404, "NOT_FOUND")
    assert items[2]["status"] == 400 and items[2]["error"]["message"].startswith("topK:")
    assert items[3]["status"] == 400 and items[3]["error"]["message"].startswith("queries[3]:")
    # Each answer is the single search's.
    single = _search(ada, kb, "green lamp", strategy="keyword", topK=2, debug=True)
    assert [r["chunkId"] for r in items[4]["data"]["results"]] == [r["chunkId"] for r in single["results"]]
    assert items[0]["data"]["results"][0]["source"] == "Pump reset"


@pytest.mark.parametrize("body, field", [
    ({"queries": []}, "queries"),
    ({"queries": [{"knowledgeBaseIds": ["kb_x"], "query": "q"}] * 21}, "queries"),
    ({"queries": [{"knowledgeBaseIds": ["kb_x"], "query": "q"}], "topK": 3}, "topK"),
    ({"query": "q"}, "query"),
])
def test_a_malformed_batch_is_a_400_naming_the_field(world, body, field):
    answer = world["ada"].call("POST", "/search/batch", body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"].startswith(f"{field}:")


def test_results_are_cached_per_user_and_dropped_by_a_write_to_the_knowledge_base(world):
    kb, ada, ed = world["kb"], world["ada"], world["ed"]
    query = f"pump priming {secrets.token_hex(3)}"
    first = _search(ada, kb, query)
    again = _search(ada, kb, query)
    assert (first["metadata"]["resultsCached"], again["metadata"]["resultsCached"]) == (False, True)
    assert again["results"] == first["results"]
    assert _search(ada, kb, query, debug=True)["metadata"]["resultsCached"] is False
    assert _search(ada, kb, query, topK=2)["metadata"]["resultsCached"] is False  # other options, other answer
    assert _search(ed, kb, query)["metadata"]["resultsCached"] is False  # another user's scope
    # A new entry drops the cached answers of its knowledge base ...
    added = ada.call("POST", f"/knowledge-bases/{kb}/entries", {
        "title": "Priming", "content": f"Priming the pump ({query}) needs the valve open.",
        "level": "organisation"}).json()["data"]["id"]
    after_add = _search(ada, kb, query)
    assert after_add["metadata"]["resultsCached"] is False
    assert "Priming" in [r["source"] for r in after_add["results"]]
    assert _search(ada, kb, query)["metadata"]["resultsCached"] is True
    # ... and so does a deletion.
    assert ada.call("DELETE", f"/knowledge-bases/{kb}/documents/{added}").status_code in (200, 204)
    after_delete = _search(ada, kb, query)
    assert after_delete["metadata"]["resultsCached"] is False
    assert "Priming" not in [r["source"] for r in after_delete["results"]]
    # ... and so does a file the pipeline stores.
    upload = ada.call("POST", f"/knowledge-bases/{kb}/documents", {
        "filename": "priming.txt",
        "content": base64.b64encode(f"Priming notes: {query} takes two minutes.".encode()).decode()})
    assert upload.status_code in (201, 202), upload.text
    wait_for_status(ada, kb, "priming.txt", wanted=("PROCESSED",), timeout=60)
    after_store = _search(ada, kb, query)
    assert after_store["metadata"]["resultsCached"] is False
    assert "priming.txt" in [r["source"] for r in after_store["results"]]


def test_a_changed_entry_level_drops_the_cached_answers_of_its_readers(world):
    kb, ada, ed, entry = world["kb"], world["ada"], world["ed"], world["posted"]["ada"]["entry"]
    query = f"red lever {secrets.token_hex(3)}"
    sources = lambda answer: [r["source"] for r in answer["results"]]  # noqa: E731
    assert "Pump reset" in sources(_search(ed, kb, query))
    assert _search(ed, kb, query)["metadata"]["resultsCached"] is True
    path = f"/knowledge-bases/{kb}/entries/{entry}"
    assert ada.call("PATCH", path, {"level": "individual"}).status_code == 200
    try:
        hidden = _search(ed, kb, query)
        assert hidden["metadata"]["resultsCached"] is False and "Pump reset" not in sources(hidden)
    finally:
        assert ada.call("PATCH", path, {"level": "organisation"}).status_code == 200
    assert "Pump reset" in sources(_search(ed, kb, query))


def test_summaries_answer_the_first_sentence_and_the_chunk_gives_the_whole_text(world, stranger):
    kb, ada = world["kb"], world["ada"]
    found = _search(ada, kb, "what happens when the pump lamp stays red", fields=["summary"], topK=2)
    hit = next(r for r in found["results"] if r["source"] == "Pump reset")
    assert "content" not in hit
    assert hit["summary"] == "The cooling pump resets when its red lever is held for ten seconds."
    assert hit["tokens"] <= 40
    chunk = ada.call("GET", f"/knowledge-bases/{kb}/chunks/{hit['chunkId']}")
    assert chunk.status_code == 200, chunk.text
    assert chunk.json()["data"]["content"] == LONG
    assert chunk.json()["data"]["documentId"] == world["posted"]["ada"]["entry"]
    for api, path in ((stranger, f"/knowledge-bases/{kb}/chunks/{hit['chunkId']}"),  # another organisation
                      (ada, f"/knowledge-bases/{kb}/chunks/chunk_999999999999"),
                      (ada, f"/knowledge-bases/{kb}/chunks/not-a-chunk")):
        assert api.call("GET", path).status_code == 404, path
    bad = ada.call("POST", f"/knowledge-bases/{kb}/search", {"query": "pump", "fields": ["title"]})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("fields:")


def test_the_user_id_filter_keeps_what_that_user_wrote(world):
    kb, ed, posted = world["kb"], world["ed"], world["posted"]
    for who, other in (("ada", "ed"), ("ed", "ada")):
        found = {r["documentId"] for r in _search(ed, kb, "pump lamp", filters={"userId": posted[who]["user"]},
                                                  topK=20)["results"]}
        assert posted[who]["entry"] in found and posted[other]["entry"] not in found, who
    assert _search(ed, kb, "pump lamp", filters={"userId": "user_nobody"})["resultCount"] == 0
    bad = ed.call("POST", "/search", {"knowledgeBaseIds": [kb], "query": "pump", "filters": {"userId": 7}})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("filters.userId:")


def test_every_search_logs_the_retrieval_event_without_the_query(world, local_env):
    query = f"lever held {secrets.token_hex(4)}"
    _search(world["ada"], world["kb"], query, strategy="semantic")
    _search(world["ada"], world["kb"], query, strategy="semantic")
    digest = hashlib.sha256(query.encode("utf-8")).hexdigest()[:16]
    logs = boto3.client("logs", endpoint_url=local_env["AWS_ENDPOINT_URL"], region_name=local_env["AWS_DEFAULT_REGION"],
                        aws_access_key_id=local_env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=local_env["AWS_SECRET_ACCESS_KEY"])
    events, deadline = [], time.monotonic() + 10
    while len(events) < 2 and time.monotonic() < deadline:
        found = logs.filter_log_events(logGroupName=f"/aws/lambda/{local_env['KB_API_FUNCTION']}",
                                       filterPattern=digest)["events"]
        events = [json.loads(e["message"]) for e in found if e["message"].startswith("{")]
        time.sleep(0.2 if len(events) < 2 else 0)
    assert len(events) == 2, events
    assert all(query not in json.dumps(e) for e in events)
    assert [e["resultsCached"] for e in events] == [False, True]
    for event in events:
        assert event["event"] == "knowledge:searched" and event["queryHash"] == digest
        assert event["strategy"] == "semantic" and event["resultCount"] >= 1
        assert event["SearchResultCount"] == [float(event["resultCount"])]
        assert 0 < event["averageSimilarity"] <= 1 and event["durationMs"] >= 0
        assert event["SearchResultsCached"] == [float(event["resultsCached"])]
