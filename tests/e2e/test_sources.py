"""A knowledge base's source besides its bucket prefix (seed 003's sources), through the
deployed stack: another bucket's prefix, and a folder of the local machine, mirrored by a
sync (adds, changes, removals) into documents the pipeline ingests; and what a source may
not read: a folder outside the roots the stack lists, a link out of them, an endpoint other
than the emulator's, a key that climbs out of its knowledge base."""
import os
import secrets
import shutil
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from psycopg.types.json import Jsonb

from tests.conftest import LOCAL_ENV
from tests.e2e.conftest import find_document, list_documents, wait_for_status
from tests.local_http import _LocalServer


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


@pytest.fixture
def root(local_env) -> Path:
    """The folder the local stack lists for folder sources (KB_FOLDER_SOURCE_ROOTS)."""
    return Path(local_env["KB_FOLDER_SOURCE_ROOTS"].split(os.pathsep)[0])


@pytest.fixture
def below_root(root):
    """A folder of this test's own below that root, removed afterwards."""
    folder = root / f"e2e-{secrets.token_hex(4)}"
    folder.mkdir()
    yield folder
    shutil.rmtree(folder)


def test_a_local_folder_is_a_source_of_the_local_stack(api, below_root):
    folder = below_root / "notes"
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


STATE = LOCAL_ENV.parent  # the stack's state: the emulator's objects, local.env's keys


@pytest.mark.parametrize("path", [str(STATE / "ministack" / "s3"), str(STATE), "/etc/apt", "/etc", "/proc/self"])
def test_a_folder_outside_the_listed_roots_is_refused(api, path):
    answer = api.call("POST", "/knowledge-bases", {"name": "x", "source": {"type": "folder", "path": path}})
    assert answer.status_code == 400 and answer.json()["error"]["message"].startswith("source.path"), answer.text


def test_a_link_out_of_the_root_is_refused_or_skipped_and_a_broken_link_skipped(api, below_root, tmp_path):
    secret = tmp_path / "outside.md"  # not below the root
    secret.write_text("# Outside\n\nThe vault code is 7a7a7a.")
    (below_root / "escape").symlink_to(tmp_path)
    refused = api.call("POST", "/knowledge-bases", {"name": "x", "source": {
        "type": "folder", "path": str(below_root / "escape")}})
    assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("source.path"), refused.text
    notes = below_root / "notes"
    notes.mkdir()
    (notes / "kept.md").write_text("# Kept\n\nThe day shift starts at 06:00.")
    (notes / "leak.md").symlink_to(secret)
    (notes / "broken.md").symlink_to(notes / "gone.md")
    (notes / "state").symlink_to(STATE)
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Links {secrets.token_hex(3)}",
                                                     "source": {"type": "folder", "path": str(notes)}}), 201)
    assert _sync(api, kb["id"]) == {"copied": 1, "unchanged": 0, "deleted": 0, "more": False, "skipped": [
        {"path": "state", "reason": "a link to a folder: not followed"},
        {"path": "broken.md", "reason": "a broken link"},
        {"path": "leak.md", "reason": "a link to outside the folders this deployment lists for sources"}]}
    wait_for_status(api, kb["id"], "kept.md", wanted=("PROCESSED",))
    assert {d["path"] for d in list_documents(api, kb["id"])} == {"kept.md"}


def test_a_stored_source_is_checked_again_when_it_syncs(api, db, s3):
    """A source written under wider rules (an older deployment's) is refused by the sync
    that would read it, before anything is read."""
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Stored {secrets.token_hex(3)}"}), 201)
    db.execute("UPDATE knowledge_bases SET source = %s WHERE id = %s",
               (Jsonb({"type": "folder", "path": str(STATE / "ministack" / "s3")}), kb["id"]))
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/sync")
    assert answer.status_code == 400 and answer.json()["error"]["message"].startswith("source.path"), answer.text
    assert list_documents(api, kb["id"]) == []


class _Listener(_LocalServer):
    """Something on this machine that is not the emulator: it keeps every request's headers."""

    def __init__(self):
        self.headers: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.headers.append(dict(self.headers))
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_HEAD = do_PUT = do_POST = do_GET

        self._serve(Handler)


