"""What surprised a newcomer in the first hour with `kb`: knowledge bases and agents named
by name, folders reached through links, a path the service stored otherwise than asked, and
the search table's path and section."""
import json
import secrets
from pathlib import Path

import pytest

from kbcli.client import CliError
from kbcli.upload import collect
from tests.cli.conftest import rendered
from tests.e2e.conftest import Api


# --- names wherever an id is taken ----------------------------------------------------------
def test_kb_and_agent_take_names_as_well_as_ids(cli):
    api = Api(cli.env["KB_API_URL"], cli.env["KB_API_KEY"])  # what is set up, set up directly
    name = f"Field manuals {secrets.token_hex(3)}"
    made = [api.call("POST", path, {"name": named}).json()["data"]["id"]
            for path, named in (("/knowledge-bases", name), ("/agents", f"Field bot {name}"),
                                ("/knowledge-bases", f"{name} twin"))]
    kb, agent, twin = made
    try:
        assert cli.json("kbs", "show", name.upper())["id"] == kb  # no exact match: case is ignored
        tool = cli.json("tools", "add", "--agent", f"Field bot {name}", "--kb", name, "--quick")
        assert tool["config"]["knowledgeBaseId"] == kb
        unknown = cli.error("docs", "list", "--kb", "No such manuals", code="NOT_FOUND")
        assert "'No such manuals'" in unknown["message"] and "kb kbs list" in unknown["message"]
        api.call("PATCH", f"/knowledge-bases/{twin}", {"name": name})
        # nothing is deleted on a guess: the error lists the matches with their ids
        ambiguous = cli.error("kbs", "delete", name, "--yes", code="AMBIGUOUS_NAME", expect=2)
        assert kb in ambiguous["message"] and twin in ambiguous["message"], ambiguous
    finally:
        for path in (f"/agents/{agent}", f"/knowledge-bases/{kb}", f"/knowledge-bases/{twin}"):
            api.call("DELETE", path)


