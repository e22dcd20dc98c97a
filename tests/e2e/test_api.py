"""Every endpoint's success and error paths, over HTTP through the emulator."""
import base64
import time

import pytest
import requests

from tests.e2e.conftest import wait_for_status

BUCKET = "kb-documents-local"


@pytest.fixture(scope="module")
def kb(api):
    return api.call("POST", "/knowledge-bases", {"name": "API tour", "description": "d"}).json()["data"]


def _inline(api, kb, filename, text, **extra):
    body = {"filename": filename, "content": base64.b64encode(text.encode()).decode(), **extra}
    return api.call("POST", f"/knowledge-bases/{kb['id']}/documents", body)


def test_knowledge_base_crud_and_pagination(api):
    created = [api.call("POST", "/knowledge-bases", {"name": f"Page {i}"}).json()["data"] for i in range(3)]
    seen, token = [], None
    while True:
        answer = api.call("GET", "/knowledge-bases?limit=2" + (f"&nextToken={token}" if token else "")).json()["data"]
        seen += [k["id"] for k in answer["items"]]
        token = answer["nextToken"]
        if not token:
            break
    assert {k["id"] for k in created} <= set(seen) and len(seen) == len(set(seen))
    kb_id = created[0]["id"]
    patched = api.call("PATCH", f"/knowledge-bases/{kb_id}", {"name": "Renamed", "visibility": "org"})
    assert patched.status_code == 200 and patched.json()["data"]["name"] == "Renamed"
    assert patched.json()["data"]["visibility"] == "org"
    bad = api.call("PATCH", f"/knowledge-bases/{kb_id}", {"embedding": {"provider": "openai"}})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("embedding")
    bad = api.call("PATCH", f"/knowledge-bases/{kb_id}", {"visibility": "everyone"})
    assert bad.status_code == 400 and "visibility" in bad.json()["error"]["message"]
    for kb in created:
        assert api.call("DELETE", f"/knowledge-bases/{kb['id']}").status_code == 200
    assert api.call("PATCH", f"/knowledge-bases/{kb_id}", {"name": "x"}).status_code == 404


def test_create_validates_embedding_and_chunking(api):
    answer = api.call("POST", "/knowledge-bases", {"name": "x", "chunking": {"chunkTokens": 10}})
    assert answer.status_code == 400 and answer.json()["error"]["message"].startswith("chunking.chunkTokens")
    answer = api.call("POST", "/knowledge-bases", {"name": "x", "embedding": {"provider": "nope"}})
    assert answer.status_code == 400 and answer.json()["error"]["message"].startswith("embedding.provider")


def test_inline_upload_is_ingested_and_the_document_can_be_read_reindexed_and_deleted(api, kb, s3):
    answer = _inline(api, kb, "../../etc/notes.md", "# Beekeeping\n\nBees make honey from nectar.",
                     metadata={"topic": "bees", "tags": ["farm"]})
    assert answer.status_code == 202, answer.text
    doc = answer.json()["data"]["document"]
    assert doc["filename"] == "notes.md" and doc["s3Key"] == f"kb/{kb['id']}/notes.md"
    done, _ = wait_for_status(api, kb["id"], "notes.md", changed_since=doc["updatedAt"])
    assert done["status"] == "PROCESSED" and done["id"] == doc["id"]
    assert done["metadata"] == {"topic": "bees", "tags": ["farm"]}

    one = api.call("GET", f"/knowledge-bases/{kb['id']}/documents/{doc['id']}")
    assert one.status_code == 200 and one.json()["data"]["chunks"] >= 1
    assert api.call("GET", f"/knowledge-bases/{kb['id']}/documents?status=PROCESSED").json()["data"]["items"]
    assert api.call("GET", f"/knowledge-bases/{kb['id']}/documents?status=NOPE").status_code == 400

    hit = api.call("POST", f"/knowledge-bases/{kb['id']}/search",
                   {"query": "honey", "filters": {"tags": ["farm"]}, "strategy": "keyword"}).json()["data"]
    assert hit["results"][0]["metadata"]["topic"] == "bees"

    reindexed = api.call("POST", f"/knowledge-bases/{kb['id']}/documents/{doc['id']}/reindex")
    assert reindexed.status_code == 202
    again, _ = wait_for_status(api, kb["id"], "notes.md", changed_since=reindexed.json()["data"]["updatedAt"])
    assert again["status"] == "PROCESSED" and again["processedAt"] != done["processedAt"]

    assert api.call("DELETE", f"/knowledge-bases/{kb['id']}/documents/{doc['id']}").status_code == 200
    assert api.call("GET", f"/knowledge-bases/{kb['id']}/documents/{doc['id']}").status_code == 404
    assert api.call("DELETE", f"/knowledge-bases/{kb['id']}/documents/{doc['id']}").status_code == 404
    assert s3.list_objects_v2(Bucket=BUCKET, Prefix=f"kb/{kb['id']}/notes.md").get("KeyCount", 0) == 0


