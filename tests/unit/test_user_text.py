"""What users read never names the makers' bookkeeping: requirement seeds, issue numbers,
migration numbers, commit hashes or the dates of measurement runs. Checked in the README,
docs/ (the requirements trace, tests/conformance/REQUIREMENTS.md, is for the makers), every `kb --help`, the
console's files and the strings the API and the CLI can print (docstrings and comments aside)."""
import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

INTERNAL = [
    ("a requirement seed", re.compile(r"\bseeds?\s*(?:#|no\.?\s*)?0*\d+\b|\bseed[- ]?0\d\d\b", re.I)),
    ("an issue number", re.compile(r"\bissues?\s*#?\d+\b|(?<![\w&])#\d{1,4}\b(?!-)", re.I)),
    ("a migration number", re.compile(r"\bmigrations?\s+(?:\d{4}\b|and\s+\d{4})|(?<![\w.])0\d{3}_[a-z]\w*"
                                      r"|\bmigrations?\s+\(?\d{4}", re.I)),
    ("a migration number", re.compile(r"(?<![\w.\-/:#])0\d{3}(?![\w.\-/:%])")),
    ("a commit hash", re.compile(r"\b(?:commit|head|at|hash)\s+(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
                                 r"|(?<![\w.\-/:#=%])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?![\w\-/%])",
                                 re.I)),
    ("a date", re.compile(r"(?<![-\w])20\d\d-[01]\d-[0-3]\d\b")),
]


def _report_date() -> str | None:
    """The benchmark report's own date: the json's when it names one, else the report's first line."""
    data = json.loads((ROOT / "docs" / "benchmarks.json").read_text())
    for key in ("date", "producedOn", "produced", "runDate"):
        if isinstance(data.get(key), str):
            return data[key][:10]
    match = re.search(r"Produced by `make bench` on (20\d\d-\d\d-\d\d)", (ROOT / "docs" / "benchmarks.md").read_text())
    return match.group(1) if match else None


def _findings(text: str, where: str, allowed_dates: frozenset = frozenset()) -> list[str]:
    found = []
    for what, pattern in INTERNAL:
        for match in pattern.finditer(text):
            if what == "a date" and match.group(0) in allowed_dates:
                continue
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{where}:{line}: {what}: {match.group(0)!r}")
    return found


def _user_docs() -> list[Path]:
    docs = sorted((ROOT / "docs").glob("*.md"))
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *docs]


@pytest.mark.parametrize("path", _user_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_documentation_names_no_internal_bookkeeping(path):
    if not path.exists():
        pytest.skip(f"{path.name} is absent")
    date = _report_date()
    allowed = frozenset({date} if date else ())
    assert not _findings(path.read_text(), str(path.relative_to(ROOT)), allowed), \
        "\n".join(_findings(path.read_text(), str(path.relative_to(ROOT)), allowed))


def test_the_date_allowed_is_the_reports_own():
    """The one date the docs may name is the benchmark report's, and only where they quote it."""
    date = _report_date()
    for path in _user_docs():
        if not path.exists() or not date:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if date in line and path.name not in ("README.md", "benchmarks.md"):
                pytest.fail(f"{path.relative_to(ROOT)}:{n}: names the report's date outside the figures")


def _help_texts() -> list[tuple[str, str]]:
    import typer
    from typer.testing import CliRunner

    from kbcli.main import app

    runner = CliRunner()
    root = typer.main.get_command(app)  # built once: CliRunner.invoke(app) would build it at every call
    texts = []

    def walk(command, path: list[str]) -> None:
        with runner.isolation(env={"COLUMNS": "200", "NO_COLOR": "1"}) as (out, *_):
            try:
                root.main([*path, "--help"], prog_name="kb", standalone_mode=False)
            except SystemExit as exit_:
                assert not exit_.code, f"kb {' '.join(path)} --help failed"
            output = out.getvalue().decode()
        assert "Usage: kb" in output, f"kb {' '.join(path)} --help printed no usage: {output}"
        flat = re.sub(r"[│╭╮╰╯─]+", " ", output)
        texts.append((f"kb {' '.join(path)} --help".replace("  ", " "), re.sub(r"\s+", " ", flat)))
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, [*path, name])

    walk(root, [])
    return texts


def test_cli_help_names_no_internal_bookkeeping():
    texts = _help_texts()
    assert len(texts) > 30, "every kb command's --help is read"
    found = [f for where, text in texts for f in _findings(text, where)]
    assert not found, "\n".join(found)


def test_console_names_no_internal_bookkeeping():
    files = [p for p in (ROOT / "console").rglob("*") if p.is_file() and p.suffix in (".html", ".js", ".css")]
    assert files
    found = [f for p in files for f in _findings(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "\n".join(found)


LOG_CALLS = {"debug", "info", "warning", "error", "exception", "critical"}


def _literals(path: Path) -> list[tuple[int, str]]:
    """The strings a module can print or answer: every literal but docstrings and log lines, which
    are for the service's operators (f-strings' parts too)."""
    tree = ast.parse(path.read_text())
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOG_CALLS \
                and isinstance(node.func.value, ast.Name) and node.func.value.id in ("logger", "log", "logging"):
            skipped |= {id(n) for arg in node.args for n in ast.walk(arg)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skipped.add(id(first.value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped]


@pytest.mark.parametrize("package", ["chalicelib", "kbcli"])
def test_messages_name_no_internal_bookkeeping(package):
    found = [f"{path.relative_to(ROOT)}:{line}: {finding.split(': ', 1)[1]}"
             for path in sorted((ROOT / package).rglob("*.py"))
             for line, text in _literals(path) for finding in _findings(text, "")]
    assert not found, "\n".join(found)


def test_readme_reads_in_ten_minutes():
    """A guide, not a notebook: at most 350 lines, none over 120 characters outside code blocks."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 350, f"README.md has {len(lines)} lines"
    in_code, long = False, []
    for n, line in enumerate(lines, 1):
        if line.lstrip().startswith(("```", "~~~")):
            in_code = not in_code
        elif not in_code and len(line) > 120:
            long.append(f"README.md:{n}: {len(line)} characters")
    assert not long, "\n".join(long)
