"""Where outputs go, and every user mistake about them: one line, never a traceback, and
never a lost recording (issue 11: output paths; issue 15: default names)."""

import os
import stat
import subprocess
import sys
import threading
from io import BytesIO

import pytest

import jsprof
from jsprof import io
from jsprof.cli import main

TRACE = os.path.abspath("tests/data/chromium/trace-basic.json")
JSPROF = [sys.executable, "-m", "jsprof.cli"]
SHORT = "function f() { let x = 0; for (let i = 0; i < 3e5; i++) x += i; return x; }\n" \
    "console.log('ran', f());\n"


def run(*args, **kw):
    return subprocess.run(
        [*JSPROF, *map(str, args)], capture_output=True, text=True, timeout=120, **kw
    )


def one_line(err: str) -> bool:
    return err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["flame", TRACE, "-o", "{d}"],
        ["convert", TRACE, "{d}"],
        ["convert", TRACE, "{d}", "--format", "jsprof"],
        ["diff", TRACE, TRACE, "--flame", "{d}"],
    ],
)
def test_an_existing_directory_as_output_is_one_line(argv, tmp_path, capsys):
    d = tmp_path / "out.html"
    d.mkdir()
    assert main([a.format(d=d) for a in argv]) == 2
    err = capsys.readouterr().err
    assert one_line(err) and "is a directory" in err, err


def test_a_device_is_written_in_place(capsys):
    assert main(["convert", TRACE, "/dev/null", "--format", "jsprof"]) == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # not replaced by a regular file
    capsys.readouterr()


def test_a_fifo_is_written_in_place(tmp_path, capsys):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert main(["convert", TRACE, str(fifo)]) == 0
    reader.join(30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert jsprof.load(BytesIO(got[0])) == jsprof.load(TRACE)
    capsys.readouterr()


def test_a_symlink_is_followed(tmp_path, capsys):
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target)
    assert main(["convert", TRACE, str(link)]) == 0
    assert link.is_symlink() and jsprof.load(target) == jsprof.load(TRACE)
    capsys.readouterr()


def test_atomic_write_leaves_no_half_file(tmp_path):
    out = tmp_path / "a.json"
    out.write_bytes(b"before")
    io.atomic_write(out, b"after")
    assert out.read_bytes() == b"after" and os.listdir(tmp_path) == ["a.json"]
    with pytest.raises(jsprof.errors.JsprofError, match="does not exist"):
        io.atomic_write(tmp_path / "no" / "a.json", b"x")


