"""`jsprof --help` (and friends) import no numpy, rich, format, engine, analysis or render
module: start-up is what users of short scripts feel (issue 16). The time itself is
measured in benchmarks/bench_startup.py, never here."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

JSPROF = Path(sys.executable).parent / "jsprof"  # the console script pip installed
FORBIDDEN = (
    "numpy",
    "rich",
    "jsprof.formats",
    "jsprof.engines",
    "jsprof.analysis",
    "jsprof.render",
    "jsprof.trace",
    "jsprof.serve",  # commands with their own parsers: built only when they run
    "jsprof.fleet",
)
# Allowed under a forbidden prefix: the engine registry (stdlib only) gives --engine's choices.
ALLOWED = ("jsprof.engines", "jsprof.engines.registry")


def imported_modules(*args: str) -> tuple[list[str], subprocess.CompletedProcess]:
    assert JSPROF.exists(), f"{JSPROF} is missing: run `make .venv/.jsprof-installed`"
    p = subprocess.run(
        [sys.executable, "-X", "importtime", str(JSPROF), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    names = [
        line.split("|")[-1].strip()
        for line in p.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    ]
    assert names and "jsprof.cli" in names, p.stderr[-2000:]
    return names, p


@pytest.mark.parametrize(
    "args", [("--help",), ("--version",), ("report", "--help"), ("record", "--help")]
)
def test_help_imports_nothing_heavy(args):
    names, p = imported_modules(*args)
    assert p.returncode == 0, p.stderr[-2000:]
    heavy = sorted(
        n for n in names
        if any(n == f or n.startswith(f + ".") for f in FORBIDDEN) and n not in ALLOWED
    )
    assert heavy == [], f"jsprof {' '.join(args)} imported {heavy}"


def test_public_names_resolve_lazily():
    code = (
        "import sys, jsprof\n"
        "assert 'numpy' not in sys.modules, 'import jsprof loaded numpy'\n"
        "assert callable(jsprof.load) and callable(jsprof.record)\n"
        "import jsprof.record as m\n"  # the submodule must not replace the function
        "from jsprof.record import check_script\n"
        "assert callable(jsprof.record) and not isinstance(jsprof.record, type(sys))\n"
        "assert jsprof.ProfilerTrace.__name__ == 'ProfilerTrace'\n"
        "assert 'numpy' in sys.modules\n"
        "assert set(jsprof.__all__) <= set(dir(jsprof))\n"
        "try:\n    jsprof.nosuch\nexcept AttributeError as e:\n    assert 'nosuch' in str(e)\n"
        "else:\n    raise SystemExit('no AttributeError')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def test_package_commands_are_listed_with_their_own_help():
    from jsprof.cli import PACKAGE_COMMANDS, build_parser

    def helps(parser):
        sub = next(a for a in parser._actions if a.dest == "command")
        return {a.dest: a.help for a in sub._choices_actions}

    full, light = helps(build_parser()), helps(build_parser("report"))
    assert full == light  # the light listing says what the real parsers say
    assert set(PACKAGE_COMMANDS) <= set(full)


def test_record_imports_only_its_output_format_and_no_rich_console(tmp_path: Path) -> None:
    """`record` of an empty script, stderr piped: the output's format module only (not all
    eight), and the summary printed without rich's console (~0.1 s of start-up in all)."""
    script = tmp_path / "empty.js"
    # jsprof loads numpy with OpenBLAS on one thread (its pool is CPU jsprof never uses):
    # neither the script nor jsprof's environment after it keeps the variable.
    script.write_text("console.log(String(process.env.OPENBLAS_NUM_THREADS));\n")
    code = (
        "import os, sys\nfrom jsprof.cli import main\nstatus = main(sys.argv[1:])\n"
        "print(os.environ.get('OPENBLAS_NUM_THREADS'))\n"
        "print(' '.join(sorted(sys.modules)))\nsys.exit(status)"
    )
    args = ["record", "--engine", "node", "-o", str(tmp_path / "x.json"), str(script)]
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    p = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
        env=env,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    in_script, in_jsprof, modules = p.stdout.splitlines()
    assert (in_script, in_jsprof) == ("undefined", "None")
    names = modules.split()
    assert (tmp_path / "x.json").exists() and "jsprof.formats._jsprof_write" in names
    # written and summarised without the model: no numpy at all (recorded.py, issue 32)
    assert "numpy" not in names and "jsprof.trace" not in names
    for other in ("pprof", "speedscope", "chrometrace", "perfetto", "firefox", "folded"):
        assert f"jsprof.formats.{other}" not in names
    assert "rich.console" not in names and "jsprof.render.console" not in names
    assert "numpy.ma" not in names  # np.unique imports it
    # msgspec (with typing_extensions) is the readers' typed path: writing needs neither
    # (formats/_jsprof_typed.py, _v8profile_typed.py; ~8 ms of every record, issue 32)
    assert "msgspec" not in names and "typing_extensions" not in names
    assert "jsprof.formats._jsprof_typed" not in names
    assert "jsprof.formats._v8profile_typed" not in names
    # the inspector's WebSocket: its handshake's SHA-1 without OpenSSL (hashlib), its
    # 127.0.0.1 connected to without getaddrinfo (which imports the idna codec)
    assert "hashlib" not in names and "encodings.idna" not in names
    # nor orjson, whose import brings dataclasses, inspect, uuid, platform and datetime
    # (~13 ms of CPU, a tenth of a short recording's process: issue 32): the inspector's
    # small messages, the file's tables and the summary go through the stdlib's json
    for heavy in ("orjson", "dataclasses", "inspect", "uuid", "platform", "datetime"):
        assert heavy not in names, heavy
    # nor tempfile (random, weakref: ~2 ms): the file is written through io._mkstemp
    assert "tempfile" not in names and "random" not in names
    # nor gzip (~1 ms): only a .gz output compresses (the reader inflates with zlib)
    assert "gzip" not in names
    assert "wrote " in p.stderr


