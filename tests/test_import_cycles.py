"""No import cycles anywhere in src/jsprof (issue 37; issue 34 made store/, fleet/ and serve/
acyclic first).

The graph is read from the source (every `import` and `from ... import`), and an import
inside a function counts as an arrow like one at the top: deferring an import changes when
a module is loaded, not which module depends on which, so a cycle kept alive only by
importing late is still found. Imports under `if TYPE_CHECKING:` count too (a type named in
a signature is a dependency of the design). Modules are jsprof.* files and the C extensions
setup.py builds (`jsprof._quickjs`, `jsprof.formats._columns`: leaves, they import nothing
of ours); `from pkg import name` is an arrow to `pkg.name` when that is a module, else to
the package.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
SETUP = SRC.parent / "setup.py"


def _extensions() -> set[str]:
    """The C extension modules setup.py builds: `Extension("jsprof.x", ...)`."""
    return {n.args[0].value for n in ast.walk(ast.parse(SETUP.read_text()))
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Extension"
            and n.args and isinstance(n.args[0], ast.Constant)}


def _modules() -> dict[str, Path]:
    out = {}
    for p in (SRC / "jsprof").rglob("*.py"):
        parts = p.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def import_graph() -> dict[str, set[str]]:
    graph = _source_graph()
    for ext in _extensions():
        graph[ext] = set()
    return graph


def _source_graph() -> dict[str, set[str]]:
    mods = {**_modules(), **dict.fromkeys(_extensions(), None)}
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        if path is None:  # a C extension
            continue
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


def test_the_c_extensions_are_modules_of_their_own() -> None:
    """`from .. import _quickjs` is an arrow to the extension, not to the jsprof package
    (whose __init__ names the engines: read as the package, it made a cycle that is not)."""
    g = import_graph()
    assert {"jsprof._quickjs", "jsprof.formats._columns"} <= _extensions()
    assert "jsprof._quickjs" in g["jsprof.engines.quickjs"]
    assert "jsprof" not in g["jsprof.engines.quickjs"]
    assert "jsprof.formats._columns" in g["jsprof.formats._jsprof_write"]


def test_no_import_cycles_in_jsprof() -> None:
    found = [sorted(c) for c in cycles(import_graph())]
    assert found == [], "import cycles in src/jsprof"


def test_the_model_imports_nothing_above_it() -> None:
    """trace.py imports only errors, meta and its numpy-free half (traceparts) of ours
    (the last upward arrow was `Recording._repr_html_` -> views: Jupyter's viewer is
    registered with IPython by jsprof/__init__.py now); formats import no engine,
    analysis, render or views."""
    g = import_graph()
    assert g["jsprof.trace"] <= {"jsprof.errors", "jsprof.meta", "jsprof.traceparts"}
    assert g["jsprof.traceparts"] == set()
    up = ("jsprof.engines", "jsprof.analysis", "jsprof.render", "jsprof.views", "jsprof.io")
    assert not {(m, d) for m, deps in g.items() if m.startswith("jsprof.formats")
                for d in deps if d.startswith(up)}


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
