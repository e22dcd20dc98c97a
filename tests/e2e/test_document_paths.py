"""A document is its path (issue 27): folders keep same-named files apart, a re-upload says
what it did, and the list pages, filters and sorts. Over HTTP through the emulator."""
import base64
import hashlib

import pytest

from tests.e2e.conftest import list_documents, wait_for_status

BUCKET = "kb-documents-local"


@pytest.fixture(scope="module")
def kb(api):
    return api.call("POST", "/knowledge-bases", {"name": "Paths"}).json()["data"]


def _put(api, kb, path, text, **extra):
    body = {"path": path, "content": base64.b64encode(text.encode()).decode(), **extra}
    return api.call("POST", f"/knowledge-bases/{kb['id']}/documents", body)


def test_same_name_in_two_folders_is_two_documents(api, kb):
    first = _put(api, kb, "guides/install/index.html", "<h1>Install</h1><p>Run the installer with sudo.</p>")
    second = _put(api, kb, "guides/upgrade/index.html", "<h1>Upgrade</h1><p>Stop the service first.</p>")
    assert first.status_code == second.status_code == 202, (first.text, second.text)
    a, b = first.json()["data"], second.json()["data"]
    assert a["result"] == b["result"] == "added"
    assert a["document"]["id"] != b["document"]["id"]
    assert (a["document"]["path"], a["document"]["filename"]) == ("guides/install/index.html", "index.html")
    assert a["document"]["s3Key"] == f"kb/{kb['id']}/guides/install/index.html"
    for path in ("guides/install/index.html", "guides/upgrade/index.html"):
        done, _ = wait_for_status(api, kb["id"], path)
        assert done["status"] == "PROCESSED" and done["path"] == path
    # each answers by its own path, and a folder is a prefix
    one = api.call("GET", f"/knowledge-bases/{kb['id']}/documents", params={"path": "guides/upgrade/index.html"})
    assert [d["id"] for d in one.json()["data"]["items"]] == [b["document"]["id"]]
    folder = api.call("GET", f"/knowledge-bases/{kb['id']}/documents", params={"prefix": "guides/install/"})
    assert [d["path"] for d in folder.json()["data"]["items"]] == ["guides/install/index.html"]


def test_a_reupload_says_added_updated_or_unchanged(api, kb):
    text = "Pumps are primed before the first start."
    added = _put(api, kb, "manuals/pump.txt", text)
    assert added.status_code == 202 and added.json()["data"]["result"] == "added"
    doc = added.json()["data"]["document"]
    done, _ = wait_for_status(api, kb["id"], "manuals/pump.txt")
    assert done["status"] == "PROCESSED"
    # the same bytes at the same path, announced by their hash: nothing to send, nothing to redo
    presign = api.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                       {"path": "manuals/pump.txt", "size": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()})
    assert presign.status_code == 200, presign.text
    assert presign.json()["data"]["result"] == "unchanged" and "upload" not in presign.json()["data"]
    assert presign.json()["data"]["document"]["updatedAt"] == done["updatedAt"]
    inline = _put(api, kb, "manuals/pump.txt", text)
    assert inline.status_code == 200 and inline.json()["data"]["result"] == "unchanged"
    # new bytes: the same document, a new version
    changed = _put(api, kb, "manuals/pump.txt", text + " Check the seal yearly.")
    assert changed.status_code == 202 and changed.json()["data"]["result"] == "updated"
    assert changed.json()["data"]["document"]["id"] == doc["id"]
    again, _ = wait_for_status(api, kb["id"], "manuals/pump.txt", changed_since=done["updatedAt"])
    assert again["status"] == "PROCESSED" and again["contentHash"] != done["contentHash"]
    # new metadata with the same bytes is an update too (the chunks take it)
    meta = _put(api, kb, "manuals/pump.txt", text + " Check the seal yearly.", metadata={"team": "ops"})
    assert meta.json()["data"]["result"] == "updated"
    # the old filename field still names a document by its last segment, as before paths
    legacy = api.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                      {"filename": "local/dir/legacy.md", "content": base64.b64encode(b"# Legacy").decode()})
    assert legacy.status_code == 202 and legacy.json()["data"]["document"]["path"] == "legacy.md"


def test_a_file_dropped_in_a_folder_of_the_bucket_keeps_its_path(api, kb, s3):
    s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/deep/er/README", Body=b"Plain text without an extension.")
    done, _ = wait_for_status(api, kb["id"], "deep/er/README")
    assert done["status"] == "PROCESSED" and done["filename"] == "README"