def test_presigned_upload(api, kb):
    text = b"Presigned uploads carry the bytes straight to S3."
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                      {"filename": "direct.txt", "contentType": "text/plain", "size": len(text)})
    assert answer.status_code == 201, answer.text
    upload = answer.json()["data"]["upload"]
    assert upload["headers"] == {"Content-Type": "text/plain", "Content-Length": str(len(text))}
    # The URL is bound to the declared size and type: other bytes are refused by S3.
    for data, content_type in ((text + b" And more.", "text/plain"), (text, "application/pdf")):
        refused = requests.put(upload["url"], data=data, headers={"Content-Type": content_type}, timeout=30)
        assert refused.status_code == 403, (content_type, len(data), refused.text[:200])
    put = requests.put(upload["url"], data=text, headers=upload["headers"], timeout=30)
    assert put.status_code == 200, put.text
    done, _ = wait_for_status(api, kb["id"], "direct.txt")
    assert done["status"] == "PROCESSED"


@pytest.mark.parametrize("body,status,code", [
    ({"filename": "virus.exe", "size": 10}, 415, "UNSUPPORTED_TYPE"),
    ({"filename": "a.pdf", "contentType": "image/png", "size": 10}, 415, "UNSUPPORTED_TYPE"),
    ({"filename": "big.pdf", "size": 500 * 1024 * 1024}, 413, "FILE_TOO_LARGE"),
    ({"filename": "a.txt"}, 400, "INVALID_INPUT"),
    ({"filename": "a.txt", "content": "***not base64***"}, 400, "INVALID_INPUT"),
    ({"filename": "..", "size": 3}, 400, "INVALID_INPUT"),
    ({"filename": "a.txt", "size": 3, "metadata": {"x": {"nested": 1}}}, 400, "INVALID_INPUT"),
])
def test_uploads_are_checked_up_front(api, kb, body, status, code):
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/documents", body)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code


def test_inline_content_over_5_mb_is_refused(api, kb):
    answer = _inline(api, kb, "huge.txt", "a" * (5 * 1024 * 1024 + 10))
    assert answer.status_code == 413


def test_entries_and_knowledge_search(api, kb):
    created = api.call("POST", f"/knowledge-bases/{kb['id']}/entries",
                       {"title": "Quarterly churn analysis", "content": "Churn fell to 2% after onboarding emails.",
                        "metadata": {"agent": "analyst"}})
    assert created.status_code == 201, created.text
    entry = created.json()["data"]
    found = api.call("GET", "/knowledge-search?q=churn%20analysis&max_results=3")
    assert found.status_code == 200
    items = found.json()["data"]
    assert items[0]["url"] == f"knowledge://entries/{entry['id']}" and items[0]["title"] == "Quarterly churn analysis"
    assert 0 <= items[0]["score"] <= 1
    assert api.call("GET", "/knowledge-search").status_code == 400
    assert api.call("GET", "/knowledge-search?q=x&max_results=100").status_code == 400
    assert api.call("POST", f"/knowledge-bases/{kb['id']}/entries", {"title": "t"}).status_code == 400


def test_multi_search_bare_query_and_search_validation(api, kb):
    other = api.call("POST", "/knowledge-bases", {"name": "Second"}).json()["data"]
    api.call("POST", f"/knowledge-bases/{other['id']}/entries", {"title": "Tides", "content": "The moon drives the tides."})
    api.call("POST", f"/knowledge-bases/{kb['id']}/entries", {"title": "Moon", "content": "The moon has no atmosphere."})
    merged = api.call("POST", "/search", {"knowledgeBaseIds": [kb["id"], other["id"]], "query": "moon", "topK": 5})
    assert merged.status_code == 200
    assert {r["knowledgeBaseId"] for r in merged.json()["data"]["results"]} == {kb["id"], other["id"]}
    assert api.call("POST", "/search", {"query": "moon"}).status_code == 400
    assert api.call("POST", "/search", {"knowledgeBaseIds": ["kb_missing"], "query": "moon"}).status_code == 404

    bare = api.call("GET", f"/knowledge-bases/{kb['id']}/query?q=moon&top_k=2")
    assert bare.status_code == 200
    assert isinstance(bare.json(), list) and set(bare.json()[0]) == {"text", "metadata"}
    assert set(bare.json()[0]["metadata"]) == {"source", "page", "path"}
    assert api.call("GET", f"/knowledge-bases/{kb['id']}/query").status_code == 400

    for body, field in (({"query": "x", "strategy": "magic"}, "strategy"), ({"query": "x", "minScore": 2}, "minScore"),
                        ({"query": "x", "filters": {"color": "red"}}, "filters.color"),
                        ({"query": "x", "prioritizeBy": "size"}, "prioritizeBy"), ({"query": ""}, "query")):
        answer = api.call("POST", f"/knowledge-bases/{kb['id']}/search", body)
        assert answer.status_code == 400 and answer.json()["error"]["message"].startswith(field), body


