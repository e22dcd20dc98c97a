"""kb docs and kb search against the running stack: a folder uploaded with one command."""
import json

import pytest

pytestmark = pytest.mark.e2e


def by_path(results: list[dict]) -> dict[str, dict]:
    return {r["path"]: r for r in results}


def test_folder_upload_waits_and_reports_each_file(uploaded, upload_folder):
    done, results = uploaded
    assert done.returncode == 1, "a failed file makes the command fail"
    files = by_path(results)
    # Subfolders walked with their paths, hidden files skipped, --exclude honoured.
    assert set(files) == {"crazyones.pdf", "pypdf-extract-text.md", "word/par-known-paragraphs.docx",
                          "word/nested/two-different-pages.pdf", "broken.pdf", "picture.png", "backup.dat"}
    for path in ("crazyones.pdf", "pypdf-extract-text.md", "word/par-known-paragraphs.docx",
                 "word/nested/two-different-pages.pdf"):
        assert files[path]["status"] == "PROCESSED" and files[path]["result"] == "added", files[path]
        assert files[path]["id"].startswith("doc_") and files[path]["chunks"] > 0 and files[path]["error"] is None
        assert files[path]["localPath"] == str(upload_folder / path)
    assert files["word/nested/two-different-pages.pdf"]["pages"] == 2
    assert files["word/nested/two-different-pages.pdf"]["filename"] == "two-different-pages.pdf"
    # Unreadable after upload: the pipeline's code; refused up front: the API's code, no document.
    assert files["broken.pdf"]["status"] == "FAILED" and files["broken.pdf"]["error"]["code"] == "CORRUPT_FILE"
    assert files["broken.pdf"]["result"] == "failed"
    # Found in the folder, of a type the service does not ingest: skipped with its reason, no
    # document, and not a failure (broken.pdf is what makes the command exit 1).
    assert (files["picture.png"]["status"], files["picture.png"]["id"]) == (None, None)
    assert files["picture.png"]["error"]["code"] == "UNSUPPORTED_TYPE" and files["picture.png"]["result"] == "skipped"
    # Refused from its first bytes, at registration: its type named.
    assert (files["backup.dat"]["status"], files["backup.dat"]["id"], files["backup.dat"]["result"]) == (
        None, None, "skipped")
    assert files["backup.dat"]["error"]["code"] == "UNSUPPORTED_TYPE"
    assert "backup.dat is gzip archive" in files["backup.dat"]["error"]["message"]


def test_a_folder_of_documents_and_images_uploads_and_a_picture_named_on_its_own_fails(cli, tmp_path):
    (tmp_path / "site" / "img").mkdir(parents=True)
    (tmp_path / "site" / "guide.md").write_text("# Guide\n\nThe guide a folder holds beside its pictures.")
    picture = tmp_path / "site" / "img" / "logo.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n the site's logo")
    other = cli.json("kbs", "create", "CLI pictures")["id"]
    try:
        lines = cli.run("docs", "upload", "-r", str(tmp_path / "site"), "--kb", other, expect=0).stdout.splitlines()
        assert lines[0] == f"✓ Uploaded: {tmp_path / 'site' / 'guide.md'}"
        assert lines[1].startswith(f"- Skipped: {picture}: ") and "PNG image" in lines[1], lines
        assert lines[-1] == "1 added, 1 skipped"
        named = cli.run("docs", "upload", str(picture), "--kb", other, "--json", expect=1)
        (result,) = json.loads(named.stdout)
        assert (result["result"], result["status"], result["error"]["code"]) == ("failed", "FAILED",
                                                                                  "UNSUPPORTED_TYPE")
        assert [d["path"] for d in cli.json("docs", "list", "--kb", other)["items"]] == ["guide.md"]
    finally:
        cli.run("kbs", "delete", other, "--yes")


def test_upload_table_names_failures_and_exits_1(cli, kb, uploaded, upload_folder):
    # crazyones.pdf holds these bytes, indexed, with this metadata: unchanged; broken.pdf is sent and fails again.
    args = ("docs", "upload", str(upload_folder / "broken.pdf"), str(upload_folder / "crazyones.pdf"),
            "--kb", kb, "--wait", "--metadata", '{"team": "cli"}')
    # In a terminal (rich told it is one): the table, with each file's status.
    table = cli.run(*args, expect=1, env={**cli.env, "TTY_COMPATIBLE": "1", "NO_COLOR": "1"}).stdout
    assert "CORRUPT_FILE" in table and "PROCESSED" in table and "✓" not in table
    assert "1 unchanged, 1 failed" in table
    # Piped (a script, a log): seed 004's line a file, then the summary.
    lines = cli.run(*args, expect=1).stdout.splitlines()
    assert lines[:2] == [f"✗ Failed: {upload_folder / 'broken.pdf'}: CORRUPT_FILE: the PDF could not be read:"
                         " Stream has ended unexpectedly", f"✓ Unchanged: {upload_folder / 'crazyones.pdf'}"]
    assert lines[-1] == "1 unchanged, 1 failed"


