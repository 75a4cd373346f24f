"""Names from the profiled code reach the terminal escaped: a function or resource named
with ESC sequences, newlines or U+2028 (a web page chooses its names under `--engine
chromium`) is printed as visible escapes, one row per function, in every text output;
JSON and trace files keep the real names."""

import json
import subprocess
import sys

import pytest

import jsprof
from jsprof.trace import Recording, TraceBuilder, Track
from jsprof.words import printable

JSPROF = [sys.executable, "-m", "jsprof.cli"]
EVIL = "\x1b[31mRED\x1b[0m\x1b]0;pwned\x07"
EVIL_SHOWN = "\\x1b[31mRED\\x1b[0m\\x1b]0;pwned\\x07"
NL = "two\nlines\u2028here\u202e"
NL_SHOWN = "two\\nlines\\u2028here\\u202e"


def _run(args, cwd, ok=(0,)):
    p = subprocess.run([*JSPROF, *map(str, args)], capture_output=True, text=True,
                       timeout=120, cwd=cwd)
    assert p.returncode in ok, p.stderr
    return p


def _clean(text):
    # No terminal control reaches the output: only newlines between rows.
    bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) < 0xa0
           or c in "\u2028\u2029\u202e"]
    assert not bad, repr(text)


def _trace(tmp_path, name="t.jsprof.json", hot=3):
    b = TraceBuilder()
    res = b.resource_id((tmp_path / "a\x1b[2Jb.js").as_uri())
    main = b.frame_id("main", res, 1, 1)
    evil = b.stack_id([main, b.frame_id(EVIL, res, 2, 1)])
    nl = b.stack_id([main, b.frame_id(NL, res, 3, 1)])
    t = 0.0
    for stack in [evil] * hot + [nl] * 2:
        b.add_sample(t, stack, line=2 if stack == evil else 3)
        t += 1.0
    path = tmp_path / name
    jsprof.save(Recording([Track("tr\x1back", b.build(), engine="quickjs",
                                 sample_interval=1.0)]), path)
    return path


def test_printable():
    assert printable(EVIL) == EVIL_SHOWN
    assert printable(NL) == NL_SHOWN
    assert printable("é ü → (idle)") == "é ü → (idle)"
    assert printable(None) == ""


def test_report_table_tree_and_lines_escape_names_and_locations(tmp_path):
    path = _trace(tmp_path)
    for extra in ([], ["--tree"], ["--by", "line"], ["--by", "resource"]):
        out = _run(["report", path, *extra], tmp_path).stdout
        _clean(out)
        assert "tr\\x1back" in out.splitlines()[0] or extra == ["--tree"], out
        if extra != ["--by", "resource"]:
            assert EVIL_SHOWN in out and NL_SHOWN in out, out
            # the name with a newline stays on its row, with its numbers
            assert any(NL_SHOWN in ln and "40.0" in ln for ln in out.splitlines()), out
        assert "a\\x1b[2Jb.js" in out, out
    # JSON keeps the names as the code gave them
    doc = json.loads(_run(["report", path, "--json"], tmp_path).stdout)
    assert {r["name"] for r in doc["rows"]} >= {EVIL, NL}


def test_diff_escapes_names_and_gate_messages(tmp_path):
    base, new = _trace(tmp_path, "b.jsprof.json", 3), _trace(tmp_path, "n.jsprof.json", 8)
    # --wide: names whole, as escaped (elision is tested in test_cli_tables)
    p = _run(["diff", base, new, "--wide", "--fail-if", "*:self>+1pp"], tmp_path, ok=(1,))
    _clean(p.stdout)
    _clean(p.stderr)
    assert EVIL_SHOWN in p.stdout and NL_SHOWN in p.stdout
    assert EVIL_SHOWN in p.stderr  # the broken rule names the function, escaped


