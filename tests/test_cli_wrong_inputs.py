"""Every command given a wrong input (a missing file, a directory where a file is expected,
an unreadable one, a socket, a bad number, an unknown value) says what, where and what to
do in one line and exits 2, with no traceback; every command's --help exits 0. Run as the
user would: the real `jsprof` in a subprocess, real engines behind `record` and `run`."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

JSPROF = [sys.executable, "-m", "jsprof.cli"]
TRACE = Path(__file__).parent / "data" / "chromium" / "trace-basic.json"
COMMANDS = ["", "report", "validate", "convert", "formats", "flame", "diff", "record", "run",
            "instrument", "serve", "serve prune", "serve check", "fleet", "fleet top",
            "fleet flame", "fleet diff", "fleet export", "fleet vitals", "fleet interactions",
            "fleet regressions",
            "fleet sourcemaps", "fleet sourcemaps upload"]


def _run(cwd: Path, *args: str, as_nobody: bool = False) -> subprocess.CompletedProcess:
    cmd = [*JSPROF, *args]
    if as_nobody:
        # As another user: root reads every file, mode 000 or not (util-linux's setpriv,
        # which starts the interpreter where a plain setuid child could not reach it).
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to test unreadable files as root"
        cmd = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd,
                          stdin=subprocess.DEVNULL, env={**os.environ, "HOME": str(cwd)})


def _one_line(p: subprocess.CompletedProcess, *said: str) -> str:
    assert p.returncode == 2, (p.args, p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, (p.args, p.stderr)
    for s in said:
        assert s in lines[0], (p.args, lines[0])
    return lines[0]


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Path]:
    """A folder with a trace, a script, a subfolder and a socket (a path that exists but
    opens with ENXIO: what no reader can read, even as root)."""
    shutil.copy(TRACE, tmp_path / "t.json")
    (tmp_path / "app.js").write_text("let s = 0; for (let i = 0; i < 1000; i++) s += i;\n")
    (tmp_path / "d").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        yield tmp_path
    finally:
        sock.close()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_commands_help(tmp_path: Path, command: str) -> None:
    p = _run(tmp_path, *command.split(), "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage: jsprof"), p.stderr
    assert p.stderr == ""


@pytest.mark.parametrize("argv,said", [
    # A socket where a trace is read: open() fails with ENXIO (was a traceback, exit 1).
    ("report sock", "sock: cannot read it (No such device or address); give a trace file"),
    ("validate sock", "sock: cannot read it"),
    ("flame sock", "sock: cannot read it"),
    ("diff t.json sock", "sock: cannot read it"),
    ("convert sock o.folded", "sock: cannot read it"),
    # ... where source maps are read (was taken as "no maps", exit 0).
    ("report t.json --sourcemap sock", "sock: not a file or a folder"),
    # ... where the collector reads its apps or its read token (was a traceback). On a free
    # port: the default 8400 may be another program's (a neighbour's collector was, and
    # "cannot listen" came first).
    ("serve --app-file sock --port 0", "--app-file sock: cannot read it"),
    ("serve --read-token-file sock --port 0", "--read-token-file sock: cannot read it"),
    # ... where `upload` reads its ingest key (the collector's reader: one for both).
    ("upload t.json --url http://127.0.0.1:9 --app x --key-file sock",
     "--key-file sock: cannot read it"),
    # Output names that tell no format: record and instrument --trace have no --format to
    # pass (they said "pass --format"); the endings are named instead.
    ("record -o x.nope app.js", "cannot tell the output format from 'x.nope'; end the name in"),
    ("instrument --watch X --trace x.nope app.js", "(see `jsprof formats`)"),
    # A bad number in words, not argparse's "invalid float value".
    ("report t.json --during interaction --slower-than abc",
     "argument --slower-than: expected a number, got 'abc'"),
    ("fleet top --store d --app x --during interaction --slower-than x",
     "argument --slower-than: expected a number, got 'x'"),
    ("fleet regressions --store d --app x --min-change abc",
     "argument --min-change: expected a number, got 'abc'"),
    # A directory where fleet export writes (was "cannot tell the output format from 'd'").
    ("fleet export --store d --app x -o d", "d: is a directory; give a file name"),
    # Not a number in a time range (was Python's "could not convert string to float", and
    # nan was taken: "no sample lies in that range").
    ("report t.json --time-range abc:5", "--time-range: expected START:END in ms (numbers)"),
    ("report t.json --time-range nan:5", "--time-range: expected START:END in ms (numbers)"),
])
def test_a_wrong_input_is_one_line_exit_2(place: Path, argv: str, said: str) -> None:
    line = _one_line(_run(place, *argv.split()), said)
    assert "pass --format" not in line or argv.startswith(("convert", "fleet export"))


@pytest.mark.parametrize("argv,arg", [
    # An empty path ('': an unset shell variable) is named as empty, with the argument it
    # was given for, by every command that takes a path (said ": no such file" before).
    ("report ''", "trace"), ("validate ''", "trace"), ("flame ''", "trace"),
    ("flame t.json -o ''", "-o/--output"), ("flame t.json --embed-source ''", "--embed-source"),
    ("convert '' o.folded", "input"), ("convert t.json ''", "output"),
    ("diff '' t.json", "base"), ("diff t.json ''", "new"), ("diff t.json t.json --flame ''",
                                                            "--flame"),
    ("record ''", "script"), ("record -o '' app.js", "-o/--output"), ("run ''", "script"),
    ("instrument --watch X ''", "script"), ("instrument --watch X -o '' app.js", "-o/--output"),
    ("instrument --watch X --trace '' app.js", "--trace"),
    ("serve --store ''", "--store"), ("serve --app-file ''", "--app-file"),
    ("serve --read-token-file ''", "--read-token-file"),
    ("serve --admin-token-file ''", "--admin-token-file"),
    ("serve prune --store '' --older-than 1d", "--store"), ("serve check --store ''", "--store"),
    ("fleet top --app x --store ''", "--store"), ("fleet flame --app x -o ''", "-o/--output"),
    ("fleet diff --app x --base release=1 --new release=2 --flame ''", "--flame"),
    ("fleet export --app x -o ''", "-o/--output"),
    ("fleet sourcemaps upload --app x --release 1 --store d ''", "DIR|FILE.map"),
])
def test_an_empty_path_is_named_as_empty(place: Path, argv: str, arg: str) -> None:
    line = _one_line(_run(place, *shlex.split(argv)),
                     f"argument {arg}: the path is empty (''); give a file or folder name")
    assert ": no such file" not in line


@pytest.mark.parametrize("option", ["--max-body", "--max-decompressed"])
def test_a_zero_size_limit_is_refused(place: Path, option: str) -> None:
    # 0 bytes was taken: a collector that refused every upload (and it started serving).
    _one_line(_run(place, "serve", option, "0", "--port", "0"),
              f"{option}: '0' is no room for an upload")
    assert not (place / "jsprof-store").exists()


def test_a_host_that_does_not_resolve_leaves_no_store_behind(place: Path) -> None:
    # It printed the store, a new read token and the apps first (four lines), and left a
    # store with a token in the current folder for a collector that never listened.
    _one_line(_run(place, "serve", "--host", "no-such-host.invalid", "--port", "0"),
              "--host no-such-host.invalid: cannot resolve")
    _one_line(_run(place, "serve", "--read-token-file", "d", "--port", "0"),
              "--read-token-file d: not a text file")
    assert not (place / "jsprof-store").exists()


def test_a_key_file_is_read_as_the_collectors_token_files_are(place: Path) -> None:
    # `upload --key-file` had a reader of its own, without the collector's size limit: a
    # 2 MiB file (or /dev/zero, read for ever) was taken as a key and sent.
    (place / "big").write_bytes(b"k" * (2 << 20))
    up = ("upload", "t.json", "--url", "http://127.0.0.1:9", "--app", "x", "--key-file")
    _one_line(_run(place, *up, "big"), "--key-file big: over 1048576 bytes; not a text file")
    (place / "blank").write_text("\n  \n")
    _one_line(_run(place, *up, "blank"),
              "--key-file blank: empty; put the app's ingest key on its first line")
    _one_line(_run(place, *up, "d"), "--key-file d: not a text file")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder another user can enter, with a script and a page only root may read."""
    d = Path(tempfile.mkdtemp(prefix="jsprof-unreadable-"))
    try:
        d.chmod(0o777)
        for name, text in (("app.js", "console.log(1);\n"), ("page.html", "<p>x</p>\n")):
            (d / name).write_text(text)
            (d / name).chmod(0)
        yield d
    finally:
        shutil.rmtree(d)


