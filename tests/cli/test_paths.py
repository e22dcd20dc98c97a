"""kb docs with paths against the running stack: a folder's files keep their paths, the
same bytes again are "unchanged" and not sent, a changed file is "updated" in place,
--prefix, pages of the list, and documents named by path."""
import json
import secrets
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

PAGE = """<!doctype html><html><head><title>{title}</title></head><body>
<nav><a href="../index.html">Home</a> | <a href="../a/index.html">A</a> | <a href="../b/index.html">B</a></nav>
<main><article><h1>{title}</h1>
<p>{body}</p>
<p>This page is part of a small test site uploaded by the kb command line. Each folder holds its own
index.html, and the knowledge base keeps them apart by their paths.</p>
</article></main></body></html>"""
BODIES = {"a": "Orchard pruning happens in late winter, before the buds swell: cut crossing branches first.",
          "b": "The heat pump is reset by holding the mode button for ten seconds until the display blinks."}


def write_site(root: Path, b_body: str = BODIES["b"]) -> Path:
    for folder, body in (("a", BODIES["a"]), ("b", b_body)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "index.html").write_text(PAGE.format(title=f"Folder {folder}", body=body))
    return root


def by_path(results: list[dict]) -> dict[str, dict]:
    return {r["path"]: r for r in results}


@pytest.fixture(scope="module")
def paths_kb(cli) -> str:
    created = cli.json("kbs", "create", f"CLI paths {secrets.token_hex(3)}")
    yield created["id"]
    cli.run("kbs", "delete", created["id"], "--yes", expect=None)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return write_site(tmp_path_factory.mktemp("site"))


@pytest.fixture(scope="module")
def first_upload(cli, paths_kb, site) -> dict[str, dict]:
    return by_path(cli.json("docs", "upload", "-r", str(site), "--kb", paths_kb, "--wait", "--timeout", "240"))


@pytest.fixture(scope="module")
def more_uploads(cli, paths_kb, site, first_upload) -> tuple[dict, dict]:
    """The folder again below v2/, and one file of it named alone below single/."""
    prefixed = by_path(cli.json("docs", "upload", "-r", str(site), "--kb", paths_kb, "--prefix", "v2/", "--wait"))
    single = by_path(cli.json("docs", "upload", str(site / "a" / "index.html"), "--kb", paths_kb,
                              "--prefix", "single", "--wait"))
    return prefixed, single


def test_a_folder_keeps_its_paths(first_upload, site):
    assert set(first_upload) == {"a/index.html", "b/index.html"}
    for path, result in first_upload.items():
        assert result["result"] == "added" and result["status"] == "PROCESSED", result
        assert result["localPath"] == str(site / path) and result["filename"] == "index.html"
        assert result["id"].startswith("doc_") and result["chunks"] > 0
    assert first_upload["a/index.html"]["id"] != first_upload["b/index.html"]["id"]


def test_the_same_folder_again_is_unchanged_and_sends_nothing(cli, paths_kb, site, first_upload):
    before = {p: cli.json("docs", "status", r["id"], "--kb", paths_kb) for p, r in first_upload.items()}
    again = by_path(cli.json("docs", "upload", "-r", str(site), "--kb", paths_kb, "--wait"))
    assert {p: (r["result"], r["id"], r["status"]) for p, r in again.items()} == {
        p: ("unchanged", r["id"], "PROCESSED") for p, r in first_upload.items()}
    # Nothing sent: no new version was registered, so the documents were not touched.
    after = {p: cli.json("docs", "status", r["id"], "--kb", paths_kb) for p, r in first_upload.items()}
    assert {p: d["updatedAt"] for p, d in after.items()} == {p: d["updatedAt"] for p, d in before.items()}
    table = cli.run("docs", "upload", "-r", str(site), "--kb", paths_kb).stdout
    assert "2 unchanged" in table and "added" not in table and "a/index.html" in table


