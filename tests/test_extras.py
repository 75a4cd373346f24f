"""The extras' rules that need no fresh venv (issue 25): only the field wing imports an
extra's packages, and a command says which extra to install when one is missing.

The real check is tests/test_packaging.py (the wheel in a fresh venv, core only). Here a
module is made missing by an import hook in the child process, which also covers the case
that venv cannot: the field extra installed, the dask extra not.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from jsprof.extras import EXTRAS, MissingExtra, install_hint, missing_module, require

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "jsprof"
# The tests run on an editable install of this checkout (make test's .venv): the line says
# how to install an extra there (the wheel's `pip install 'jsprof[EXTRA]'` is
# tests/test_packaging.py's).
FIELD_HINT = (f"make field (in {ROOT})"
              if Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()
              else f"pip install -e '{ROOT}[field]'")
# uvicorn's optional speed-ups, installed by the field extra but imported by uvicorn only.
ALL_EXTRA_MODULES = {m for mods in EXTRAS.values() for m in mods} | {"httptools", "uvloop"}
FIELD_WING = ("serve", "store", "fleet")
# The one format on an extra: the OTLP mapping imports opentelemetry-proto when used.
EXTRA_FORMATS = {"formats/_otlp.py": {"opentelemetry"}}

# Runs jsprof's CLI with some top-level modules made unimportable, as in a core install.
HIDE = """
import sys
hidden = set(sys.argv[1].split(","))

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Hide())
from jsprof.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _imported_tops(path: Path) -> set[str]:
    tops = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return tops


def test_only_the_field_wing_imports_an_extras_package() -> None:
    users: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        used = _imported_tops(path) & ALL_EXTRA_MODULES
        if used:
            users[str(rel)] = used
    assert users, "the field wing's imports were not found: is the scan broken?"
    outside = {p: m for p, m in users.items()
               if Path(p).parts[0] not in FIELD_WING and EXTRA_FORMATS.get(p) != m}
    assert outside == {}, "core modules importing an extra's package"


def _cli(tmp_path: Path, hidden: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", HIDE, hidden, *args], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)


@pytest.mark.parametrize(("hidden", "args", "line"), [
    ("starlette", ("serve", "--port", "0"),
     "jsprof: error: jsprof serve needs the field extra (starlette is not installed): "
     + FIELD_HINT),
    ("duckdb", ("fleet", "top", "--app", "a"),
     "jsprof: error: jsprof fleet needs the field extra (duckdb is not installed): "
     + FIELD_HINT),
    # Field installed, Dask not: the DuckDB engine runs, --engine dask names the dask extra.
    ("dask,distributed", ("fleet", "top", "--app", "a", "--engine", "dask"),
     "jsprof: error: jsprof fleet --engine dask needs the dask extra (dask is not "
     f"installed): pip install -e '{ROOT}[dask]'"),
    # A core install converts to every format but OTLP, which names its extra.
    ("opentelemetry", ("convert", str(SRC.parents[1] / "tests" / "data" / "node" /
                                      "bench.cpuprofile"), "o.otlp.pb"),
     "jsprof: error: reading or writing OTLP needs the otlp extra (opentelemetry is not "
     f"installed): pip install -e '{ROOT}[otlp]'"),
])
def test_a_missing_extra_is_one_line_and_exit_2(tmp_path: Path, hidden: str,
                                                args: tuple[str, ...], line: str) -> None:
    r = _cli(tmp_path, hidden, *args)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", line + "\n")
    assert list(tmp_path.iterdir()) == []  # stopped before it made a store


def test_with_the_extra_present_the_check_lets_the_command_run(tmp_path: Path) -> None:
    # Dask hidden does not matter to the default engine: the command gets to its own check.
    r = _cli(tmp_path, "dask,distributed", "fleet", "top", "--app", "a", "--store", "nope")
    assert r.returncode == 2 and "no such store" in r.stderr and "extra" not in r.stderr


def test_require_names_the_first_missing_module(monkeypatch: pytest.MonkeyPatch) -> None:
    assert missing_module("field") is None and missing_module("dask") is None  # dev installs all
    require("dask", "x")
    monkeypatch.setattr(sys, "meta_path", [_Hide({"pyarrow"}), *sys.meta_path])
    monkeypatch.delitem(sys.modules, "pyarrow", raising=False)
    with pytest.raises(MissingExtra) as e:
        require("dask", "the thing")
    assert e.value.extra == "dask" and e.value.module == "pyarrow"
    assert str(e.value) == ("the thing needs the dask extra (pyarrow is not installed): "
                            f"pip install -e '{ROOT}[dask]'")
    with pytest.raises(ValueError):
        require("nonesuch", "x")


class _Hide:
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def test_a_checkouts_hint_installs_into_the_checkout_not_from_pypi() -> None:
    # `pip install 'jsprof[field]'` in make demo's venv fetches a jsprof from PyPI over the
    # checkout's editable install; the line said that for every install.
    assert install_hint("field") == FIELD_HINT
    assert install_hint("dask") == f"pip install -e '{ROOT}[dask]'"
    assert "jsprof[" not in install_hint("otlp")
