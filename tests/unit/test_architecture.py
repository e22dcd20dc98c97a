"""docs/architecture.md kept true: chalicelib's import graph (every import, at module level
and inside functions, read with ast) has no circle, and no module imports from a layer above
its own (the document's "Upward imports" section names none, and the test holds it to none)."""
import ast
import re
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "chalicelib"
DOC = ROOT / "docs" / "architecture.md"


def modules() -> dict[str, Path]:
    """Every module of chalicelib by its dotted name (a package by its __init__.py)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, module: ast.ImportFrom, known: dict, importer: str) -> list[str]:
    """The chalicelib modules a `from … import name` reaches: the named submodule when there
    is one, else the module it is taken from."""
    if module.level:  # relative: from the importer's package upward
        base = importer.split(".")
        if known[importer].name != "__init__.py":
            base.pop()
        base = base[:len(base) - (module.level - 1)]
        source = ".".join(base + ([module.module] if module.module else []))
    else:
        source = module.module or ""
    if f"{source}.{name}" in known:
        return [f"{source}.{name}"]
    return [_owner(source, known)] if _owner(source, known) else []


def _owner(name: str, known: dict):
    """The chalicelib module that defines a dotted name (a module, or one inside it)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph = {}
    for name, path in known.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(_owner(a.name, known) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    targets.update(_imported(alias.name, node, known, name))
        targets.discard(None)
        targets.discard(name)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _section(title: str) -> list[str]:
    text = DOC.read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/architecture.md has no '## {title}' section"
    return match.group(1).splitlines()


def layers() -> dict[str, int]:
    """Each top-level package or module of chalicelib by its layer, 0 the top: the numbered
    list of docs/architecture.md, one item a layer, its names in backticks before the colon."""
    ranks, rank = {}, 0
    for line in _section("Layers"):
        item = re.match(r"\d+\. (.*?)(?::|$)", line)
        if item:
            for name in re.findall(r"`([a-z_]+)`", item.group(1)):
                assert name not in ranks, f"{name} is in two layers"
                ranks[name] = rank
            rank += 1
    return ranks


def allowed_upward() -> set[tuple[str, str]]:
    """The upward imports the document names, each `importer` → `imported` with its reason."""
    pairs = set()
    for line in _section("Upward imports"):
        pair = re.match(r"- `(chalicelib[\w.]*)` → `(chalicelib[\w.]*)`: \S", line)
        if pair:
            pairs.add(pair.groups())
    return pairs


def _unit(module: str) -> str:
    """The top-level package or module of chalicelib a module belongs to."""
    return module.split(".")[1]


def upward(graph: dict[str, set[str]], ranks: dict[str, int]) -> set[tuple[str, str]]:
    return {(a, b) for a, targets in graph.items() for b in targets
            if a != "chalicelib" and b != "chalicelib" and ranks[_unit(b)] < ranks[_unit(a)]}


def test_every_package_and_module_of_chalicelib_has_a_layer():
    units = {_unit(m) for m in modules() if m != "chalicelib"}
    ranks = layers()
    assert sorted(units - ranks.keys()) == [], "place them in docs/architecture.md's layers"
    assert sorted(ranks.keys() - units) == [], "docs/architecture.md names what chalicelib does not hold"


def test_the_imports_make_no_circle():
    assert circles(import_graph()) == []


def test_no_import_goes_up_a_layer():
    allowed = allowed_upward()
    assert allowed == set(), "no import goes up a layer: name the shape you need in the lower layer"
    found = upward(import_graph(), layers())
    assert sorted(found - allowed) == []
    assert sorted(allowed - found) == [], "docs/architecture.md names an upward import the code no longer has"


def test_the_graph_sees_imports_inside_functions_and_both_kinds_of_circle():
    """The reader itself: an import inside a function counts, a circle through three modules
    is found, and an import from the layer above is caught."""
    tree = ast.parse("def f():\n    from chalicelib.api.views import kb_view\n")
    assert any(isinstance(n, ast.ImportFrom) and n.module == "chalicelib.api.views" for n in ast.walk(tree))
    graph = {"chalicelib.a": {"chalicelib.b"}, "chalicelib.b": {"chalicelib.c"}, "chalicelib.c": {"chalicelib.a"},
             "chalicelib.d": {"chalicelib.a"}}
    assert circles(graph) == [["chalicelib.a", "chalicelib.b", "chalicelib.c"]]
    assert upward({"chalicelib.b.x": {"chalicelib.a.y"}, "chalicelib.a.y": set()}, {"a": 0, "b": 1}) == {
        ("chalicelib.b.x", "chalicelib.a.y")}
    graph = import_graph()
    assert "chalicelib.storage.db" in graph["chalicelib.storage"]  # from a package's __init__
    assert "chalicelib.errors" in graph["chalicelib.validate"]
