"""`record --engine node` drops the events it never reads unparsed (issue 32): every slice's
bridge ends a console.profile, and V8 sends that profile (a deep stack's nodes, ~7 KB on
tsc) as Profiler.consoleProfileFinished, as it does for the script's own profileEnd."""

from __future__ import annotations

import shutil

import pytest

from jsprof.cli import main
from jsprof.engines import cdp

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")

SCRIPT = """\
function spin(ms) { const t = Date.now(); let x = 0; while (Date.now() - t < ms) x++; return x; }
console.profile('own');
spin(150);
console.profileEnd('own');
spin(150);
"""


def test_console_profiles_finished_are_not_parsed(tmp_path, monkeypatch, capsys):
    parsed: list[str] = []
    real = cdp._loads

    def spy(raw):
        msg = real(raw)
        parsed.append(str(msg.get("method", "")))
        return msg

    monkeypatch.setattr(cdp, "_loads", spy)
    script = tmp_path / "s.js"
    script.write_text(SCRIPT)
    out = tmp_path / "s.jsprof.json"
    assert main(["record", "--engine", "node", "-o", str(out), str(script)]) == 0
    assert out.exists()
    assert "Profiler.consoleProfileStarted" in parsed  # the hook's titles are still read
    assert "Profiler.consoleProfileFinished" not in parsed
