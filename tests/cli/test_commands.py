"""kb kbs, agents, tools and keys against the running stack; errors and configuration."""
import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import clean_env

pytestmark = pytest.mark.e2e


def test_knowledge_base_round_trip(cli):
    name = f"Round trip {secrets.token_hex(3)}"
    kb = cli.json("kbs", "create", name, "--description", "first", "--chunk-tokens", "300",
                  "--chunking-strategy", "semantic", "--visibility", "org")
    assert (kb["name"], kb["description"], kb["visibility"]) == (name, "first", "org")
    assert (kb["chunking"]["chunkTokens"], kb["chunking"]["strategy"]) == (300, "semantic")
    assert kb["id"] in [k["id"] for k in cli.json("kbs", "list")["items"]]
    assert cli.json("kbs", "show", kb["id"])["chunking"]["chunkTokens"] == 300
    shown = cli.run("kbs", "show", kb["id"]).stdout
    assert name in shown and "semantic, 300 tokens" in shown
    assert "'fixed', 'semantic'" in cli.run("kbs", "create", "x", "--chunking-strategy", "topics", expect=2).stderr

    changed = cli.json("kbs", "update", kb["id"], "--name", name + " renamed", "--visibility", "private")
    assert (changed["name"], changed["visibility"], changed["description"]) == (name + " renamed", "private", "first")
    cli.error("kbs", "update", kb["id"], code="NOTHING_TO_CHANGE", expect=2)
    cli.error("kbs", "create", "x", "--chunk-tokens", "5", code="INVALID_INPUT")

    assert cli.json("kbs", "delete", kb["id"], "--yes") == {"id": kb["id"], "deleted": True}
    cli.error("kbs", "show", kb["id"], code="NOT_FOUND")
    assert kb["id"] not in [k["id"] for k in cli.json("kbs", "list")["items"]]


def test_unknown_knowledge_base_prints_the_api_error(cli, tmp_path):
    done = cli.run("kbs", "show", "kb_0000000000000000", expect=1)
    assert "NOT_FOUND" in done.stderr and "kb_0000000000000000" in done.stderr and done.stdout == ""
    error = cli.error("kbs", "show", "kb_0000000000000000", code="NOT_FOUND")
    assert error["status"] == 404
    (tmp_path / "a.md").write_text("# hello")
    done = cli.run("docs", "upload", str(tmp_path / "a.md"), "--kb", "kb_0000000000000000", expect=1)
    assert "NOT_FOUND" in done.stderr


def test_connection_refused_is_a_clear_message(cli):
    done = cli.run("kbs", "list", "--api-url", "http://127.0.0.1:9/api", expect=1)
    assert "CONNECTION_FAILED" in done.stderr and "127.0.0.1:9" in done.stderr


def test_missing_configuration_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "kbcli", "kbs", "list"], capture_output=True, text=True,
                          env=clean_env(), cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "NO_API_URL" in done.stderr and "Traceback" not in done.stderr


def test_settings_come_from_the_nearest_local_env(cli, local_env, cli_key, kb, tmp_path):
    (tmp_path / ".kb").mkdir()
    (tmp_path / ".kb" / "local.env").write_text(f"KB_API_URL={local_env['KB_API_URL']}\nKB_API_KEY={cli_key}\n")
    below = tmp_path / "a" / "b"
    below.mkdir(parents=True)
    env = clean_env()
    listed = cli.json("kbs", "list", env=env, cwd=below)
    assert kb in [k["id"] for k in listed["items"]]
    # An option wins over the file; so does the global form before the command.
    cli.error("kbs", "list", "--api-key", "kbk_wrong", code="UNAUTHORIZED", env=env, cwd=below)
    done = cli.run("--api-key", "kbk_wrong", "kbs", "list", expect=1, env=env, cwd=below)
    assert "UNAUTHORIZED" in done.stderr


