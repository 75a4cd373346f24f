"""Ctrl-C ends a recording the same way on every engine, also when jsprof inherited SIGINT
ignored (a shell script's background job `jsprof record app.js &`, a parent that ignores
it): jsprof stops, saves the samples taken so far and exits 130. QuickJS ran on for 10
minutes there (until a SIGTERM) while Node stopped. The engine's own process is given the
disposition jsprof was given."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jsprof

JSPROF = [sys.executable, "-m", "jsprof.cli"]
DATA = Path(__file__).parent / "data"

QUICKJS_LOOP = "function loop() { for (;;) {} }\nconsole.log('started');\nloop();\n"
# Node: says whether it was given SIGINT ignored, as jsprof was, then works forever.
NODE_FOREVER = r"""
function work(ms) { const end = performance.now() + ms; let x = 0;
  while (performance.now() < end) x += Math.sqrt(x + 1); return x; }
const mask = require('node:fs').readFileSync('/proc/self/status', 'utf8')
  .split('\n').find((l) => l.startsWith('SigIgn:')).split(/\s+/)[1];
console.log('started ' + ((BigInt('0x' + mask) >> 1n) & 1n ? 'ignoring SIGINT' : 'SIGINT default'));
if (process.argv[2] === 'forever') setInterval(() => work(5), 1);
"""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("engine", ["quickjs", "node", "chromium"])
def test_sigint_ends_the_run_even_when_inherited_ignored(tmp_path, engine):
    if engine != "quickjs" and shutil.which("node" if engine == "node" else "chromium") is None:
        pytest.fail(f"{engine} is not installed; these tests need it")
    out = tmp_path / "o.jsprof.json"
    if engine == "quickjs":
        target = tmp_path / "loop.js"
        target.write_text(QUICKJS_LOOP)
        extra: list[str] = []
    elif engine == "node":
        target = tmp_path / "forever.js"
        target.write_text(NODE_FOREVER)
        extra = []
        # Node sets every signal to its default as it starts (its PlatformInit): the
        # script sees what it sees without jsprof
        plain = subprocess.run(["node", str(target)], capture_output=True, text=True,
                               timeout=60, preexec_fn=_ignore_sigint).stdout
    else:
        target = DATA / "chromium_engine" / "forever.html"
        extra = ["--duration", "60"]
    args = ["forever"] if engine == "node" else []
    proc = subprocess.Popen(
        [*JSPROF, "record", "--engine", engine, *extra, "-o", str(out), str(target), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith(("started", "ready")), first
        if engine == "node":
            assert first == plain, (first, plain)
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"jsprof --engine {engine} ran on after SIGINT")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    t = jsprof.load(out).tracks[0]
    assert t.meta["exit"] == "interrupted" and t.meta["signal"] == "SIGINT", t.meta
    assert t.trace.num_samples >= 1