@pytest.mark.parametrize("argv", [
    "record --engine node app.js",  # Node read it itself: its stack, exit 1, a trace
    "run --engine node app.js",
    "instrument --engine node --watch X app.js",
    "record app.js",
    "record --engine chromium page.html",  # the page server answered 404: an empty page
    "run --engine chromium page.html",
])
def test_an_unreadable_script_is_one_line_on_every_engine(shared: Path, argv: str) -> None:
    target = argv.split()[-1]
    _one_line(_run(shared, *argv.split(), as_nobody=os.geteuid() == 0),
              f"{target}: permission denied; give a")
    assert [p.name for p in shared.iterdir() if p.suffix == ".json"] == []


@pytest.mark.parametrize("argv", [
    "record --engine chromium --duration 60 --until js:( -o out.json app.js",
    "budget app.js app.js --engine chromium --min-rounds 2 --until js:(",
])
def test_an_until_expression_that_does_not_compile_is_one_line(place: Path, argv: str) -> None:
    # Real Chromium compiles it: the probe's eval threw a SyntaxError every time, unseen,
    # and the page ran on to --duration (60 s) and exited 0 with a trace.
    _one_line(_run(place, *argv.split()),
              "--until 'js:(': the expression does not compile (SyntaxError: Unexpected end "
              "of input); give a JavaScript expression")
    assert not (place / "out.json").exists()


