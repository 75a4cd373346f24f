"""The spec's `Profiler` global inside Node (`jsprof run --engine node`), on real Node."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jsprof.engines.node import preload_path


@pytest.fixture(autouse=True)
def _node_is_required() -> None:
    # Node 20 is part of the machine; a missing node must fail loudly, never skip.
    if shutil.which("node") is None:
        pytest.fail("node is not installed; these tests need Node.js 20")


JS = Path(__file__).parent / "data" / "nodejs"


def _run(script: str, allow: bool = True) -> list[str]:
    # run_node in a child Python so that Node's stdout is captured like a user would see it.
    code = (
        "import sys; from jsprof.engines.node import run_node; "
        f"sys.exit(run_node({str(JS / script)!r}, allow_profiling={allow}))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_preload_is_package_data():
    assert Path(preload_path()).is_file()


# The spec's checks (conformance, MDN's example, NotAllowedError) run on Node and QuickJS
# alike in tests/test_profiler_conformance.py; this module keeps what is Node's own.


def test_global_in_a_worker_thread():
    (line,) = _run("worker_api.js")
    got = json.loads(line)
    assert got["n"] >= 10 and "spinInWorker" in got["names"]


def test_no_sample_before_the_session_started_and_its_tag():
    # performance.now() read just before `new Profiler(...)` is never after the first
    # sample's timestamp (it once was, by ~0.01-0.1 ms: V8's clock converted roughly and
    # ticks from before the session kept). 30 sessions on a running V8 profiler.
    (line,) = _run("clock.js")
    got = json.loads(line)
    assert got["worst"] >= 0, got
    assert got["tag"] == "[object Profiler]"