@pytest.mark.parametrize("body, code, field", [
    ({"path": "a/../../etc/passwd", "size": 3}, "INVALID_INPUT", "path"),
    ({"path": "a/./b.txt", "size": 3}, "INVALID_INPUT", "path"),
    ({"path": "///", "size": 3}, "INVALID_INPUT", "path"),
    ({"path": "x/" * 600 + "a.txt", "size": 3}, "INVALID_INPUT", "path"),
    ({"path": "photos/cat.png", "size": 3}, "UNSUPPORTED_TYPE", "path"),
    ({"path": "notes.txt", "size": 3, "sha256": "xyz"}, "INVALID_INPUT", "sha256"),
    ({"path": "notes.txt", "size": 3, "contentType": "not a type"}, "INVALID_INPUT", "contentType"),
])
def test_bad_paths_are_refused_naming_the_field(api, kb, body, code, field):
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/documents", body)
    assert answer.status_code in (400, 415), answer.text
    assert answer.json()["error"]["code"] == code and answer.json()["error"]["message"].startswith(field)


def test_the_list_pages_filters_and_sorts(api):
    kb = api.call("POST", "/knowledge-bases", {"name": "Pages"}).json()["data"]
    paths = ["b/two.txt", "a/one.txt", "c/three.txt", "a/four.txt", "b/five.txt"]
    for i, path in enumerate(paths):
        assert _put(api, kb, path, f"Document number {i} about topic {path}.").status_code == 202
    for path in paths:
        wait_for_status(api, kb["id"], path)
    base = f"/knowledge-bases/{kb['id']}/documents"

    def pages(**params):
        seen, token, count = [], None, 0
        while True:
            answer = api.call("GET", base, params={**params, **({"nextToken": token} if token else {})})
            assert answer.status_code == 200, answer.text
            data = answer.json()["data"]
            assert len(data["items"]) <= params.get("limit", 100)
            seen += data["items"]
            count += 1
            token = data["nextToken"]
            if not token:
                return seen, count

    by_path, count = pages(limit=2)
    assert [d["path"] for d in by_path] == sorted(paths) and count == 3
    newest, _ = pages(limit=2, sort="updatedAt")
    stamps = [d["updatedAt"] for d in newest]
    assert stamps == sorted(stamps, reverse=True) and len(newest) == len(paths)
    in_a, _ = pages(limit=1, prefix="a/")
    assert [d["path"] for d in in_a] == ["a/four.txt", "a/one.txt"]
    by_status, _ = pages(limit=2, sort="status", status="PROCESSED")
    assert [d["path"] for d in by_status] == sorted(paths)
    assert list_documents(api, kb["id"], prefix="a") == in_a  # a prefix that is not a folder
    # a token answers only the list and sort it came from
    token = api.call("GET", base, params={"limit": 2}).json()["data"]["nextToken"]
    for params, field in (({"nextToken": token, "sort": "updatedAt"}, "nextToken"),
                          ({"nextToken": "garbage!"}, "nextToken"), ({"limit": 1001}, "limit"),
                          ({"limit": 0}, "limit"), ({"sort": "size"}, "sort"), ({"status": "DONE"}, "status"),
                          ({"colour": "red"}, "colour"), ({"prefix": "../"}, "prefix")):
        answer = api.call("GET", base, params=params)
        assert answer.status_code == 400 and answer.json()["error"]["message"].startswith(field), answer.text
    other = api.call("POST", "/knowledge-bases", {"name": "Other"}).json()["data"]
    answer = api.call("GET", f"/knowledge-bases/{other['id']}/documents", params={"nextToken": token})
    assert answer.status_code == 400 and "another knowledge base" in answer.json()["error"]["message"]


def test_the_same_bytes_while_a_run_reads_them_are_unchanged_and_start_nothing(api, kb, db):
    """A second `kb docs upload` of a folder still being ingested (a --wait that timed out) sends
    nothing again for a file whose bytes a run is ingesting; other bytes are an update."""
    text = "Valves are closed before the pump is drained."
    _put(api, kb, "manuals/valve.txt", text)
    done, _ = wait_for_status(api, kb["id"], "manuals/valve.txt")
    assert done["status"] == "PROCESSED"
    # as a run that has read the bytes leaves it: PROCESSING, its content_hash those bytes', not yet indexed
    db.execute("UPDATE documents SET status = 'PROCESSING', indexed_hash = NULL WHERE id = %s", (done["id"],))
    try:
        same = api.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                        {"path": "manuals/valve.txt", "size": len(text),
                         "sha256": hashlib.sha256(text.encode()).hexdigest()})
        assert same.status_code == 200 and same.json()["data"]["result"] == "unchanged", same.text
        assert same.json()["data"]["document"]["status"] == "PROCESSING"
        other = api.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                         {"path": "manuals/valve.txt", "size": 9, "sha256": hashlib.sha256(b"new bytes").hexdigest()})
        assert other.status_code == 201 and other.json()["data"]["result"] == "updated", other.text
    finally:
        db.execute("UPDATE documents SET status = 'PROCESSED', indexed_hash = content_hash WHERE id = %s",
                   (done["id"],))