def test_a_changed_file_is_updated_in_place(cli, paths_kb, site, first_upload):
    write_site(site, b_body="The heat pump is reset from the service menu, under Settings, then Reset.")
    done = cli.run("docs", "upload", "-r", str(site), "--kb", paths_kb, "--wait", "--timeout", "240", "--json")
    results = by_path(json.loads(done.stdout))
    assert results["a/index.html"]["result"] == "unchanged"
    assert results["b/index.html"]["result"] == "updated" and results["b/index.html"]["status"] == "PROCESSED"
    assert results["b/index.html"]["id"] == first_upload["b/index.html"]["id"], "a new version, not a new document"
    hit = cli.json("search", "service menu settings reset", "--kb", paths_kb, "--strategy", "keyword")
    assert hit["results"][0]["documentId"] == first_upload["b/index.html"]["id"]
    assert "ten seconds" not in hit["results"][0]["content"]


def test_prefix_and_a_single_file(more_uploads, site):
    prefixed, single = more_uploads
    assert {p: r["result"] for p, r in prefixed.items()} == {"v2/a/index.html": "added", "v2/b/index.html": "added"}
    assert [(p, r["result"], r["localPath"]) for p, r in single.items()] == [
        ("single/index.html", "added", str(site / "a" / "index.html"))]


def test_list_pages_in_path_order(cli, paths_kb, more_uploads):
    expected = ["a/index.html", "b/index.html", "single/index.html", "v2/a/index.html", "v2/b/index.html"]

    page = cli.json("docs", "list", "--kb", paths_kb, "--limit", "2")
    assert [d["path"] for d in page["items"]] == expected[:2] and page["nextToken"]
    following = cli.json("docs", "list", "--kb", paths_kb, "--limit", "2", "--next-token", page["nextToken"])
    assert [d["path"] for d in following["items"]] == expected[2:4]
    table = cli.run("docs", "list", "--kb", paths_kb, "--limit", "2").stdout
    assert "a/index.html" in table and "more: use --all or --next-token" in table

    everything = cli.json("docs", "list", "--kb", paths_kb, "--limit", "2", "--all")
    assert [d["path"] for d in everything["items"]] == expected and everything["nextToken"] is None
    assert "more:" not in cli.run("docs", "list", "--kb", paths_kb, "--all").stdout

    folder = cli.json("docs", "list", "--kb", paths_kb, "--prefix", "v2/", "--all")
    assert [d["path"] for d in folder["items"]] == expected[3:]
    newest = cli.json("docs", "list", "--kb", paths_kb, "--sort", "updatedAt", "--all")["items"]
    assert sorted(d["path"] for d in newest) == expected
    assert [d["updatedAt"] for d in newest] == sorted((d["updatedAt"] for d in newest), reverse=True)
    cli.error("docs", "list", "--kb", paths_kb, "--sort", "status", "--next-token", page["nextToken"],
              code="INVALID_INPUT")


def test_status_reindex_and_delete_by_path(cli, paths_kb, first_upload):
    doc_id = first_upload["a/index.html"]["id"]
    shown = cli.json("docs", "status", "a/index.html", "--kb", paths_kb)
    assert shown["id"] == doc_id and shown["path"] == "a/index.html"
    assert "a/index.html" in cli.run("docs", "status", "a/index.html", "--kb", paths_kb).stdout
    error = cli.error("docs", "status", "nowhere/index.html", "--kb", paths_kb, code="NOT_FOUND")
    assert "nowhere/index.html" in error["message"]
    again = cli.json("docs", "reindex", "a/index.html", "--kb", paths_kb)
    assert again["id"] == doc_id and again["status"] in ("PENDING", "PROCESSING", "PROCESSED")

    cli.json("docs", "upload", first_upload["a/index.html"]["localPath"], "--kb", paths_kb, "--prefix", "doomed",
             "--wait")
    cli.error("docs", "delete", "doomed/index.html", "--kb", paths_kb, code="CONFIRMATION_REQUIRED", expect=2)
    doomed = cli.json("docs", "status", "doomed/index.html", "--kb", paths_kb)["id"]
    assert cli.json("docs", "delete", "doomed/index.html", "--kb", paths_kb, "--yes") == {"id": doomed,
                                                                                         "deleted": True}
    cli.error("docs", "status", "doomed/index.html", "--kb", paths_kb, code="NOT_FOUND")
    cli.error("docs", "delete", "doomed/index.html", "--kb", paths_kb, "--yes", code="NOT_FOUND")