PAGE = ("<html><body><script>function work() { let s = 0; for (let i = 0; i < 1e5; i++) "
        "s += i; return s; }\nsetInterval(work, 20);</script></body></html>\n")


def _said(p: subprocess.CompletedProcess, status: int, *said: str) -> str:
    assert p.returncode == status, (p.args, p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "--until" in ln]
    assert len(lines) == 1, p.stderr
    for s in said:
        assert s in lines[0], lines[0]
    return lines[0]


def test_an_until_statement_that_never_ends_is_stopped_and_said(place: Path) -> None:
    # Real Chromium: the probe ran `while(true){}` on the page's main thread for good, the
    # profile could not be stopped, and jsprof hung past --duration (2 min, then "Chromium
    # delivered no profile"). V8 stops the probe at its timeout; one line; the samples kept.
    (place / "page.html").write_text(PAGE)
    p = _run(place, "record", "--engine", "chromium", "--duration", "60", "--until",
             "js:while(true){}", "-o", "out.json", "page.html")
    _said(p, 1, "--until 'js:while(true){}': the expression did not finish in 1000 ms",
          "give an expression that returns")
    assert (place / "out.json").exists()
    p = _run(place, "budget", "page.html", "page.html", "--engine", "chromium",
             "--min-rounds", "2", "--until", "js:while(true){}")
    _one_line(p, "page.html: BASE, round 1: --until 'js:while(true){}': the expression "
              "did not finish")


def test_an_until_expression_that_always_throws_is_said(place: Path) -> None:
    # It threw at every probe, unseen: the page ran to --duration and jsprof exited 0 as
    # if the expression had ended it.
    (place / "page.html").write_text(PAGE)
    p = _run(place, "record", "--engine", "chromium", "--duration", "3", "--until",
             "js:window.app.done", "-o", "out.json", "page.html")
    _said(p, 1, "--until 'js:window.app.done': the expression threw at each of its",
          "TypeError: Cannot read properties of undefined", "--duration did")
    assert (place / "out.json").exists()
