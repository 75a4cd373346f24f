"""What jsprof's QuickJS host does with a module's imports: relative paths are loaded; a
package name (resolved by Node from node_modules) or a Node built-in is not, and the
error says what to do in one line (before: `ReferenceError: could not load module
'prettier'`, exit 1, and nothing more)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _record(d: Path, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "record", "-o", "out.jsprof.json", script],
        cwd=d, capture_output=True, text=True, timeout=120,
    )


def test_a_relative_import_runs(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "m.mjs").write_text("export const f = () => 42;\n")
    (tmp_path / "app.mjs").write_text('import { f } from "./lib/m.mjs";\nconsole.log(f());\n')
    r = _record(tmp_path, "app.mjs")
    assert r.returncode == 0 and r.stdout.strip() == "42", r.stderr


@pytest.mark.parametrize(
    ("spec", "said"),
    [("marked", "bundle the script first (esbuild"), ("./nope.mjs", "--engine node"),
     ("node:fs", "a Node built-in module"), ("fs", "a Node built-in module"),
     ("fs/promises", "a Node built-in module")],
)
def test_an_import_quickjs_cannot_load_says_what_to_do(tmp_path, spec, said):
    """A package that is there in node_modules, a file that is not, a Node built-in."""
    (tmp_path / "node_modules" / "marked").mkdir(parents=True)
    (tmp_path / "node_modules" / "marked" / "package.json").write_text(
        '{"name": "marked", "exports": {".": {"import": "./m.mjs"}}}'
    )
    (tmp_path / "node_modules" / "marked" / "m.mjs").write_text("export const marked = 1;\n")
    (tmp_path / "app.mjs").write_text(f'import * as m from "{spec}";\nconsole.log(m);\n')
    r = _record(tmp_path, "app.mjs")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert "could not load module" in lines[-2], r.stderr
    assert lines[-1].startswith("jsprof: hint: ") and said in lines[-1], r.stderr
    assert spec.removeprefix("./") in lines[-1]


def test_the_built_in_names_are_nodes():
    """`fs` without `node:` is Node's too (before: "no file 'fs'", a hint to bundle it):
    the hint's list is the Node the tests run, sub-paths (`fs/promises`) by their first
    part."""
    from jsprof.engines.quickjs import NODE_BUILTINS

    r = subprocess.run(
        ["node", "-p", "require('module').builtinModules.filter(m => !m.startsWith('_'))"
         ".map(m => m.split('/')[0]).join(' ')"],
        capture_output=True, text=True, timeout=60, check=True)
    assert set(r.stdout.split()) <= NODE_BUILTINS, set(r.stdout.split()) - NODE_BUILTINS
