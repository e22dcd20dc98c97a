"""The vertical slice through the emulator: create a knowledge base over HTTP, drop
a file into S3, watch it ingest, search it over HTTP and through kb_search."""
import pytest

from tests.e2e.conftest import invoke, wait_for_status

BUCKET = "kb-documents-local"
HANDBOOK = """# Travel policy

## Booking trains

Employees book train tickets through the internal travel desk at least three days ahead.
First class is allowed for journeys longer than four hours. Seat reservations are always booked
with the ticket, and a missed connection is rebooked by the desk at no cost to the traveller.

## Expenses

Meal expenses are reimbursed up to forty euros per day on presentation of receipts.
Hotels are booked by the travel desk too, within the city's rate for the season; taxis only
when no public transport runs (each section over the chunk floor, so each is a chunk of its own).
"""
NOTES = "The lighthouse keeper logs the weather every morning at six.\nFog closes the harbour."


@pytest.fixture(scope="module")
def kb(api):
    answer = api.call("POST", "/knowledge-bases", {"name": "Handbook", "description": "HR rules"})
    assert answer.status_code == 201, answer.text
    return answer.json()["data"]


def test_a_dropped_file_becomes_searchable(api, kb, s3, lambda_client):
    assert kb["id"].startswith("kb_")
    s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/policies/travel.md", Body=HANDBOOK.encode())
    doc, seen = wait_for_status(api, kb["id"], "travel.md")
    assert doc["status"] == "PROCESSED", doc["error"]
    assert seen[-1] == "PROCESSED" and set(seen) <= {"PENDING", "PROCESSING", "PROCESSED"}
    assert doc["id"].startswith("doc_") and doc["chunks"] >= 1 and doc["contentType"] == "text/markdown"

    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/search",
                      {"query": "How much can I spend on food per day?", "topK": 2})
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    top = data["results"][0]
    assert "forty euros" in top["content"]
    assert top["source"] == "travel.md" and top["path"] == "policies/travel.md" and top["page"] is None
    assert isinstance(top["chunkIndex"], int) and 0 < top["similarity"] <= 1
    assert top["headers"][-1] == "Expenses" and top["section"] == "Travel policy > Expenses"

    direct = invoke(lambda_client, {"knowledgeBaseId": kb["id"], "query": "How much can I spend on food per day?",
                                    "topK": 2, "apiKey": api.key})
    assert direct["success"] is True
    strip = lambda rs: [(r["content"], r["source"], r["chunkIndex"], round(r["similarity"], 4)) for r in rs]
    assert strip(direct["data"]["results"]) == strip(data["results"])


def test_a_txt_file_and_its_removal(api, kb, s3):
    key = f"kb/{kb['id']}/notes/lighthouse.txt"
    s3.put_object(Bucket=BUCKET, Key=key, Body=NOTES.encode())
    doc, _ = wait_for_status(api, kb["id"], "lighthouse.txt")
    assert doc["status"] == "PROCESSED"
    hit = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "harbour fog", "topK": 1}).json()
    assert hit["data"]["results"][0]["source"] == "lighthouse.txt"

    s3.delete_object(Bucket=BUCKET, Key=key)
    import time
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        items = api.call("GET", f"/knowledge-bases/{kb['id']}/documents").json()["data"]["items"]
        if not any(d["filename"] == "lighthouse.txt" for d in items):
            break
        time.sleep(0.25)
    else:
        pytest.fail("the removed object's document is still listed")
    hit = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "harbour fog", "topK": 5}).json()
    assert all(r["source"] != "lighthouse.txt" for r in hit["data"]["results"])


def test_an_unsupported_file_fails_with_its_code(api, kb, s3):
    s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/logo.png",
                  Body=b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00")
    doc, _ = wait_for_status(api, kb["id"], "logo.png")
    assert doc["status"] == "FAILED"
    assert doc["error"]["code"] == "UNSUPPORTED_TYPE"


def test_requests_without_a_valid_key_get_401(api, kb):
    for key in (None, "kbk_not-a-real-key", "something-else"):
        answer = api.call("GET", "/knowledge-bases", key=key)
        assert answer.status_code == 401
        assert answer.json() == {"success": False, "error": {
            "code": "UNAUTHORIZED", "message": answer.json()["error"]["message"]}}
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "x"}, key=None)
    assert answer.status_code == 401


def test_bad_input_names_the_field(api, kb):
    answer = api.call("POST", "/knowledge-bases", {"description": "no name"})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "INVALID_INPUT"
    assert answer.json()["error"]["message"].startswith("name")
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "x", "topK": 50})
    assert answer.status_code == 400 and "topK" in answer.json()["error"]["message"]
    answer = api.call("POST", "/knowledge-bases", data=b"{not json", key=api.key)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "INVALID_JSON"


def test_another_tenant_gets_404_everywhere(api, stranger, kb, lambda_client):
    assert stranger.call("GET", f"/knowledge-bases/{kb['id']}").status_code == 404
    assert stranger.call("GET", f"/knowledge-bases/{kb['id']}/documents").status_code == 404
    answer = stranger.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "travel"})
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "NOT_FOUND"
    assert kb["id"] not in [k["id"] for k in stranger.call("GET", "/knowledge-bases").json()["data"]["items"]]
    direct = invoke(lambda_client, {"knowledgeBaseId": kb["id"], "query": "travel", "apiKey": stranger.key})
    assert direct["success"] is False and direct["error"]["code"] == "NOT_FOUND"
    direct = invoke(lambda_client, {"knowledgeBaseId": kb["id"], "query": "travel", "apiKey": "kbk_nope"})
    assert direct["error"]["code"] == "UNAUTHORIZED"


def test_knowledge_base_read_and_list(api, kb):
    answer = api.call("GET", f"/knowledge-bases/{kb['id']}")
    assert answer.status_code == 200
    data = answer.json()["data"]
    assert data["name"] == "Handbook" and data["embedding"]["dimension"] == 384
    assert set(data["stats"]) >= {"documentCount", "chunkCount", "totalTokens", "lastIngestedAt"}
    listing = api.call("GET", "/knowledge-bases?limit=1").json()["data"]
    assert len(listing["items"]) == 1
