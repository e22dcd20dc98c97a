"""A document's status has one home (chalicelib/storage/document_status.py): its table of
transitions is walked here ("never stuck"), and each transition's SQL, read from the
source, is held to its row of the table."""
import ast
import inspect
import pathlib
import re
import textwrap

import yaml

from chalicelib.storage import document_status
from chalicelib.storage.document_status import (IN_FLIGHT, NEW, STATUSES, TRANSITIONS, VERDICTS,
                                                DocumentStatus)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SWEEP = "chalicelib.documents.reconcile"
_STATUS_LITERAL = re.compile(r"'(%s)'" % "|".join(STATUSES))


def _strings(node: ast.AST, names: dict) -> list[str]:
    """Every string expression under node, f-strings put together (a name of a module
    constant by its value, anything else as {...}); implicit concatenations are one string."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return []  # a docstring
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(value.value)
            elif isinstance(value.value, ast.Name) and isinstance(names.get(value.value.id), str):
                parts.append(names[value.value.id])
            else:
                parts.append("{...}")
        return ["".join(parts)]
    return [s for child in ast.iter_child_nodes(node) for s in _strings(child, names)]


def _function_sql(function) -> list[str]:
    module = inspect.getmodule(function)
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return [s for s in _strings(tree, vars(module)) if re.search(r"\b(UPDATE|INSERT INTO|SELECT)\b", s)]


def _split_where(sql: str) -> tuple[str, str]:
    """(what the statement writes, its outer WHERE): split at the first WHERE outside parentheses."""
    depth = 0
    for i, ch in enumerate(sql):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and sql.startswith(" WHERE ", i):
            return sql[:i], sql[i:]
    return sql, ""


def _writes_status(sql: str) -> bool:
    update = re.search(r"UPDATE documents SET (.*)", sql)
    if update and re.search(r"\bstatus\s*=", _split_where(update.group(1))[0]):
        return True
    insert = re.search(r"INSERT INTO documents \(([^)]*)\)", sql)
    return bool(insert and re.search(r"\bstatus\b", insert.group(1)))


def _statuses(text: str) -> set[str]:
    return set(_STATUS_LITERAL.findall(text))


def test_every_status_short_of_a_verdict_reaches_one():
    edges = {s: {t.target for t in TRANSITIONS if s in t.sources} for s in DocumentStatus}
    assert set(IN_FLIGHT) == set(DocumentStatus) - VERDICTS == {"PENDING", "PROCESSING"}
    for start in IN_FLIGHT:
        seen, frontier = set(), {DocumentStatus(start)}
        while frontier:
            seen |= frontier
            frontier = {t for s in frontier for t in edges[s]} - seen
        assert seen & VERDICTS, f"{start} has no way to a verdict"
    assert {t.target for t in TRANSITIONS if NEW in t.sources} <= set(DocumentStatus)


def test_the_sweep_alone_takes_every_status_short_of_a_verdict_to_one():
    """Whether or not a run is alive, the reconcile sweep can end each in-flight status
    (after its restarts), and its two queries between them look at every such status."""
    for status in IN_FLIGHT:
        assert any(SWEEP in t.callers and status in t.sources and t.target in VERDICTS for t in TRANSITIONS), status
    looked_at = set()
    for query in (document_status.unfinished, document_status.stale_registrations):
        sql, = _function_sql(query)
        looked_at |= _statuses(_split_where(sql)[1])
    assert looked_at == set(IN_FLIGHT)


def test_each_transition_sets_only_the_status_of_its_row():
    for transition in TRANSITIONS:
        writes = [sql for sql in _function_sql(transition.function) if _writes_status(sql)]
        assert writes, f"{transition.function.__name__} writes no status"
        for sql in writes:
            written, where = _split_where(sql)
            assert _statuses(written) == {transition.target}, (transition.function.__name__, sql)
            guards = _statuses(where)  # a statement guarded by the status it finds: those are its sources
            assert not guards or guards == transition.sources, (transition.function.__name__, sql)


def _module_constants(tree: ast.Module) -> dict:
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for target in node.targets if isinstance(target, ast.Name)}


def test_no_other_module_writes_a_document_status():
    writers = []
    for path in (ROOT / "chalicelib").rglob("*.py"):
        if path.name != "document_status.py":
            tree = ast.parse(path.read_text())
            writers += [(path.name, sql) for sql in _strings(tree, _module_constants(tree)) if _writes_status(sql)]
    assert writers == []
    here = {name for name, value in vars(document_status).items()
            if inspect.isfunction(value) and value.__module__ == document_status.__name__
            and any(_writes_status(sql) for sql in _function_sql(value))}
    assert here == {t.function.__name__ for t in TRANSITIONS}


def test_the_callers_in_the_table_are_the_modules_that_call_each_transition():
    calls: dict[str, set[str]] = {}
    for path in (ROOT / "chalicelib").rglob("*.py"):
        module = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "document_status"):
                calls.setdefault(node.func.attr, set()).add(module)
    for transition in TRANSITIONS:
        assert calls.get(transition.function.__name__) == set(transition.callers), transition.function.__name__


def test_the_schema_and_the_api_name_the_same_statuses():
    init = (ROOT / "chalicelib/storage/migrations/0001_init.sql").read_text()
    check = re.search(r"status\s+text NOT NULL DEFAULT 'PENDING'\s+CHECK \(status IN \(([^)]*)\)\)", init)
    assert tuple(re.findall(r"'(\w+)'", check.group(1))) == STATUSES
    schemas = yaml.safe_load((ROOT / "docs/openapi.yaml").read_text())["components"]["schemas"]
    document = next(s for s in schemas.values() if "contentHash" in s.get("properties", {}))
    assert tuple(document["properties"]["status"]["enum"]) == STATUSES


def test_the_vector_store_view_names_every_status_and_filters_read_any_case():
    from chalicelib.compat.openai import STATUSES as AS_FILE_STATUS
    assert set(AS_FILE_STATUS) == set(DocumentStatus)
    assert document_status.parse_status("completed") is DocumentStatus.PROCESSED  # seed 004's name
    assert document_status.parse_status("Failed") is DocumentStatus.FAILED
    assert document_status.parse_status(" pending ") is DocumentStatus.PENDING
    assert document_status.parse_status("done") is None