def test_agent_with_a_quick_added_tool(cli, kb, uploaded):
    agent = cli.json("agents", "create", "CLI support bot", "--description", "answers from the docs")
    assert agent["id"].startswith("agent_") and agent["availableTools"] == []
    assert agent["id"] in [a["id"] for a in cli.json("agents", "list")["items"]]

    offered = {k["id"]: k for k in cli.json("tools", "browse", "--agent", agent["id"])["items"]}
    assert offered[kb]["linked"] is False
    tool = cli.json("tools", "add", "--agent", agent["id"], "--kb", kb, "--quick")
    assert tool["id"].startswith("tool_kb_") and tool["name"].startswith("search_cli_docs")
    assert tool["config"]["knowledgeBaseId"] == kb
    offered = {k["id"]: k for k in cli.json("tools", "browse", "--agent", agent["id"])["items"]}
    assert offered[kb]["linked"] is True
    cli.error("tools", "add", "--agent", agent["id"], "--kb", kb, "--quick", code="KB_ALREADY_LINKED")

    result = cli.json("tools", "invoke", tool["id"], "the crazy ones who change the world", "--agent", agent["id"])
    assert result["success"] is True and result["results"][0]["source"] == "crazyones.pdf"
    table = cli.run("tools", "invoke", tool["id"], "the crazy ones", "--agent", agent["id"]).stdout
    assert "crazyones.pdf" in table
    # By its name within the agent, as well as by id.
    by_name = cli.json("tools", "invoke", tool["name"], "the crazy ones who change the world", "--agent", agent["id"])
    assert by_name["results"][0]["source"] == "crazyones.pdf"
    error = cli.error("tools", "invoke", "search_nothing_here", "q", "--agent", agent["id"], code="NOT_FOUND")
    assert "search_nothing_here" in error["message"]

    edited = cli.json("tools", "edit", tool["name"], "--agent", agent["id"], "--name", "search_manuals",
                      "--top-k", "1")
    assert edited["name"] == "search_manuals" and edited["config"]["defaultTopK"] == 1
    assert len(cli.json("tools", "invoke", "search_manuals", "pdf pages", "--agent", agent["id"])["results"]) <= 1
    listed = cli.json("tools", "list", "--agent", agent["id"])["items"]
    assert [(t["id"], t["status"]) for t in listed] == [(tool["id"], "ok")]
    openai = json.loads(cli.run("tools", "list", "--agent", agent["id"], "--format", "openai").stdout)
    assert openai[0]["function"]["name"] == "search_manuals"

    cli.error("tools", "configure", "--agent", agent["id"], "--kb", "kb_0000000000000000", "--name", "other",
              "--description", "d", code="NOT_FOUND")

    assert cli.json("tools", "remove", "search_manuals", "--agent", agent["id"], "--yes") == {"id": tool["id"],
                                                                                           "deleted": True}
    assert cli.json("tools", "list", "--agent", agent["id"])["items"] == []
    cli.error("tools", "invoke", tool["id"], "q", "--agent", agent["id"], code="NOT_FOUND")
    assert cli.json("agents", "delete", agent["id"], "--yes")["deleted"] is True
    cli.error("agents", "show", agent["id"], code="NOT_FOUND")


def test_invoking_a_tool_whose_knowledge_base_is_gone_exits_1(cli):
    doomed = cli.json("kbs", "create", f"Doomed {secrets.token_hex(3)}")
    agent = cli.json("agents", "create", "Orphan bot")
    tool = cli.json("tools", "configure", "--agent", agent["id"], "--kb", doomed["id"], "--name", "search_doomed",
                    "--description", "Search the doomed knowledge base", "--min-score", "0.5")
    assert tool["config"]["defaultMinScore"] == 0.5
    cli.json("kbs", "delete", doomed["id"], "--yes")
    assert cli.json("tools", "list", "--agent", agent["id"])["items"][0]["status"] == "knowledge_base_missing"
    done = cli.run("tools", "invoke", tool["id"], "anything", "--agent", agent["id"], expect=1)
    assert "Knowledge base not found" in done.stderr
    cli.json("agents", "delete", agent["id"], "--yes")


def test_api_keys_create_use_and_revoke(cli):
    created = cli.json("keys", "create", "cli test key", "--expires-in-days", "2")
    assert created["key"].startswith("kbk_") and created["expiresAt"]
    listed = {k["id"]: k for k in cli.json("keys", "list")["items"]}
    assert listed[created["id"]]["prefix"] and "key" not in listed[created["id"]]
    assert cli.json("kbs", "list", "--api-key", created["key"])["items"] is not None

    cli.error("keys", "revoke", created["id"], code="CONFIRMATION_REQUIRED", expect=2)
    cli.json("keys", "revoke", created["id"], "--yes")
    cli.error("kbs", "list", "--api-key", created["key"], code="UNAUTHORIZED")
    table = cli.run("keys", "list").stdout
    assert created["id"] in table and "revoked" in table


def test_help_everywhere_and_completion(cli):
    from typer.main import get_command
    from typer.testing import CliRunner

    from kbcli.main import app

    root = get_command(app)
    commands = {(): root}
    for name, group in root.commands.items():
        commands[(name,)] = group
        commands.update({(name, sub): leaf for sub, leaf in getattr(group, "commands", {}).items()})
    assert {("docs", "upload"), ("tools", "invoke"), ("keys", "revoke"), ("search",), ("sync",)} <= set(commands)
    runner = CliRunner()
    for path, found in commands.items():
        answer = runner.invoke(app, [*path, "--help"], prog_name="kb")
        assert answer.exit_code == 0 and "Usage: kb" in answer.output, (path, answer.output)
        if not hasattr(found, "commands"):  # every command, not group, takes --json
            assert "--json" in answer.output, path
    completion = cli.run("--show-completion", "bash").stdout
    assert "_KB_COMPLETE" in completion


def test_console_script_is_installed():
    kb = Path(sys.executable).parent / "kb"
    assert kb.exists(), "the kb console script is missing: pip install -e . (make up does it)"
    done = subprocess.run([str(kb), "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("kb ")
