"""When the reader of jsprof's output went away (`jsprof record ... 2>&1 | head`), record,
run and instrument still exit with the script's status and still write their files; the
lost summary is no reason for another status."""

import os
import subprocess
import sys

import jsprof

JSPROF = [sys.executable, "-m", "jsprof.cli"]
# No output of their own: only jsprof's summary meets the closed pipe.
EXIT3 = "let x = 0; for (let i = 0; i < 3e6; i++) x += i;\nprocess.exit(3);\n"
THROW = "function f() { throw new Error('boom') }\nf();\n"
CLASS_EXIT3 = ("class A { go() { let x = 0; for (let i = 0; i < 1e5; i++) x += i; return x } }\n"
               "const a = new A(); for (let i = 0; i < 5; i++) a.go();\nprocess.exit(3);\n")


def _status(args, cwd, closed):
    """The status of `jsprof ARGS` with stdout and stderr a pipe nobody reads (`closed`:
    its reading end closed before the start), or captured as usual."""
    if not closed:
        return subprocess.run([*JSPROF, *map(str, args)], capture_output=True, cwd=cwd,
                              timeout=120).returncode
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([*JSPROF, *map(str, args)], stdout=w, stderr=w, cwd=cwd,
                           timeout=120)
    finally:
        os.close(w)
    return p.returncode


def test_record_keeps_the_scripts_status_and_saves(tmp_path):
    (tmp_path / "exit3.js").write_text(EXIT3)
    (tmp_path / "ok.js").write_text("let x = 0; for (let i = 0; i < 3e6; i++) x += i;\n")
    (tmp_path / "throw.js").write_text(THROW)
    cases = [(["--engine", "node"], "exit3.js", 3), (["--engine", "node"], "ok.js", 0),
             (["--engine", "quickjs"], "throw.js", 1), (["--engine", "quickjs"], "ok.js", 0)]
    for opts, script, want in cases:
        for closed in (False, True):
            out = tmp_path / f"{script}.{opts[1]}.{closed}.json"
            got = _status(["record", *opts, "-o", out, script], tmp_path, closed)
            assert got == want, (opts, script, closed, got)
            assert jsprof.load(out).num_samples > 0


def test_run_keeps_the_scripts_status(tmp_path):
    (tmp_path / "throw.js").write_text(THROW)
    (tmp_path / "exit3.js").write_text(EXIT3)
    for closed in (False, True):
        assert _status(["run", "throw.js"], tmp_path, closed) == 1
        assert _status(["run", "--engine", "node", "exit3.js"], tmp_path, closed) == 3


def test_instrument_keeps_the_scripts_status_and_writes(tmp_path):
    (tmp_path / "cls.js").write_text(CLASS_EXIT3)
    for closed in (False, True):
        out = tmp_path / f"r{closed}.json"
        got = _status(["instrument", "--engine", "node", "--watch", "A", "-o", out, "cls.js"],
                      tmp_path, closed)
        assert got == 3, (closed, got)
        assert '"method": "go"' in out.read_text()


def test_chromium_record_keeps_the_pages_status_and_saves(tmp_path):
    from pathlib import Path

    page = Path(__file__).parent / "data" / "chromium_engine" / "error.js"
    for closed in (False, True):
        out = tmp_path / f"e{closed}.json"
        got = _status(["record", "--engine", "chromium", "-o", out, page], tmp_path, closed)
        assert got == 1, (closed, got)  # the page's uncaught error
        assert jsprof.load(out).num_samples > 0