@pytest.fixture(scope="module")
def listener():
    with _Listener() as server:
        yield server


@pytest.mark.parametrize("endpoint", [
    "http://127.0.0.1:{port}", "http://0x7f000001:{port}", "http://[::1]:{port}", "http://127.1:{port}",
    "http://2130706433:{port}", "http://169.254.169.254", "http://10.0.0.1", "file:///etc/passwd",
    "gopher://127.0.0.1:{port}/"])
def test_an_endpoint_other_than_the_emulators_is_refused(api, listener, endpoint):
    url = endpoint.format(port=listener.httpd.server_address[1])
    answer = api.call("POST", "/knowledge-bases", {"name": "x", "source": {"type": "s3", "bucket": "b",
                                                                           "endpointUrl": url}})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"].startswith("source.endpointUrl"), answer.text


def test_a_sync_sends_no_credentials_of_the_functions_to_an_endpoint_a_caller_named(api, db, listener):
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Endpoint {secrets.token_hex(3)}"}), 201)
    db.execute("UPDATE knowledge_bases SET source = %s WHERE id = %s", (Jsonb({
        "type": "s3", "bucket": "team", "endpointUrl": listener.address("")}), kb["id"]))
    listener.headers.clear()
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/sync")
    assert not [h for h in listener.headers if "Authorization" in h], listener.headers
    assert answer.status_code == 400 and "source.endpointUrl" in answer.text, answer.text


def test_the_emulators_own_endpoint_is_read_anonymously_and_keys_that_climb_out_are_skipped(api, s3, local_env):
    source = f"team-keys-{secrets.token_hex(4)}"
    s3.create_bucket(Bucket=source)
    s3.put_object(Bucket=source, Key="docs/pump.md", Body=b"# Pump\n\nThe pump is serviced every March.")
    s3.put_object(Bucket=source, Key="docs/../../kb_OTHER/evil.md", Body=b"# Evil\n\nPlanted elsewhere.")
    s3.put_object(Bucket=source, Key="docs//abs/root.md", Body=b"# Root\n\nAn absolute name.")
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Keys {secrets.token_hex(3)}", "source": {
        "type": "s3", "bucket": source, "prefix": "docs", "endpointUrl": local_env["AWS_ENDPOINT_URL"]}}), 201)
    assert _sync(api, kb["id"]) == {"copied": 2, "unchanged": 0, "deleted": 0, "more": False, "skipped": [
        {"path": "../../kb_OTHER/evil.md", "reason": "must not hold '.' or '..' segments"}]}
    wait_for_status(api, kb["id"], "pump.md", wanted=("PROCESSED",))
    wait_for_status(api, kb["id"], "abs/root.md", wanted=("PROCESSED",))
    assert {d["path"] for d in list_documents(api, kb["id"])} == {"pump.md", "abs/root.md"}
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=local_env["KB_BUCKET"], Prefix=f"kb/{kb['id']}/")["Contents"]]
    assert sorted(keys) == [f"kb/{kb['id']}/abs/root.md", f"kb/{kb['id']}/pump.md"], keys


@pytest.mark.parametrize("arn", [
    "arn:aws:secretsmanager:us-east-1:000000000000:secret:kb-sources/other-org/x:secret:kb-sources/{org}/",
    "arn:aws:secretsmanager:us-east-1:000000000000:secret:elsewhere#:secret:kb-sources/{org}/y"])
def test_a_secret_arn_with_the_organisations_prefix_elsewhere_in_it_is_refused(api, db, arn):
    kb = _data(api.call("POST", "/knowledge-bases", {"name": f"Org {secrets.token_hex(3)}"}), 201)
    org = db.execute("SELECT org_id FROM knowledge_bases WHERE id = %s", (kb["id"],)).fetchone()["org_id"]
    answer = api.call("POST", "/knowledge-bases", {"name": "x", "source": {"type": "s3", "bucket": "b",
                                                                           "secretArn": arn.format(org=org)}})
    assert answer.status_code == 400 and answer.json()["error"]["message"].startswith("source.secretArn"), answer.text
