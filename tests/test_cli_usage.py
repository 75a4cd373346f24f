"""The CLI as a new user meets it: --version, one-line argument errors, every option
explained, and options that would be silently ignored refused with one line."""

import argparse
import re
import shutil
import subprocess
import sys

import pytest

from jsprof import __version__
from jsprof.cli import build_parser, main

TRACE = "tests/data/chromium/trace-basic.json"


def _exit(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    return e.value.code, out, err


def test_version(capsys):
    code, out, _ = _exit(["--version"], capsys)
    assert code == 0 and out == f"jsprof {__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


@pytest.mark.parametrize(
    "argv, what",
    [
        ([], "give a command"),
        (["--bogus"], "unrecognized arguments: --bogus; give a command first"),
        (["reprot", TRACE], "invalid choice: 'reprot'"),
        (["report", TRACE, "--top", "x"], "expected a whole number"),
        (["report", TRACE, "--by", "file"], "invalid choice: 'file'"),
        (["report"], "required: trace"),
        (["record", "--interval", "5000", "a.js"], "at most 1000 ms"),
        (["record", "--interval", "-1", "a.js"], "finite number >= 0"),
        (["record", "--duration", "0", "a.js"], "must be more than 0"),
        (["flame", TRACE, "--color-by", "x"], "invalid choice: 'x'"),
        # an option the subcommand lacks points to that subcommand's help
        (["record", "--bogus", "x.js"], "unrecognized arguments: --bogus"),
        (["report", TRACE, "--bogus"], "unrecognized arguments: --bogus"),
        (["fleet", "top", "--app", "a", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_argument_errors_are_one_line_with_a_pointer_to_help(argv, what, capsys):
    code, out, err = _exit(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and what in err, err
    command = argv[0] if argv and argv[0] in ("report", "record", "flame") else None
    if argv[:2] == ["fleet", "top"]:
        command = "fleet top"
    assert err.rstrip().endswith(f"(see: jsprof{' ' + command if command else ''} --help)")
    assert "usage:" not in err


@pytest.mark.parametrize(
    "argv, what",
    [
        (["report", TRACE, "--tree", "--by", "line"], "--by line does not apply"),
        (["report", TRACE, "--tree", "--top", "5"], "--top does not apply to --tree"),
        (["report", TRACE, "--tree", "--sort", "total"], "--sort does not apply to --tree"),
        (["report", TRACE, "--threshold", "2"], "--threshold goes with --tree"),
        (["report", TRACE, "--top", "3", "--all"], "--top and --all"),
        (["diff", TRACE, TRACE, "--top", "3", "--all"], "--top and --all"),
        (["diff", TRACE, TRACE, "--icicle"], "--icicle shapes the --flame graph"),
        (["report", TRACE, "--json", "--wide"], "--json always gives names whole"),
        (["diff", TRACE, TRACE, "--json", "--wide"], "--json always gives names whole"),
        (["record", "--pid", "1", "--engine", "quickjs"], "--pid attaches to Node"),
        (["record", "--pid", "1", "--workers", "2"], "--workers does not apply to --pid"),
    ],
)
def test_meaningless_combinations_are_refused(argv, what, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and what in err, err


def test_the_defaults_still_work(capsys):
    assert main(["report", TRACE, "--tree", "--threshold", "2"]) == 0
    assert main(["report", TRACE, "--all", "--by", "resource", "--sort", "total"]) == 0
    capsys.readouterr()


def _parsers(p: argparse.ArgumentParser):
    yield p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sp in a.choices.values():
                yield from _parsers(sp)


def test_every_option_has_help():
    missing = [
        f"{p.prog} {a.option_strings or a.dest}"
        for p in _parsers(build_parser())
        for a in p._actions
        if not isinstance(a, argparse._SubParsersAction) and not (a.help or "").strip()
    ]
    assert missing == []


def test_all_hint_names_an_existing_option():
    # render/methods.py tells `instrument` users "--all shows them"; --top/--all go together.
    for p in _parsers(build_parser()):
        opts = {o for a in p._actions for o in a.option_strings}
        if "--top" in opts:
            assert "--all" in opts, p.prog


def test_diff_help_shows_the_rule_syntax(capsys):
    code, out, _ = _exit(["diff", "--help"], capsys)
    assert code == 0
    for piece in (":self>+", ":total>+", "<-", "*:self", "--fail-if 'fib:self>+50ms'", "Nms"):
        assert piece in out, piece
    assert "exits 1" in out.replace("\n", " ") or "exit 1" in out


def test_diff_exit_codes(tmp_path, capsys):
    # 0: no rule broke; 1: a rule broke; 2: any error (a missing file, a bad rule).
    assert main(["diff", TRACE, TRACE, "--fail-if", "*:self>+1pp"]) == 0
    assert main(["diff", TRACE, str(tmp_path / "missing.json")]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"frames": 1}')
    assert main(["diff", TRACE, str(bad)]) == 2
    assert main(["diff", TRACE, TRACE, "--fail-if", "fib>1"]) == 2
    other = "tests/data/chromium/trace-idle.json"
    assert main(["diff", TRACE, other, "--fail-if", "*:self>+0.01pp"]) == 1
    capsys.readouterr()


def test_a_tree_pruned_to_nothing_says_so(capsys):
    assert main(["report", TRACE, "--tree", "--threshold", "200"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "nothing is left above --threshold 200" in err


def test_convert_refuses_to_write_over_its_input(tmp_path, capsys):
    src = tmp_path / "t.json"
    shutil.copy(TRACE, src)
    before = src.read_bytes()
    assert main(["convert", str(src), str(tmp_path / "." / "t.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is the input file" in err, err
    assert src.read_bytes() == before


def test_jsprof_options_after_the_script_are_the_scripts_and_a_note_says_so(tmp_path):
    # Everything after the script is the script's (as with node); --no-profiling there
    # never reaches jsprof, so a note says where it went (-o is not run's: no note). The
    # script sees them in its arguments.
    app = tmp_path / "app.js"
    app.write_text("console.log(JSON.stringify(scriptArgs.slice(1)));\n")
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "run", str(app), "--no-profiling", "-o", "x"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == '["--no-profiling","-o","x"]'
    assert p.stderr == (
        f"jsprof: note: --no-profiling after the script goes to the script; put jsprof run's "
        f"own options before {app}\n"
    )
    quiet = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "run", str(app), "--keep"],
        capture_output=True, text=True, timeout=60,
    )
    assert quiet.returncode == 0 and quiet.stderr == ""


def test_no_help_text_shows_a_doubled_percent_sign():
    # argparse formats `help` strings with % (so "%%" prints "%") but not a description or
    # an epilog without %(prog)s: `report --help` printed "self %%".
    doubled = [p.prog for p in _parsers(build_parser()) if "%%" in p.format_help()]
    assert doubled == []
    assert "Columns: self %, total %," in " ".join(
        build_parser()._subparsers._group_actions[0].choices["report"].format_help().split()
    )


def test_words_after_dashdash_are_the_scripts_on_purpose_and_get_no_note(tmp_path):
    # `record --engine node -- tsc --target es2020`: tsc's own --target, given after `--`
    # on purpose; the note said it "goes to the script" as if by mistake. Before the `--`
    # an option of jsprof's after the script still gets its note.
    app = tmp_path / "app.js"
    app.write_text("console.log(JSON.stringify(scriptArgs.slice(1)));\n")
    run = [sys.executable, "-m", "jsprof.cli", "run"]
    p = subprocess.run([*run, str(app), "--", "--no-profiling"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == '["--no-profiling"]', p
    assert p.stderr == ""
    p = subprocess.run([*run, str(app), "--engine", "quickjs", "--", "--no-profiling"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.stdout.strip() == '["--engine","quickjs","--","--no-profiling"]', p
    assert p.stderr == (f"jsprof: note: --engine after the script goes to the script; put "
                        f"jsprof run's own options before {app}\n")
    node_app = tmp_path / "tool.js"
    node_app.write_text("console.log(JSON.stringify(process.argv.slice(2)));\n")
    p = subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "record", "--engine", "node", "-o",
         str(tmp_path / "t.jsprof.json"), "--", "node", str(node_app), "--target", "es2020"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == '["--target","es2020"]'
    assert "note" not in p.stderr, p.stderr