def test_upload_of_globs_without_wait(cli, upload_folder, tmp_path):
    other = cli.json("kbs", "create", "CLI globs")["id"]
    try:
        # Two folders named: each one's files are relative to it, so both same.md are at one path,
        # and the later is refused; their parent keeps them apart.
        for folder in ("a", "b"):
            (tmp_path / folder).mkdir()
            (tmp_path / folder / "same.md").write_text(f"# Folder {folder}\n\nSame name, other text.")
        done = cli.run("docs", "upload", "-r", str(tmp_path / "a"), str(tmp_path / "b"), "--kb", other, "--json",
                       expect=1)
        first, second = json.loads(done.stdout)
        assert (first["path"], first["localPath"], first["error"]) == ("same.md", str(tmp_path / "a" / "same.md"), None)
        assert first["id"] and second["id"] is None and second["path"] == "same.md"
        assert second["error"]["code"] == "DUPLICATE_PATH"
        assert str(tmp_path / "a" / "same.md") in second["error"]["message"]
        assert str(tmp_path / "b" / "same.md") in second["error"]["message"]
        both = cli.json("docs", "upload", "-r", str(tmp_path), "--kb", other)
        assert sorted((r["path"], r["result"]) for r in both) == [("a/same.md", "added"), ("b/same.md", "added")]

        results = cli.json("docs", "upload", str(upload_folder / "**" / "*.pdf"), "--kb", other,
                           "--exclude", "broken.pdf")
        # A glob's files go under their own names.
        assert sorted(r["path"] for r in results) == ["crazyones.pdf", "two-different-pages.pdf"]
        assert all(r["status"] in ("PENDING", "PROCESSING", "PROCESSED") and r["error"] is None for r in results)
        listed = cli.json("docs", "list", "--kb", other)["items"]
        assert sorted(d["id"] for d in listed) == sorted([first["id"], *(r["id"] for r in both + results)])
    finally:
        cli.run("kbs", "delete", other, "--yes")


def test_upload_of_nothing_is_a_usage_error(cli, kb, upload_folder):
    cli.error("docs", "upload", str(upload_folder / "absent.pdf"), "--kb", kb, code="NO_FILES", expect=2)
    cli.error("docs", "upload", "-r", str(upload_folder), "--kb", kb, "--include", "*.nothing", code="NO_FILES",
              expect=2)


def test_documents_list_status_and_delete(cli, kb, uploaded):
    failed = cli.json("docs", "list", "--kb", kb, "--status", "FAILED")["items"]
    assert [d["filename"] for d in failed] == ["broken.pdf"]
    doc = cli.json("docs", "status", failed[0]["id"], "--kb", kb)
    assert doc["error"]["code"] == "CORRUPT_FILE" and doc["metadata"] == {"team": "cli"}
    shown = cli.run("docs", "status", failed[0]["id"], "--kb", kb).stdout
    assert "CORRUPT_FILE" in shown and "broken.pdf" in shown
    assert cli.json("docs", "status", "broken.pdf", "--kb", kb)["id"] == failed[0]["id"]
    assert cli.json("docs", "status", "word/nested/two-different-pages.pdf", "--kb", kb)["pages"] == 2

    cli.error("docs", "delete", failed[0]["id"], "--kb", kb, code="CONFIRMATION_REQUIRED", expect=2)
    assert cli.json("docs", "status", failed[0]["id"], "--kb", kb)["id"] == failed[0]["id"]
    assert cli.json("docs", "delete", failed[0]["id"], "--kb", kb, "--yes") == {"id": failed[0]["id"],
                                                                             "deleted": True}
    cli.error("docs", "status", failed[0]["id"], "--kb", kb, code="NOT_FOUND")


def test_reindex_and_sync(cli, kb, uploaded):
    doc = next(d for d in cli.json("docs", "list", "--kb", kb)["items"] if d["filename"] == "crazyones.pdf")
    again = cli.json("docs", "reindex", doc["id"], "--kb", kb)
    assert again["id"] == doc["id"] and again["status"] in ("PENDING", "PROCESSING", "PROCESSED")
    report = cli.json("sync", "--kb", kb)
    assert set(report) >= {"added", "changed", "removed", "unchanged", "failed"}
    assert report["added"] == 0 and report["removed"] == 0


