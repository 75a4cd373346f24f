"""Options that would be silently ignored are refused in one line, exit 2: a --watch list
naming no class the program created, a --format the output's name contradicts. And
instrument's one line when no watched method ran says why."""

import subprocess
import sys
from pathlib import Path

import jsprof

JSPROF = [sys.executable, "-m", "jsprof.cli"]
TRACE = Path(__file__).parent / "data" / "chromium" / "trace-basic.json"


def _run(cwd, *args):
    return subprocess.run([*JSPROF, *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_watch_naming_no_class_is_refused(tmp_path):
    (tmp_path / "cls.js").write_text("class A { go() { return 1 } }\nclass B {}\n"
                                     "new A().go(); new B();\n")
    out = tmp_path / "r.json"
    for engine in ("quickjs", "node"):
        p = _run(tmp_path, "instrument", "--engine", engine, "--watch", "Nope", "-o", out,
                 "cls.js")
        assert p.returncode == 2, (engine, p.stderr)
        (line,) = p.stderr.splitlines()
        assert "--watch Nope" in line and "classes it created: A, B" in line, line
        assert not out.exists()
    # one name of two matching: the report, and a warning naming the other
    p = _run(tmp_path, "instrument", "--watch", "Nope,A", "cls.js")
    assert p.returncode == 0, p.stderr
    assert "--watch Nope: no class of that name" in p.stderr and "A.go" in p.stderr


def test_instrument_says_why_no_watched_method_ran(tmp_path):
    # One line saying why, from what the run created, on both engines: no class at all, no
    # class of the names given (the script threw, so it is a report, not a refusal), or
    # watched classes none of whose methods was called.
    (tmp_path / "plain.js").write_text("function f() { return 1; }\nf();\n")
    (tmp_path / "unused.js").write_text("class A { m() { return 1; } }\nclass B {}\n")
    (tmp_path / "throws.js").write_text("class A { m() { return 1; } }\nnull.x;\n")
    for engine in ("quickjs", "node"):
        p = _run(tmp_path, "instrument", "--engine", engine, "--watch", "*", "plain.js")
        assert p.returncode == 0, (engine, p.stderr)
        assert p.stderr.strip().splitlines() == [
            "no watched method ran: plain.js created no class (instrument watches the "
            "methods of classes; jsprof record profiles any function)"
        ], (engine, p.stderr)
        p = _run(tmp_path, "instrument", "--engine", engine, "--watch", "*", "unused.js")
        assert p.returncode == 0, (engine, p.stderr)
        assert p.stderr.strip().splitlines() == [
            "no watched method ran: no method of A, B was called while the script ran"
        ], (engine, p.stderr)
        p = _run(tmp_path, "instrument", "--engine", engine, "--watch", "Zed", "throws.js")
        assert p.returncode == 1, (engine, p.stderr)
        lines = [ln for ln in p.stderr.splitlines() if "Zed" in ln]
        assert lines == [
            "no watched method ran: no class named Zed was created (classes created: A); "
            "check the --watch names"
        ], (engine, p.stderr)


def test_format_contradicting_the_name_is_refused(tmp_path):
    p = _run(tmp_path, "convert", TRACE, "out.folded", "--format", "pprof")
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "out.folded" in p.stderr and "pprof" in p.stderr and "folded" in p.stderr
    assert not (tmp_path / "out.folded").exists()
    # a plain .json takes any JSON format; a matching or unclaimed name is fine
    for name, fmt in (("o.json", "chrome-trace"), ("o.pb.gz", "pprof"), ("o.txt", "folded")):
        p = _run(tmp_path, "convert", TRACE, name, "--format", fmt)
        assert p.returncode == 0, p.stderr
    assert jsprof.load(tmp_path / "o.json").num_samples == jsprof.load(TRACE).num_samples
