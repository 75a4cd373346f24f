"""The spec's `Profiler` global: the same JavaScript conformance checks on every engine
that has it (`jsprof run`), written against the W3C JS Self-Profiling spec's wording.

The checks are tests/data/profiler/conformance.js (one JSON line per check). Each engine
runs the script exactly as a user's `jsprof run [--engine E] script.js` would, in a child
process so the script's stdout is what a user would see.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "profiler"
ENGINES = ["quickjs", "node"]


def run_script(engine: str, script: str, allow: bool = True) -> list[str]:
    if engine == "node" and shutil.which("node") is None:
        pytest.fail("node is not installed; the conformance tests need Node.js 20")
    code = (
        "import sys; from jsprof.record import run; "
        f"sys.exit(run({str(DATA / script)!r}, engine={engine!r}, allow_profiling={allow}) or 0)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


@pytest.mark.parametrize("engine", ENGINES)
def test_conformance(engine: str) -> None:
    lines = run_script(engine, "conformance.js")
    results = [json.loads(line) for line in lines if line.startswith("{")]
    assert results and results[-1] == {"done": True}, lines[-3:]
    failed = [r for r in results[:-1] if not r["ok"]]
    assert not failed, failed
    assert len(results) > 35


@pytest.mark.parametrize("engine", ENGINES)
def test_mdn_example_runs_unchanged(engine: str) -> None:
    (line,) = run_script(engine, "mdn.js")
    trace = json.loads(line)
    assert sorted(trace) == ["frames", "resources", "samples", "stacks"]
    assert any(f["name"] == "work" for f in trace["frames"])
    assert trace["samples"]


@pytest.mark.parametrize("engine", ENGINES)
def test_not_allowed(engine: str) -> None:
    assert run_script(engine, "not_allowed.js", allow=False) == ["NotAllowedError"]
    assert run_script(engine, "not_allowed.js", allow=True) == ["constructed"]