def test_the_temp_file_is_new_and_private(tmp_path, monkeypatch):
    """io._mkstemp (tempfile.mkstemp's file without importing tempfile): created 0600 and
    exclusively, so a name that is there (a file, a symlink planted to redirect the write)
    is never opened; the write then goes to a new name."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    draws = iter([b"\1" * 6, b"\1" * 6, b"\2" * 6])
    monkeypatch.setattr(io.os, "urandom", lambda n: next(draws))
    planted = tmp_path / f".a.json.{'01' * 6}.tmp"
    planted.symlink_to(victim)
    fd, tmp = io._mkstemp(tmp_path, "a.json")
    os.close(fd)
    assert tmp == str(tmp_path / f".a.json.{'02' * 6}.tmp")
    assert stat.S_IMODE(os.stat(tmp).st_mode) == 0o600
    assert victim.read_bytes() == b"keep"


def test_flame_default_output_and_open(tmp_path, capsys):
    trace = tmp_path / "t.json"
    trace.write_bytes(open(TRACE, "rb").read())
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.py"
    browser.write_text(f"import sys; open({str(opened)!r}, 'w').write(sys.argv[1])")
    env = {**os.environ, "BROWSER": f"{sys.executable} {browser} %s"}
    p = run("flame", trace, "--open", env=env)
    assert p.returncode == 0, p.stderr
    html = tmp_path / "t.json.html"
    assert html.read_text().startswith("<!DOCTYPE html>") and f"wrote {html}" in p.stderr
    assert opened.read_text() == html.as_uri()
    assert main(["flame", "-"]) == 2 and "-o" in capsys.readouterr().err


@pytest.mark.parametrize(
    "script, what",
    [
        ("sub", "is a directory"),
        ("notes.txt", "not a JavaScript file"),
        ("x.jsprof.json", "looks like a trace"),
        ("page.html", "for a browser engine"),
        ("https://example.com/app.js", "for a browser engine"),
        ("/dev/null", "not a regular file"),
    ],
)
@pytest.mark.parametrize("command", [["record"], ["run"], ["instrument", "--watch", "A"]])
def test_what_the_engine_cannot_run_is_refused(script, what, command, tmp_path, capsys):
    (tmp_path / "sub").mkdir()
    for name in ("notes.txt", "x.jsprof.json", "page.html"):
        (tmp_path / name).write_text("{}")
    path = script if "/" in script else str(tmp_path / script)
    assert main([*command, path]) == 2
    err = capsys.readouterr().err
    assert one_line(err) and what in err, err


def test_record_checks_its_output_before_running(tmp_path):
    app = tmp_path / "app.js"
    app.write_text(SHORT)
    (tmp_path / "sub").mkdir()
    for out, what in [
        ("sub", "is a directory"),
        ("x.bin", "cannot tell the output format"),
        ("-", "stdout belongs to the program"),
        ("nodir/x.json", "does not exist"),
    ]:
        p = run("record", "-o", out, app, cwd=tmp_path)
        assert p.returncode == 2 and one_line(p.stderr) and what in p.stderr, (out, p.stderr)
        assert p.stdout == ""  # the script never ran


def test_record_default_output_never_overwrites(tmp_path):
    app = tmp_path / "app.js"
    app.write_text(SHORT)
    first = run("record", app, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "wrote app.quickjs.jsprof.json" in first.stderr
    before = (tmp_path / "app.quickjs.jsprof.json").read_bytes()
    second = run("record", app, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "app.quickjs.jsprof.json exists; writing app.quickjs.1.jsprof.json" in second.stderr
    assert (tmp_path / "app.quickjs.jsprof.json").read_bytes() == before
    assert jsprof.load(tmp_path / "app.quickjs.1.jsprof.json").tracks[0].engine == "quickjs"
    # An explicit -o replaces its file.
    third = run("record", "-o", "app.quickjs.jsprof.json", app, cwd=tmp_path)
    assert third.returncode == 0 and "exists" not in third.stderr
    assert (tmp_path / "app.quickjs.jsprof.json").read_bytes() != before


def test_record_falls_back_when_writing_fails_after_the_run(tmp_path):
    # The script removes the output's directory while it runs: the check before the run
    # passed, the write after it fails, and the samples go to a fallback file instead.
    out_dir, tmp = tmp_path / "out", tmp_path / "tmp"
    out_dir.mkdir()
    tmp.mkdir()
    app = tmp_path / "app.js"
    app.write_text(
        f"require('fs').rmSync({str(out_dir)!r}, {{recursive: true}});\n" + SHORT
    )
    p = run(
        "record", "--engine", "node", "-o", out_dir / "t.json", app,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert p.returncode == 0, p.stderr
    (fallback,) = tmp.glob("jsprof-t*.jsprof.json")
    assert f"could not write {out_dir / 't.json'}" in p.stderr and str(fallback) in p.stderr
    assert jsprof.load(fallback).tracks[0].engine == "node"


def test_gzip_by_extension_in_any_case(tmp_path, capsys):
    out = tmp_path / "T.JSON.GZ"
    assert main(["convert", TRACE, str(out)]) == 0
    assert out.read_bytes()[:2] == b"\x1f\x8b" and jsprof.load(out) == jsprof.load(TRACE)
    capsys.readouterr()


def test_record_pid_checks_its_output_before_attaching(tmp_path, capsys):
    (tmp_path / "sub").mkdir()
    # No such process either: the output is checked first, so nothing is attached to.
    assert main(["record", "--pid", "999999", "-o", str(tmp_path / "sub")]) == 2
    err = capsys.readouterr().err
    assert one_line(err) and "is a directory" in err, err