def test_search_returns_the_uploaded_content(cli, kb, uploaded):
    answer = cli.json("search", "the crazy ones, the misfits, the rebels", "--kb", kb, "--top-k", "3")
    assert answer["results"][0]["source"] == "crazyones.pdf"
    assert len(answer["results"]) <= 3 and answer["metadata"]["strategy"] == "hybrid"

    keyword = cli.json("search", "troublemakers", "--kb", kb, "--strategy", "keyword", "--top-k", "1",
                       "--filter", '{"equals": {"key": "team", "value": "cli"}}')
    assert [r["source"] for r in keyword["results"]] == ["crazyones.pdf"]
    assert keyword["metadata"]["strategy"] == "keyword"
    nothing = cli.json("search", "troublemakers", "--kb", kb, "--filter",
                       '{"equals": {"key": "team", "value": "someone else"}}')
    assert nothing["results"] == []

    table = cli.run("search", "the crazy ones", "--kb", kb, "--top-k", "2").stdout
    assert "crazyones.pdf p.1" in table and "Crazy Ones" in table


def test_search_errors_carry_the_api_code(cli, kb):
    error = cli.error("search", "x", "--kb", kb, "--filter", '{"between": {"key": "a"}}', code="INVALID_FILTER")
    assert "filter.between" in error["message"]
    cli.error("search", "x", "--kb", kb, "--filter", "{not json", code="INVALID_OPTION", expect=2)


def test_entries_are_searchable_at_once(cli, kb):
    entry = cli.json("entries", "add", "--kb", kb, "--title", "Orchard pollination",
                     stdin="Mason bees pollinate the quince orchard every April.")
    assert entry["id"].startswith("entry_") and entry["chunks"] == 1
    hit = cli.json("search", "mason bees quince", "--kb", kb, "--strategy", "keyword")
    assert hit["results"][0]["documentId"] == entry["id"]


def test_sync_folder_mirrors_adds_changes_and_removals_and_leaves_filtered_paths_alone(cli, tmp_path):
    """Issue 31 item 4: `kb sync-folder DIR --kb ID` as `aws s3 sync --delete`, by path and
    content hash; what --exclude leaves out is neither sent nor deleted."""
    import secrets

    kb = cli.json("kbs", "create", f"Mirror {secrets.token_hex(3)}")["id"]
    folder = tmp_path / "notes"
    (folder / "ops").mkdir(parents=True)
    (folder / "a.md").write_text("# Alpha\n\nThe alpha pump runs at night.")
    (folder / "ops" / "b.txt").write_text("The beta valve is checked weekly.")
    (folder / "draft.tmp").write_text("not yet")
    first = cli.json("sync-folder", str(folder), "--kb", kb, "--prefix", "team", "--exclude", "*.tmp", "--wait")
    assert {(r["path"], r["result"]) for r in first} == {("team/a.md", "added"), ("team/ops/b.txt", "added")}
    # A document uploaded by other means under the prefix but excluded: left alone.
    cli.json("docs", "upload", str(folder / "draft.tmp"), "--kb", kb, "--prefix", "team")
    (folder / "ops" / "b.txt").unlink()
    (folder / "a.md").write_text("# Alpha\n\nThe alpha pump runs at night and at noon.")
    (folder / "c.md").write_text("# Gamma\n\nGamma is new.")
    second = cli.json("sync-folder", str(folder), "--kb", kb, "--prefix", "team", "--exclude", "*.tmp", "--wait")
    assert {(r["path"], r["result"]) for r in second} == {
        ("team/a.md", "updated"), ("team/c.md", "added"), ("team/ops/b.txt", "deleted")}
    paths = {d["path"] for d in cli.json("docs", "list", "--kb", kb, "--all")["items"]}
    assert paths == {"team/a.md", "team/c.md", "team/draft.tmp"}
    third = cli.json("sync-folder", str(folder), "--kb", kb, "--prefix", "team", "--exclude", "*.tmp")
    assert {r["result"] for r in third} == {"unchanged"}
    done = cli.run("sync-folder", str(folder), "--kb", kb, "--prefix", "team", "--exclude", "*.tmp")
    assert done.stdout.endswith("2 unchanged\n") and "✓ Unchanged:" in done.stdout
    cli.run("kbs", "delete", kb, "--yes")


def test_a_wait_that_times_out_counts_files_still_processing_not_failed(cli, tmp_path):
    other = cli.json("kbs", "create", "CLI slow wait")["id"]
    try:
        (tmp_path / "long.md").write_text("# Tides\n\n" + "The tide turns twice a day at the harbour. " * 400)
        done = cli.run("docs", "upload", str(tmp_path / "long.md"), "--kb", other, "--wait", "--timeout", "0.1",
                       expect=1)
        assert done.stdout.splitlines() == [f"… Still processing: {tmp_path / 'long.md'}", "1 processing"]
        # again, as after a --wait that timed out: followed until it is ingested, and sent again
        # only if no run had read its bytes yet
        result, = cli.json("docs", "upload", str(tmp_path / "long.md"), "--kb", other, "--wait", "--timeout", "240")
        assert (result["status"], result["error"]) == ("PROCESSED", None) and result["chunks"] > 1, result
        assert result["result"] in ("unchanged", "updated"), result
    finally:
        cli.run("kbs", "delete", other, "--yes", expect=None)
