"""Every example in README.md and docs/*.md runs as pasted, against the local stack.

A fenced block whose info string is bash, python or yaml is an example. The line just before it may
say how to treat it:
  <!-- example: skip: <reason> -->   never run (the reason is required)
  <!-- example: parse -->            parsed only: bash -n, compile(), yaml.safe_load_all
  <!-- example: file NAME -->        written to NAME in the working folder, for a later block to use
Unmarked blocks run in order, one markdown file at a time, in a fresh working folder that holds
links to the repository's .kb, .venv, samples, localstack and Makefile (so a block reads as it does
from the repository's folder), with .kb/local.env's variables exported. Bash blocks of one file share
their shell variables and functions, as one terminal would; python blocks run with the repository's
.venv python; an unmarked yaml block is parsed. What a file's examples create on the stack (knowledge
bases, agents) is deleted afterwards."""
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LANGUAGES = {"bash", "python", "yaml"}
LINKED = (".kb", ".venv", "samples", "localstack", "Makefile")
BLOCK_TIMEOUT_S = 180
DIRECTIVE = re.compile(r"^<!--\s*example:\s*(?P<kind>skip|parse|file)\b\s*:?\s*(?P<arg>.*?)\s*-->\s*$")

pytestmark = pytest.mark.e2e


@dataclass
class Block:
    path: Path
    line: int  # the fence's line, 1-based
    language: str
    code: str
    kind: str = "run"  # run, skip, parse or file
    arg: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} ({self.language}, {self.kind})"


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found, n = [], 0
    while n < len(lines):
        line = lines[n]
        directive = DIRECTIVE.match(line.strip())
        if line.strip().startswith("<!--") and "example:" in line and not directive:
            raise AssertionError(f"{path.relative_to(ROOT)}:{n + 1}: an example directive this runner does not "
                                 f"know: {line.strip()!r}")
        fence = re.match(r"^(`{3,}|~{3,})\s*([\w+-]*)", line)
        if directive and not (n + 1 < len(lines) and re.match(r"^(`{3,}|~{3,})", lines[n + 1])):
            raise AssertionError(f"{path.relative_to(ROOT)}:{n + 1}: an example directive must be the line just "
                                 "before a fenced block")
        if fence:
            marker, language = fence.group(1), fence.group(2).lower()
            end = next((m for m in range(n + 1, len(lines)) if lines[m].strip() == marker), None)
            assert end is not None, f"{path.relative_to(ROOT)}:{n + 1}: a fenced block that never closes"
            if language in LANGUAGES:
                block = Block(path, n + 1, language, "\n".join(lines[n + 1:end]) + "\n")
                before = DIRECTIVE.match(lines[n - 1].strip()) if n else None
                if before:
                    block.kind, block.arg = before.group("kind"), before.group("arg")
                    if block.kind in ("skip", "file") and not block.arg:
                        raise AssertionError(f"{block.where}: `{block.kind}` needs "
                                             + ("a reason" if block.kind == "skip" else "a file name"))
                found.append(block)
            n = end
        n += 1
    return found


def read_env_file(path: Path) -> dict:
    """KEY=value lines, with or without `export `, values optionally quoted."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.removeprefix("export ").split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = shlex.split(value)[0]
        values[key.strip()] = value
    return values


def documentation() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


# Runs a bash block with the variables and functions the file's earlier blocks left, and saves
# them for the next (bash's own variables and read-only ones are left out).
_BASH_OWN = ("BASH[A-Z_]*|EUID|PPID|UID|SHELLOPTS|FUNCNAME|GROUPS|DIRSTACK|PIPESTATUS|_|RANDOM|SRANDOM|LINENO|"
             "SECONDS|HISTCMD|EPOCH[A-Z]*|COMP_WORDBREAKS|OPTIND|OPTERR|PWD|OLDPWD|SHLVL|EXAMPLE_STATE|EXAMPLE_BLOCK")
BASH_RUNNER = f"""
if [ -f "$EXAMPLE_STATE" ]; then . "$EXAMPLE_STATE" 2>/dev/null || true; fi
set -eo pipefail
. "$EXAMPLE_BLOCK"
set +e
declare -p | grep -Ev '^declare -[a-zA-Z]*r|^declare -[-a-zA-Z]* ({_BASH_OWN})=' > "$EXAMPLE_STATE.new"
declare -f >> "$EXAMPLE_STATE.new"
mv "$EXAMPLE_STATE.new" "$EXAMPLE_STATE"
"""


def _api(env: dict, method: str, path: str) -> dict:
    request = urllib.request.Request(env["KB_API_URL"] + path, method=method,
                                     headers={"Authorization": f"Bearer {env['KB_API_KEY']}"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)


def _every(env: dict, path: str) -> list[dict]:
    items, token = [], None
    while True:
        data = _api(env, "GET", path + (f"?nextToken={urllib.parse.quote(token)}" if token else ""))["data"]
        items += data["items"]
        token = data.get("nextToken")
        if not token:
            return items


def _owned(env: dict) -> set[tuple[str, str]]:
    """What the demo key sees, every page: the examples' leftovers are what this gains."""
    return {("knowledge-bases", k["id"]) for k in _every(env, "/knowledge-bases")} | {
        ("agents", a["id"]) for a in _every(env, "/agents")}


