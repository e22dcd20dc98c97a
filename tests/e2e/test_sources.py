"""A knowledge base's source besides its bucket prefix (issue 31 item 4, seed 003's sources),
through the deployed stack: another bucket's prefix, and a folder of the local machine,
mirrored by a sync (adds, changes, removals) into documents the pipeline ingests."""
import secrets
import time

import pytest

from tests.e2e.conftest import find_document, list_documents, wait_for_status


def _data(response, status=200):
    assert response.status_code == status, response.text
    return response.json()["data"]


def _sync(api, kb_id) -> dict:
    return _data(api.call("POST", f"/knowledge-bases/{kb_id}/sync"))["source"]


def _gone(api, kb_id, filename, timeout=60) -> None:
    deadline = time.monotonic() + timeout
    while find_document(api, kb_id, filename) is not None:
        assert time.monotonic() < deadline, f"{filename} is still a document"
        time.sleep(0.3)


def test_another_buckets_prefix_is_mirrored_adds_changes_and_removals(api, s3):
    source = f"team-source-{secrets.token_hex(4)}"
    s3.create_bucket(Bucket=source)
    s3.put_object(Bucket=source, Key="docs/pump.md", Body=b"# Pump\n\nThe pump is serviced every March.")
    s3.put_object(Bucket=source, Key="docs/valves/valve.txt", Body=b"Valve V2 opens at 3 bar.")
    s3.put_object(Bucket=source, Key="docs/draft.tmp", Body=b"not yet")
    s3.put_object(Bucket=source, Key="elsewhere/other.md", Body=b"# Other\n\nNot below the prefix.")
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Mirrored {secrets.token_hex(3)}", "source": {
        "type": "s3", "bucket": source, "prefix": "docs/", "exclude": ["*.tmp"]}}), 201)
    assert kb["source"] == {"type": "s3", "bucket": source, "prefix": "docs", "exclude": ["*.tmp"]}
    assert _sync(api, kb["id"]) == {"copied": 2, "unchanged": 0, "deleted": 0, "skipped": [], "more": False}
    wait_for_status(api, kb["id"], "pump.md", wanted=("PROCESSED",))
    valve, _ = wait_for_status(api, kb["id"], "valve.txt", wanted=("PROCESSED",))
    assert valve["path"] == "valves/valve.txt"
    # A file put into the knowledge base by other means is the knowledge base's, not the source's.
    _data(api.call("POST", f"/knowledge-bases/{kb['id']}/documents", {"filename": "own.md", "content": "IyBPd24="}), 202)

    s3.put_object(Bucket=source, Key="docs/pump.md", Body=b"# Pump\n\nThe pump is serviced every March and in September.")
    s3.delete_object(Bucket=source, Key="docs/valves/valve.txt")
    assert _sync(api, kb["id"]) == {"copied": 1, "unchanged": 0, "deleted": 1, "skipped": [], "more": False}
    _gone(api, kb["id"], "valve.txt")
    deadline = time.monotonic() + 60
    while "September" not in " ".join(r["content"] for r in _data(api.call(
            "POST", f"/knowledge-bases/{kb['id']}/search", {"query": "September", "strategy": "keyword"}))["results"]):
        assert time.monotonic() < deadline, "the changed file was not ingested again"
        time.sleep(0.5)
    assert _sync(api, kb["id"]) == {"copied": 0, "unchanged": 1, "deleted": 0, "skipped": [], "more": False}
    assert {d["path"] for d in list_documents(api, kb["id"])} == {"pump.md", "own.md"}
    # Without its source, the knowledge base keeps what it has.
    assert _data(api.call("PATCH", f"/knowledge-bases/{kb['id']}", {"source": None}))["source"] is None
    assert _data(api.call("POST", f"/knowledge-bases/{kb['id']}/sync"))["source"] is None


def test_a_local_folder_is_a_source_of_the_local_stack(api, tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "shift.md").write_text("# Shift\n\nThe night shift starts at 22:00.")
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Folder {secrets.token_hex(3)}",
                                                     "source": {"type": "folder", "path": str(folder)}}), 201)
    assert _sync(api, kb["id"])["copied"] == 1
    wait_for_status(api, kb["id"], "shift.md", wanted=("PROCESSED",))
    (folder / "shift.md").unlink()
    assert _sync(api, kb["id"])["deleted"] == 1
    _gone(api, kb["id"], "shift.md")


@pytest.mark.parametrize("source, field", [
    ({"type": "ftp"}, "source.type"),
    ({"type": "s3"}, "source.bucket"),
    ({"type": "s3", "bucket": "b", "path": "/x"}, "source.path"),
    ({"type": "s3", "bucket": "b", "secretArn": "arn:aws:secretsmanager:eu-west-1:1:secret:other/x"}, "source.secretArn"),
    ({"type": "folder", "path": "relative/notes"}, "source.path"),
    ({"type": "s3", "bucket": "b", "exclude": "*.tmp"}, "source.exclude"),
])
def test_a_source_that_cannot_mean_anything_is_refused_naming_the_field(api, source, field):
    answer = api.call("POST", "/knowledge-bases", {"name": "x", "source": source})
    assert answer.status_code == 400 and answer.json()["error"]["message"].startswith(field), answer.text


def test_the_deployments_own_bucket_and_another_organisations_secret_are_refused(api, local_env):
    own = api.call("POST", "/knowledge-bases", {"name": "x", "source": {"type": "s3", "bucket": local_env["KB_BUCKET"],
                                                                     "prefix": "kb/kb_0123456789abcdef"}})
    assert own.status_code == 400 and "own bucket" in own.text, own.text
    missing = _data(api.call("POST", "/knowledge-bases", {"name": "y", "source": {"type": "s3",
                                                                                  "bucket": "no-such-source"}}), 201)
    answer = api.call("POST", f"/knowledge-bases/{missing['id']}/sync")
    assert answer.status_code == 502 and answer.json()["error"]["code"] == "SOURCE_UNAVAILABLE", answer.text