@pytest.mark.serial  # the stack's Redis is stopped meanwhile
def test_searches_answer_while_redis_is_stopped(api, kb):
    import sys

    from tests.conftest import ROOT

    sys.path.insert(0, str(ROOT / "localstack"))
    import services

    import secrets

    api.call("POST", f"/knowledge-bases/{kb['id']}/entries", {"title": "Otters", "content": "Otters use stones as tools."})
    query = f"otter tools {secrets.token_hex(3)}"  # never asked before: a cache miss first
    warm = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": query, "strategy": "semantic"})
    again = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": query, "strategy": "semantic"})
    assert warm.json()["data"]["metadata"]["cached"] is False
    assert again.json()["data"]["metadata"]["cached"] is True
    assert services.redis_down()
    try:
        started = time.monotonic()
        answer = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": query, "strategy": "semantic"})
        assert answer.status_code == 200
        data = answer.json()["data"]
        assert data["metadata"]["cached"] is False and data["results"][0]["source"] == "Otters"
        assert time.monotonic() - started < 30
    finally:
        services.redis_up()
    back = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "otter tools", "strategy": "semantic"})
    assert back.status_code == 200


def test_visibility_org_shares_with_colleagues_only(api, local_env, kb):
    import secrets

    from tests.e2e.conftest import Api, new_key

    org = f"e2e-shared-{secrets.token_hex(3)}"
    owner = Api(local_env["KB_API_URL"], new_key(local_env, org, "owner"))
    colleague = Api(local_env["KB_API_URL"], new_key(local_env, org, "colleague"))
    shared = owner.call("POST", "/knowledge-bases", {"name": "Team", "visibility": "org"}).json()["data"]
    private = owner.call("POST", "/knowledge-bases", {"name": "Mine"}).json()["data"]
    assert colleague.call("GET", f"/knowledge-bases/{shared['id']}").status_code == 200
    assert colleague.call("GET", f"/knowledge-bases/{private['id']}").status_code == 404
    assert api.call("GET", f"/knowledge-bases/{shared['id']}").status_code == 404
    assert api.call("DELETE", f"/knowledge-bases/{shared['id']}").status_code == 404
    assert api.call("POST", f"/knowledge-bases/{shared['id']}/entries", {"title": "x", "content": "y"}).status_code == 404


def test_a_public_knowledge_base_does_not_name_its_owner_to_other_organisations(api, stranger):
    public = api.call("POST", "/knowledge-bases", {"name": "Open data", "visibility": "public"}).json()["data"]
    assert public["ownerId"] and public["organizationId"]  # its own organisation sees them
    seen = stranger.call("GET", f"/knowledge-bases/{public['id']}").json()["data"]
    assert seen["name"] == "Open data" and "ownerId" not in seen and "organizationId" not in seen
    listed, token = [], ""
    while token is not None:
        page = stranger.call("GET", f"/knowledge-bases?limit=100{'&nextToken=' + token if token else ''}").json()["data"]
        listed, token = listed + page["items"], page["nextToken"]
    found, = [k for k in listed if k["id"] == public["id"]]
    assert "ownerId" not in found and "organizationId" not in found
    assert "ownerId" in stranger.call("POST", "/knowledge-bases", {"name": "Eve's"}).json()["data"]
    agent = stranger.call("POST", "/agents", {"name": "Eve's agent"}).json()["data"]
    available = stranger.call("GET", f"/agents/{agent['id']}/available-knowledge-bases").json()["data"]
    offered, = [k for k in available if k["id"] == public["id"]]
    assert "ownerId" not in offered and "organizationId" not in offered