def test_record_summary_escapes_quickjs_names(tmp_path):
    script = tmp_path / "esc.js"
    script.write_text(
        'const o={["\\x1b[31mRED\\x1b[0m\\x1b]0;pwned\\x07"](){let x=0;'
        "for(let i=0;i<1e6;i++)x+=i;return x}};"
        'const f=o["\\x1b[31mRED\\x1b[0m\\x1b]0;pwned\\x07"]; for(let i=0;i<3;i++) f();\n'
    )
    p = _run(["record", "-o", tmp_path / "e.json", script], tmp_path)
    _clean(p.stderr)
    assert EVIL_SHOWN in p.stderr, p.stderr
    rec = jsprof.load(tmp_path / "e.json")
    assert EVIL in {f.name for f in rec.tracks[0].trace.frames}


def test_instrument_tables_escape_method_names(tmp_path):
    script = tmp_path / "cls.js"
    script.write_text(
        'class A { ["\\x1b]0;pwned\\x07\\nx"]() { return 1 } }\n'
        'const a = new A(); for (let i = 0; i < 3; i++) a["\\x1b]0;pwned\\x07\\nx"]();\n'
    )
    p = _run(["instrument", "--watch", "A", script], tmp_path)
    _clean(p.stderr)
    assert "A.\\x1b]0;pwned\\x07\\nx" in p.stderr, p.stderr


def test_fleet_text_escapes(capsys):
    from jsprof.fleet.text import FleetTopTable
    from jsprof.render.base import emit
    from jsprof.render.summary import stdout_console

    row = {"name": EVIL, "resource": "https://x/\u2028.js", "line": 1, "column": 2,
           "selfPct": 50.0, "totalPct": 50.0, "selfMs": 1.0, "totalMs": 1.0, "traces": 1,
           "p50SelfMs": 1.0, "p95SelfMs": 1.0}
    doc = {"rows": [row], "traces": 1, "samples": 2, "totalMs": 2.0}
    # Narrow (piped) tables elide long names in the middle: still no raw control character.
    emit(FleetTopTable(stdout_console(), "t"), doc)
    _clean(capsys.readouterr().out)
    # --wide prints the name whole, escaped.
    emit(FleetTopTable(stdout_console(), "t", wide=True), doc)
    out = capsys.readouterr().out
    _clean(out)
    assert EVIL_SHOWN in out and "https://x/\\u2028.js:1:2" in out


@pytest.mark.chromium
def test_a_page_cannot_write_escape_sequences_to_the_terminal(tmp_path):
    # Under --engine chromium the page may be any site: what it logs and the stack of
    # what it throws reach the terminal with visible escapes, line breaks kept.
    page = tmp_path / "p.html"
    page.write_text(
        "<script>console.log('a\\x1b]0;pwned\\x07b\\nnext');"
        "console.error('\\x1b[2J');"
        "throw new Error('bad\\x1b[31m');</script>"
    )
    p = _run(["record", "--engine", "chromium", "--duration", "1", "-o",
              tmp_path / "o.json", page], tmp_path, ok=(0, 1))
    _clean(p.stdout)
    _clean(p.stderr)
    assert "a\\x1b]0;pwned\\x07b\nnext" in p.stdout
    assert "\\x1b[2J" in p.stderr and "bad\\x1b[31m" in p.stderr


def test_footers_wrap_between_their_parts():
    # A footer was broken at any space: "...; 3 page" / "loads" (seen in `fleet top` at
    # 100 columns). It breaks after its ", " and "; " where the parts fit, and keeps
    # every character.
    from jsprof.render.rows import cell_len, wrap_to

    text = "3 traces, 1,234 samples, 12345.6 ms (2.0 ms lost in gaps); 3 page loads"
    for width in (60, 40, 30, 20):
        lines = wrap_to(text, width)
        assert all(cell_len(line) <= width for line in lines), (width, lines)
        assert " ".join(lines) == text, (width, lines)
        assert any("3 page loads" in line for line in lines), (width, lines)
    assert wrap_to(text, None) == [text] and wrap_to(text, 200) == [text]
