"""A knowledge base rebuilt whole (issue 31 item 5, seed 003's rebuildKnowledgeIndex), through
the deployed stack: files go through the pipeline again and entries are re-chunked, with new
chunk sizes, while search keeps answering from the old chunks."""
import base64
import secrets
import time

from tests.e2e.conftest import Api, new_key, wait_for_status

GUIDE = "\n\n".join(f"Step {n}. Open valve {n} of the cooling pump, wait until the pressure reads"
                    f" {n + 2} bar, then log the reading in the maintenance book before you close it again."
                    for n in range(1, 25))


def _data(response, status=200):
    assert response.status_code == status, response.text
    return response.json()["data"]


def test_a_rebuild_rechunks_every_document_and_search_answers_throughout(local_env, api):
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Rebuilt {secrets.token_hex(3)}",
                                                     "chunking": {"chunkTokens": 400, "chunkOverlap": 20}}), 201)
    path = f"/knowledge-bases/{kb['id']}"
    _data(api.call("POST", f"{path}/documents", {"filename": "pump.md",
                                                 "content": base64.b64encode(GUIDE.encode()).decode()}), 202)
    _data(api.call("POST", f"{path}/entries", {"title": "Pump log", "content": GUIDE[:1500]}), 201)
    wait_for_status(api, kb["id"], "pump.md", wanted=("PROCESSED",))
    before = _data(api.call("GET", path))["stats"]["chunkCount"]

    rebuild = _data(api.call("POST", f"{path}/rebuild", {"chunking": {"chunkTokens": 100, "chunkOverlap": 10}}), 202)
    assert rebuild["documents"]["total"] == 2
    assert rebuild["chunking"] == {"chunkTokens": 100, "chunkOverlap": 10, "strategy": "fixed"}
    deadline, answered = time.monotonic() + 120, []
    while rebuild["status"] == "RUNNING" and time.monotonic() < deadline:
        found = _data(api.call("POST", f"{path}/search", {"query": "pressure of the cooling pump", "strategy": "keyword"}))
        answered.append(len(found["results"]))
        rebuild = _data(api.call("GET", f"{path}/rebuild"))
        time.sleep(0.3)
    assert rebuild["status"] == "SUCCEEDED", rebuild
    assert rebuild["documents"] == {"total": 2, "started": 2, "processed": 2, "failed": 0}
    assert answered and min(answered) > 0  # never a gap while the documents were re-chunked
    after = _data(api.call("GET", path))
    assert after["chunking"] == {"chunkTokens": 100, "chunkOverlap": 10, "strategy": "fixed"}
    assert after["stats"]["chunkCount"] >= before * 2, (before, after["stats"])
    assert max(r["tokens"] for r in _data(api.call("POST", f"{path}/search", {
        "query": "valve pressure", "topK": 20}))["results"]) <= 100

    assert "chunking.chunkTokens" in api.call("POST", f"{path}/rebuild", {"chunking": {"chunkTokens": 5}}).text
    assert "chunking.size" in api.call("POST", f"{path}/rebuild", {"chunking": {"size": 5}}).text
    org = f"e2e-rebuild-{secrets.token_hex(3)}"
    owner = Api(local_env["KB_API_URL"], new_key(local_env, org, "own"))
    colleague = Api(local_env["KB_API_URL"], new_key(local_env, org, "col"))
    shared = _data(owner.call("POST", "/knowledge-bases", {"name": "Shared", "visibility": "org"}), 201)
    assert colleague.call("POST", f"/knowledge-bases/{shared['id']}/rebuild", {}).status_code == 403
    assert colleague.call("GET", f"/knowledge-bases/{shared['id']}/rebuild").status_code == 404  # none yet
