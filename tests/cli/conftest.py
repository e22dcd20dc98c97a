"""The `kb` command line, each command a process of its own (tests/cli/forked.py) against the
running local stack, as a fresh tenant of its own (a key issued as `make key` does)."""
import json
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from tests.cli.forked import Runner
from tests.conftest import ROOT
from tests.e2e.conftest import new_key

# Small real documents (tests/data/docs), and where each goes in the uploaded folder.
REAL_FILES = {"crazyones.pdf": "crazyones.pdf", "pypdf-extract-text.md": "pypdf-extract-text.md",
              "par-known-paragraphs.docx": "word/par-known-paragraphs.docx",
              "two-different-pages.pdf": "word/nested/two-different-pages.pdf"}


_runner: Optional[Runner] = None


@dataclass
class Cli:
    env: dict
    cwd: Path

    def run(self, *args: str, expect: Optional[int] = 0, stdin: Optional[str] = None,
            env: Optional[dict] = None, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
        global _runner
        _runner = _runner or Runner(clean_env())
        done = _runner.run(list(args), env=env or self.env, cwd=cwd or self.cwd, stdin=stdin, timeout=300)
        # Whatever happens, a person never sees a traceback.
        assert "Traceback" not in done.stderr + done.stdout, done.stderr
        if expect is not None:
            assert done.returncode == expect, (args, done.returncode, done.stdout[-2000:], done.stderr[-2000:])
        return done

    def json(self, *args: str, expect: int = 0, **kwargs):
        done = self.run(*args, "--json", expect=expect, **kwargs)
        return json.loads(done.stdout)

    def error(self, *args: str, code: str, expect: int = 1, **kwargs) -> dict:
        """Runs a command that must fail, in --json mode: nothing on stdout, the error
        as JSON on stderr."""
        done = self.run(*args, "--json", expect=expect, **kwargs)
        assert done.stdout == "", done.stdout
        error = json.loads(done.stderr.strip().splitlines()[-1])["error"]
        assert error["code"] == code, error
        return error


def rendered(render, *args, **kwargs) -> str:
    """What a `kb` renderer prints, as text: output.out swapped for a recording console meanwhile."""
    from rich.console import Console

    from kbcli import output

    saved = output.out
    output.out = Console(record=True, width=200, highlight=False)
    try:
        render(*args, **kwargs)
        return output.out.export_text()
    finally:
        output.out = saved


def clean_env(**values: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update(COLUMNS="200", PYTHONPATH=str(ROOT), **values)
    return env


@pytest.fixture(scope="session")
def cli_key(local_env) -> str:
    return new_key(local_env, f"cli-{secrets.token_hex(4)}", "cli-tester")


@pytest.fixture(scope="session")
def cli(local_env, cli_key, tmp_path_factory) -> Cli:
    # cwd outside the repository, so no .kb/local.env is found above it: the environment decides.
    return Cli(env=clean_env(KB_API_URL=local_env["KB_API_URL"], KB_API_KEY=cli_key),
               cwd=tmp_path_factory.mktemp("cli-cwd"))


@pytest.fixture(scope="session")
def kb(cli) -> str:
    created = cli.json("kbs", "create", f"CLI docs {secrets.token_hex(3)}", "--description", "uploaded by kb")
    yield created["id"]
    cli.run("kbs", "delete", created["id"], "--yes", expect=None)


@pytest.fixture(scope="session")
def upload_folder(shared_docs, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("upload")
    for name, target in REAL_FILES.items():
        (folder / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared_docs / name, folder / target)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\nthis is not a PDF body\n")
    (folder / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n a picture, which the service does not read")
    # A name that says nothing: the API refuses it from the first bytes kb sends with its registration.
    (folder / "backup.dat").write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4)
    (folder / "skipped.txt").write_text("excluded on the command line")
    (folder / ".hidden.md").write_text("hidden files are not walked")
    return folder


@pytest.fixture(scope="session")
def uploaded(cli, kb, upload_folder) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """One command uploads the whole folder and waits for ingestion."""
    done = cli.run("docs", "upload", "-r", str(upload_folder), "--kb", kb, "--wait", "--timeout", "240",
                   "--exclude", "skipped.*", "--metadata", '{"team": "cli"}', "--json", expect=None)
    return done, json.loads(done.stdout)
