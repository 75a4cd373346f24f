"""Options that would be silently ignored are refused in one line, exit 2: a --watch list
naming no class the program created, a --format the output's name contradicts."""

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