def test_records_output_check_imports_no_numpy(tmp_path: Path) -> None:
    """`record` holds the script until its -o is checked (record --engine node, cli's
    _Preparing): that check imports neither numpy nor a format module, so the script runs
    while they are imported (issue 25; it imported numpy and the writer first)."""
    code = (
        "import sys\nfrom jsprof.outputs import recording_output\n"
        "print(recording_output(sys.argv[1], 'x'), recording_output(None, sys.argv[2]))\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "x.cpuprofile"), str(tmp_path / "y")],
        capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    said, modules = p.stdout.splitlines()
    assert said == f"{tmp_path / 'x.cpuprofile'} {tmp_path / 'y'}.jsprof.json"
    names = modules.split()
    assert "numpy" not in names and "jsprof.trace" not in names
    assert not [n for n in names if n.startswith("jsprof.formats.")]


def test_report_of_a_jsprof_file_imports_no_other_format(tmp_path: Path) -> None:
    """Telling a jsprof file's format imports that reader only: every reader was imported
    to sniff any file, and the other eight (protobuf, pprof, OTLP, Perfetto) took 480-620 ms
    of a `report`'s 1.4 s at load 22."""
    trace = Path(__file__).parent / "data" / "chromium" / "trace-basic.json"
    code = ("import sys\nfrom jsprof.cli import main\nstatus = main(sys.argv[1:])\n"
            "print(' '.join(sorted(sys.modules)))\nsys.exit(status)")
    p = subprocess.run([sys.executable, "-c", code, "report", str(trace)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    names = p.stdout.splitlines()[-1].split()
    assert "jsprof.formats.jsprof" in names
    others = [n for n in names if n.startswith("google.protobuf")
              or n.split(".")[:2] == ["jsprof", "formats"] and n.split(".")[-1] in (
                  "cpuprofile", "chrometrace", "speedscope", "otlpjson", "otlp", "pprof",
                  "perfetto", "folded", "firefox", "_otlp", "_pprof_proto")]
    assert others == []