# --- folders reached through links ------------------------------------------------------------
def linked_tree(tmp_path: Path) -> Path:
    """docs/ holds a link to a folder elsewhere (followed) and a link back to itself (a loop)."""
    shared = tmp_path / "shared"
    (shared / "deep").mkdir(parents=True)
    (shared / "deep" / "valve.md").write_text("# Valve\n\nThe valve opens a quarter turn.\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "intro.md").write_text("# Intro\n\nStart here.\n")
    (docs / "shared").symlink_to(shared, target_is_directory=True)
    (shared / "back").symlink_to(docs, target_is_directory=True)  # docs/shared/back -> docs: a loop
    (docs / "gone.md").symlink_to(tmp_path / "nowhere.md")
    return docs


def test_a_linked_folder_is_walked_and_a_loop_left_out_and_reported(tmp_path):
    docs = linked_tree(tmp_path)
    skipped = []
    found = collect([str(docs)], [], [], recursive=True, skipped=skipped)
    assert sorted(s.remote for s in found) == ["intro.md", "shared/deep/valve.md"]
    assert [(s.local, s.reason.endswith("(a loop)")) for s in skipped if "loop" in s.reason] == [
        (docs / "shared" / "back", True)]
    assert any(s.local == docs / "gone.md" and "broken link" in s.reason for s in skipped)


def test_a_folder_that_is_only_a_link_is_walked(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.md").write_text("# A\n")
    top = tmp_path / "top"
    top.mkdir()
    (top / "linked").symlink_to(real, target_is_directory=True)
    assert [s.remote for s in collect([str(top)], [], [], recursive=True)] == ["linked/a.md"]
    (tmp_path / "loop").mkdir()
    (tmp_path / "loop" / "self").symlink_to(tmp_path / "loop", target_is_directory=True)
    with pytest.raises(CliError) as refused:
        collect([str(tmp_path / "loop")], [], [], recursive=True)
    assert refused.value.code == "NO_FILES" and "self" in refused.value.message and "loop" in refused.value.message


def test_upload_reports_what_the_walk_left_out(cli, kb, tmp_path):
    docs = linked_tree(tmp_path)
    done = cli.run("docs", "upload", "-r", str(docs), "--kb", kb, "--json")
    assert sorted(r["path"] for r in json.loads(done.stdout)) == ["intro.md", "shared/deep/valve.md"]
    warnings = [json.loads(line)["warning"] for line in done.stderr.splitlines() if line.startswith('{"warning"')]
    assert any(str(docs / "shared" / "back") in w and "loop" in w for w in warnings), done.stderr


# --- a path stored otherwise than asked -------------------------------------------------------
def test_a_rewritten_path_is_shown_as_stored_and_sync_folder_keeps_it(cli, tmp_path):
    kb = cli.json("kbs", "create", f"Renamed {secrets.token_hex(3)}")["id"]
    try:
        folder = tmp_path / "notes"
        folder.mkdir()
        (folder / "hot fix?.md").write_text("# Hot fix\n\nRestart the relay after the hot fix.\n")
        (folder / "plain.md").write_text("# Plain\n\nNothing to rewrite.\n")
        lines = cli.run("docs", "upload", "-r", str(folder), "--kb", kb, "--wait", "--timeout", "240").stdout
        assert f"✓ Uploaded: {folder / 'hot fix?.md'} (stored as hot fix_.md)" in lines, lines
        assert f"✓ Uploaded: {folder / 'plain.md'}\n" in lines
        # The folder mirrored: the stored document is the file's own, never "gone" and deleted.
        synced = cli.json("sync-folder", str(folder), "--kb", kb)
        assert {(r["askedPath"], r["path"], r["result"]) for r in synced} == {
            ("hot fix?.md", "hot fix_.md", "unchanged"), ("plain.md", "plain.md", "unchanged")}
        assert sorted(d["path"] for d in cli.json("docs", "list", "--kb", kb)["items"]) == ["hot fix_.md", "plain.md"]
    finally:
        cli.run("kbs", "delete", kb, "--yes", expect=None)


# --- the search table ---------------------------------------------------------------------------
def test_the_search_table_shows_path_and_section():
    from kbcli.commands.search import render_results

    data = {"results": [{"rank": 1, "similarity": 0.8, "source": "install.md", "path": "guides/pump/install.md",
                         "section": "Install > Debian", "page": None, "content": "apt-get install pump."}],
            "resultCount": 1, "metadata": {"strategy": "hybrid", "totalTokensUsed": 5, "omittedCount": 0, "tookMs": 2}}
    printed = rendered(render_results, data, full=False, several=False)
    header = next(line for line in printed.splitlines() if "score" in line)
    assert "path" in header and "section" in header
    assert "guides/pump/install.md" in printed and "Install > Debian" in printed


def test_a_tool_invocation_table_shows_path_and_section():
    from kbcli.commands.tools import render_invocation

    result = {"success": True, "knowledgeBaseName": "Pumps", "query": "install", "resultCount": 1,
              "results": [{"rank": 1, "similarity": 0.8, "source": "install.md", "path": "guides/pump/install.md",
                           "section": "Install > Debian", "page": None, "content": "apt-get install pump."}]}
    printed = rendered(render_invocation, result)
    header = next(line for line in printed.splitlines() if "score" in line)
    assert "path" in header and "section" in header
    assert "guides/pump/install.md" in printed and "Install > Debian" in printed


# --- --help ---------------------------------------------------------------------------------------
def test_help_paragraphs_wrap_to_the_terminal():
    """A docstring wrapped for the source must not print ragged in an 80-column terminal."""
    from typer.testing import CliRunner

    from kbcli.main import app

    shown = CliRunner().invoke(app, ["docs", "upload", "--help"], prog_name="kb", env={"COLUMNS": "80"},
                               terminal_width=80).output
    lines = [line.strip() for line in shown.splitlines()]
    assert not [line for line in lines if line.endswith("does); a file")], shown
    words = " ".join(lines)
    assert "as `aws s3 sync` does); a file named, or matched by a glob" in words
