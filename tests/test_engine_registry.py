"""Engines are peers in the wiring too (issue 25): one EngineSpec per engine in
engines/registry.py, found by record.py and cli.py; the refusals it owns are written once;
and no module under engines/ imports what sits above it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from jsprof.cli import build_parser
from jsprof.engines.registry import NAMES, SPECS, engine_spec
from jsprof.errors import UsageError

SRC = Path(__file__).resolve().parent.parent / "src" / "jsprof"
UPWARD = ("jsprof.cli", "jsprof.record", "jsprof.outputs", "jsprof.render")


def test_every_engine_names_entry_points_that_exist() -> None:
    assert NAMES == ("quickjs", "node", "chromium")
    for spec in SPECS.values():
        for part in ("check", "record", "run"):
            assert callable(spec.part(part)), (spec.name, part)
    assert callable(engine_spec("node").part("attach"))
    assert callable(engine_spec("chromium").part("attach"))
    assert callable(engine_spec("node").part("start"))
    assert engine_spec("quickjs").part("attach") is None
    with pytest.raises(UsageError, match="cannot attach"):
        engine_spec("quickjs").attach(1)
    with pytest.raises(UsageError, match="unknown engine 'v9'; choose one of: quickjs, node"):
        engine_spec("v9")


def test_the_cli_offers_the_registrys_engines() -> None:
    for command in ("record", "run"):
        parser = build_parser(command)  # the command's own parser (the others are not built)
        sub = next(a for a in parser._actions if a.dest == "command")
        engine = next(a for a in sub.choices[command]._actions if a.dest == "engine")
        assert tuple(engine.choices) == NAMES, command


def test_the_max_buffer_size_refusal_is_written_once() -> None:
    texts = [p.read_text() for p in SRC.rglob("*.py")]
    assert sum(t.count("--max-buffer-size is not supported") for t in texts) == 1
    for name, keeps_all in (("quickjs", False), ("node", True), ("chromium", True)):
        if keeps_all:
            with pytest.raises(UsageError) as e:
                engine_spec(name).check_max_buffer_size(10)
            assert str(e.value) == (
                f"--max-buffer-size is not supported with --engine {name} (V8 keeps all)"
            )
        engine_spec(name).check_max_buffer_size(None)
    engine_spec("quickjs").check_max_buffer_size(10)


def test_record_on_node_refuses_max_buffer_size_in_one_line(tmp_path: Path) -> None:
    app = tmp_path / "app.js"
    app.write_text("console.log('ran')\n")
    r = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "record", "--engine", "node",
         "--max-buffer-size", "10", "-o", str(tmp_path / "t.json"), str(app)],
        capture_output=True, text=True, timeout=120,
    )
    assert (r.returncode, r.stdout) == (2, "")  # Node, started early, never ran the script
    assert r.stderr == (
        "jsprof: error: --max-buffer-size is not supported with --engine node (V8 keeps all)\n"
    )
    assert not (tmp_path / "t.json").exists()


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")[: -node.level]
    return ".".join([*base, node.module] if node.module else base)


def test_no_engine_module_imports_upward() -> None:
    found: dict[str, list[str]] = {}
    for path in (SRC / "engines").rglob("*.py"):
        rel = path.relative_to(SRC / "engines").as_posix()
        module = "jsprof.engines." + rel[:-3].replace("/", ".")
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom):
                base = _absolute(module, node)
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            up = [n for n in names if any(n == u or n.startswith(u + ".") for u in UPWARD)]
            if up:
                found.setdefault(rel, []).extend(up)
    assert found == {}, found


def test_node_is_started_before_numpy_through_the_registry(tmp_path: Path) -> None:
    # The registry imports its entry points lazily: Node boots while jsprof imports the rest.
    app = tmp_path / "empty.js"
    app.write_text("")
    code = (
        "import sys\n"
        "def hook(event, args):\n"
        "    if event == 'subprocess.Popen' and not hasattr(hook, 'said'):\n"
        "        hook.said = 1\n"
        "        print('numpy' in sys.modules, args[0], file=sys.stderr)\n"
        "sys.addaudithook(hook)\n"
        "from jsprof.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "record", "--engine", "node", "-o",
         str(tmp_path / "t.json"), str(app)],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    first = r.stderr.splitlines()[0].split()
    assert first[0] == "False" and Path(first[1]).name.startswith("node"), r.stderr


@pytest.mark.chromium
def test_the_run_api_runs_a_page_engine_in_its_browser(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # jsprof.record.run(engine="chromium") went on to QuickJS before the registry (a page's
    # script there has no window); now it is the spec's run, in headless Chromium.
    from jsprof.record import run

    app = tmp_path / "app.js"
    app.write_text("console.log(typeof window, typeof Profiler)\n")
    assert run(str(app), engine="chromium") == 0
    assert capfd.readouterr().out == "object function\n"
    with pytest.raises(UsageError, match="a page takes no arguments"):
        run(str(app), ["x"], engine="chromium")


def test_instrument_finds_its_engines_in_the_registry(tmp_path: Path) -> None:
    # `jsprof instrument` had its own list of engines and branched on the name; now each
    # engine's spec names its instrument entry point, and the CLI offers those engines.
    from jsprof.engines.registry import INSTRUMENT_NAMES
    from jsprof.instrument import run_instrumented

    assert INSTRUMENT_NAMES == ("quickjs", "node")
    for name in INSTRUMENT_NAMES:
        assert callable(engine_spec(name).instrumenter()), name
    parser = build_parser("instrument")
    sub = next(a for a in parser._actions if a.dest == "command")
    engine = next(a for a in sub.choices["instrument"]._actions if a.dest == "engine")
    assert tuple(engine.choices) == INSTRUMENT_NAMES
    app = tmp_path / "app.js"
    app.write_text("class A { f() { return 1 } }\nnew A().f()\n")
    with pytest.raises(UsageError) as e:
        run_instrumented(str(app), ["A"], engine="chromium")
    assert str(e.value) == (
        "--engine chromium cannot instrument methods; choose one of: quickjs, node"
    )
    for name in INSTRUMENT_NAMES:  # the real engines, through their specs
        result = run_instrumented(str(app), ["A"], engine=name)
        assert {(r.name, r.calls) for r in result.rows} == {("A.constructor", 1), ("A.f", 1)}
        assert result.recording.tracks[0].engine == name


def test_the_cli_names_no_engine() -> None:
    """cli.py reaches every engine through the registry (issue 37): it imports no engine
    module, names no engine's entry point and picks none by name (it called Chromium's
    record_chromium itself, past record.record, and chose engines by --cdp/--pid)."""
    tree = ast.parse((SRC / "cli.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _absolute("jsprof.cli", node)
            imported |= {base} | {f"{base}.{a.name}" for a in node.names}
    engines = sorted(
        n for n in imported
        if any(n == f"jsprof.engines.{e}" or n.startswith(f"jsprof.engines.{e}.") for e in NAMES)
    )
    assert engines == [], engines
    # an engine asked for by name, or --engine compared with one ("quickjs" stays: the
    # default --engine; a recording's track naming its engine is data, not wiring)
    named = sorted(
        ast.unparse(n) for n in ast.walk(tree)
        if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "engine_spec"
        and any(isinstance(a, ast.Constant) and a.value in ("node", "chromium") for a in n.args)
    ) + sorted(
        ast.unparse(n) for n in ast.walk(tree)
        if isinstance(n, ast.Compare) and "args.engine" in ast.unparse(n)
        and any(isinstance(c, ast.Constant) and c.value in NAMES for c in ast.walk(n))
    )
    assert named == [], named


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # the spec's refusals, the same for a page and a script
        (["--engine", "chromium", "--workers", "2", "p.html"],
         "--workers runs QuickJS runtimes; use --engine quickjs"),
        (["--engine", "node", "--workers", "2", "a.js"],
         "--workers runs QuickJS runtimes; use --engine quickjs"),
        (["--engine", "chromium", "p.html", "x"], "p.html: a page takes no arguments ('x')"),
        (["--engine", "chromium", "--target", "t", "p.html"],
         "--target and --allow-remote go with --cdp ENDPOINT"),
        (["--engine", "node", "--until", "load", "a.js"],
         "--until, --target and --allow-remote go with --engine chromium/--cdp"),
        (["--cdp", "http://127.0.0.1:1", "--until", "load"],
         "--until goes with a target that jsprof opens, not --cdp"),
        (["--cdp", "http://127.0.0.1:1", "p.html"],
         "give either --cdp ENDPOINT or a target to open, not both"),
        (["--pid", "1", "a.js"], "give either --pid PID or a script, not both"),
        (["--pid", "1", "--allow-remote"],
         "--until, --target and --allow-remote go with --engine chromium/--cdp"),
        # an attach flag names its engine as --engine does: both must agree
        (["--cdp", "http://127.0.0.1:1", "--engine", "node"],
         "--cdp attaches to Chromium; --engine node does not apply"),
        (["--pid", "1", "--engine", "quickjs"],
         "--pid attaches to Node; --engine quickjs does not apply"),
        (["--pid", "1", "--cdp", "http://127.0.0.1:1"], "give one of --pid PID or --cdp ENDPOINT"),
        (["--engine", "chromium", "--clock", "cpu", "p.html"], "--clock cpu is not supported"),
        (["--cdp", "http://127.0.0.1:1", "--clock", "cpu"],
         "--clock cpu is not supported with --engine chromium"),
        (["--engine", "chromium"], "give the URL, .html, .js or .mjs file to record"),
    ],
)
def test_record_refuses_what_the_engines_spec_does_not_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    args: list[str], said: str,
) -> None:
    from jsprof.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.html").write_text("<p>x</p>")
    (tmp_path / "a.js").write_text("1\n")
    assert main(["record", *args]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err
    assert list(tmp_path.glob("*.json")) == []  # refused before anything ran


def test_instrument_names_no_engine() -> None:
    """instrument/ hands its transform and runtime to the spec's entry point and imports no
    engine (it imported engines.quickjs for `is_module`, now engines/base.py's)."""
    found = []
    for path in (SRC / "instrument").rglob("*.py"):
        module = "jsprof.instrument." + path.relative_to(SRC / "instrument").as_posix()[:-3]
        module = module.removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(module if path.name != "__init__.py" else module + ".x", node)
                if any(base == f"jsprof.engines.{e}" or base.startswith(f"jsprof.engines.{e}.")
                       for e in NAMES):
                    found.append(f"{path.name}: {base}")
    assert found == [], found
