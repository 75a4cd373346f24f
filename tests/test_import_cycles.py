"""No import cycles in the field wing (issue 34): none in store/ and fleet/, no new one in serve/.

The graph is read from the source (every `import` and `from ... import`, also those inside
functions: a deferred import is still an arrow), so a cycle kept alive only by importing
late is found. Modules are jsprof.* files; `from pkg import name` is an arrow to
`pkg.name` when that is a module, else to the package.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

# The field wing (issue 34): store/, fleet/ and serve/ have no cycle at all (serve.app <->
# serve.forward was the last: trace_document is serve/document.py's now). The core's
# modules (analysis, formats, render, trace...) import each other late in places; their
# cycles are not this test's.
WING = ("jsprof.store", "jsprof.fleet", "jsprof.serve")
KNOWN: list[set[str]] = []
# Packages that must have none at all.
ACYCLIC = ("jsprof.store", "jsprof.fleet")


def _modules() -> dict[str, Path]:
    out = {}
    for p in (SRC / "jsprof").rglob("*.py"):
        parts = p.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for a in node.names:
                    full = f"{base}.{a.name}"
                    deps.add(full if full in mods else base)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def test_the_graph_is_read() -> None:
    g = import_graph()
    # arrows the scan must see (a broken scan would find no cycle anywhere)
    assert "jsprof.store.cursor" in g["jsprof.store.tables.manifest"]
    assert "jsprof.fleet.release" in g["jsprof.fleet.during"]
    assert {"jsprof.store.store"} <= g["jsprof.store.retention"]  # a deferred import counts
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_no_import_cycles_in_the_field_wing() -> None:
    found = cycles(import_graph())
    wing = [sorted(c) for c in found if any(m.startswith(ACYCLIC) for m in c)]
    assert wing == [], "import cycles in store/ or fleet/"


def test_no_new_import_cycles_in_serve() -> None:
    new = [sorted(c) for c in cycles(import_graph())
           if any(m.startswith(WING) for m in c) and not any(c <= k for k in KNOWN)]
    assert new == [], "a new import cycle in the field wing (or a known one grown)"


def test_the_raw_store_is_below_the_tables() -> None:
    """Issue 34: the raw segment store knows nothing of the tables (a retention cut of
    both is `store/retention.py`'s, under the tables' lock), and the tables read raw
    uploads only through what a compaction is handed (`tables.compact.UploadSource`)."""
    g = import_graph()
    assert not {d for d in g["jsprof.store.store"] if d.startswith("jsprof.store.tables")}
    tables = [m for m in g if m.startswith("jsprof.store.tables")]
    assert len(tables) >= 7
    assert not [m for m in tables if "jsprof.store.store" in g[m]]


def test_the_store_imports_no_private_name_of_another_module() -> None:
    """No module of store/ imports another's `_private` name: what crosses a module's
    border is named as public (Store.prune used to call compact's private lock)."""
    found = []
    for p in sorted((SRC / "jsprof" / "store").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                found += [f"{p.relative_to(SRC)}: {a.name}" for a in node.names
                          if a.name.startswith("_")]
    assert found == []


def test_the_fleet_reads_the_tables_through_one_module() -> None:
    """fleet/ imports of the store's tables go through `store/tables/view.py` alone."""
    g = import_graph()
    used = {d for m, deps in g.items() if m.startswith("jsprof.fleet")
            for d in deps if d.startswith("jsprof.store.tables")}
    assert used == {"jsprof.store.tables.view"}