def _failure(block: Block, result: subprocess.CompletedProcess) -> str:
    tail = lambda text: "\n".join(text.strip().splitlines()[-25:])  # noqa: E731
    return (f"{block.where}: the example failed (exit {result.returncode})\n--- example ---\n{block.code}"
            f"--- stdout ---\n{tail(result.stdout)}\n--- stderr ---\n{tail(result.stderr)}")


def run_block(block: Block, folder: Path, env: dict) -> None:
    if block.kind == "skip":
        return
    if block.kind == "file":
        target = folder / block.arg
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code)
        return
    if block.language == "yaml" or block.kind == "parse":
        try:
            if block.language == "yaml":
                list(yaml.safe_load_all(block.code))
            elif block.language == "python":
                compile(block.code, block.where, "exec")
            else:
                checked = subprocess.run(["bash", "-n"], input=block.code, text=True, capture_output=True)
                assert checked.returncode == 0, checked.stderr
        except Exception as exc:  # noqa: BLE001 - reported with the block's place
            pytest.fail(f"{block.where}: does not parse: {exc}")
        return
    script = folder / ".example-block"
    script.write_text(block.code)
    if block.language == "python":
        command = [str(ROOT / ".venv" / "bin" / "python"), str(script)]
    else:
        command = ["bash", "-c", BASH_RUNNER]
    try:
        result = subprocess.run(command, cwd=folder, env=env, text=True, capture_output=True,
                                timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.where}: still running after {BLOCK_TIMEOUT_S} s\n{exc.stdout}\n{exc.stderr}")
    if result.returncode != 0:
        pytest.fail(_failure(block, result))


@pytest.fixture(scope="module")
def stack_env(local_env) -> dict:
    env = {**os.environ, **read_env_file(ROOT / ".kb" / "local.env")}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(ROOT / ".venv")))
    return env


@pytest.mark.parametrize("path", documentation(), ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_run_as_pasted(path, stack_env, tmp_path):
    blocks = blocks_of(path)
    folder = tmp_path / "work"
    folder.mkdir()
    for name in LINKED:
        (folder / name).symlink_to(ROOT / name)
    env = {**stack_env, "EXAMPLE_STATE": str(tmp_path / "shell-state"),
           "EXAMPLE_BLOCK": str(folder / ".example-block")}
    before = _owned(stack_env)
    try:
        for block in blocks:
            started = time.monotonic()
            run_block(block, folder, env)
            print(f"{block.where}: {time.monotonic() - started:.1f} s")
    finally:
        for kind, ident in sorted(_owned(stack_env) - before):
            try:
                _api(stack_env, "DELETE", f"/{kind}/{ident}")
            except Exception:  # noqa: BLE001 - the example may have deleted it itself
                pass


def test_every_example_says_how_it_runs():
    """The runner's reading of the convention: a skip names its reason, and examples exist."""
    blocks = [b for p in documentation() for b in blocks_of(p)]
    assert sum(b.kind == "run" for b in blocks) >= 10
    assert all(b.arg for b in blocks if b.kind == "skip")
    readme = [b for b in blocks if b.path.name == "README.md" and b.kind == "run"]
    assert {b.language for b in readme} == {"bash", "python"}


def test_local_env_is_read_with_or_without_export(tmp_path):
    env = tmp_path / "local.env"
    env.write_text("export KB_API_URL=http://x/api\nKB_API_KEY='kbk_a b'\n# a comment\n\nREDIS_URL=redis://h:1/0\n")
    assert read_env_file(env) == {"KB_API_URL": "http://x/api", "KB_API_KEY": "kbk_a b", "REDIS_URL": "redis://h:1/0"}


def test_the_convention_is_read_as_written(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    page = tmp_path / "page.md"
    page.write_text("# T\n\n```bash\necho run\n```\n<!-- example: skip: needs AWS -->\n```python\nx\n```\n"
                    "<!-- example: file k/a.yaml -->\n```yaml\na: 1\n```\n<!-- example: parse -->\n```bash\nls\n```\n"
                    "```json\n{}\n```\n")
    assert [(b.line, b.language, b.kind, b.arg) for b in blocks_of(page)] == [
        (3, "bash", "run", ""), (7, "python", "skip", "needs AWS"), (11, "yaml", "file", "k/a.yaml"),
        (15, "bash", "parse", "")]
    page.write_text("<!-- example: skip -->\n```bash\nls\n```\n")
    with pytest.raises(AssertionError, match="needs a reason"):
        blocks_of(page)
    page.write_text("<!-- example: run later -->\n```bash\nls\n```\n")
    with pytest.raises(AssertionError, match="does not know"):
        blocks_of(page)
    page.write_text("<!-- example: parse -->\n\n```bash\nls\n```\n")
    with pytest.raises(AssertionError, match="just before a fenced block"):
        blocks_of(page)
