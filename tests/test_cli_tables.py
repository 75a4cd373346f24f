"""`jsprof report` tables as a pipe sees them: the columns stay, numbers are plain, no
trailing spaces, the title on one line, long file:// locations relative to the current
directory, idle time ranked and counted like any row, and "1 sample"."""

import json
import subprocess
import sys

import jsprof
from jsprof.render.console import short_location
from jsprof.trace import Recording, TraceBuilder, Track

JSPROF = [sys.executable, "-m", "jsprof.cli"]


def _trace(tmp_path, name="a very long track name " * 8):
    b = TraceBuilder()
    url = (tmp_path / "src" / "deep" / "app.js").as_uri()
    hot = b.stack_id([b.frame_id("main", b.resource_id(url), 1, 1),
                      b.frame_id("hot", b.resource_id(url), 12, 3)])
    cold = b.stack_id([b.frame_id("main", b.resource_id(url), 1, 1)])
    t = 0.0
    for stack in [hot] * 3 + [None] * 5 + [cold] * 2:
        b.add_sample(t, stack)
        t += 1.0
    path = tmp_path / "t.jsprof.json"
    jsprof.save(Recording([Track(name, b.build(), engine="quickjs", sample_interval=1.0)]), path)
    return path


def report(tmp_path, *args):
    p = subprocess.run(
        [*JSPROF, "report", *map(str, args)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_piped_table(tmp_path):
    lines = report(tmp_path, _trace(tmp_path))
    assert lines[0].startswith("a very long track name") and lines[0].endswith("1 ms interval")
    assert lines[1].split() == ["self", "%", "total", "%", "self", "ms", "total", "ms",
                                "function", "location"]
    assert all(line == line.rstrip() for line in lines), [ln for ln in lines if ln.endswith(" ")]
    rows = [line.split() for line in lines[2:-1]]
    # (idle), samples with no stack, has 5 of 10 samples: first, and counted in the footer
    assert [r[4] for r in rows] == ["(idle)", "hot", "main"]
    assert rows[0][:4] == ["50.0", "50.0", "5.0", "5.0"]
    assert rows[1][:4] == ["30.0", "30.0", "3.0", "3.0"] and rows[1][5] == "src/deep/app.js:12:3"
    for r in rows:
        assert all(c.replace(".", "").isdigit() for c in r[:4])  # no %, unit or separator
    assert lines[-1] == "10 samples, 10.0 ms; showing 3 of 3 function rows"
    top = report(tmp_path, _trace(tmp_path), "--top", "1")
    assert top[-1] == "10 samples, 10.0 ms; showing 1 of 3 function rows (--all shows every row)"


def test_one_sample_is_singular(tmp_path):
    b = TraceBuilder()
    b.add_sample(0.0, b.stack_id([b.frame_id("f")]))
    path = tmp_path / "one.jsprof.json"
    jsprof.save(Recording([Track("main", b.build(), sample_interval=1.0)]), path)
    assert report(tmp_path, path)[-1].startswith("1 sample, ")
    p = subprocess.run([*JSPROF, "validate", path], capture_output=True, text=True, timeout=60)
    assert "1 resource" not in p.stdout and "1 frame," in p.stdout and "1 sample" in p.stdout


def test_short_location():
    assert short_location("file:///home/me/app/src/a.js:3:5", "/home/me/app") == "src/a.js:3:5"
    assert short_location("file:///home/me/app%20x/a.js:3", "/home/me/app x") == "a.js:3"
    assert short_location("file:///elsewhere/a.js:3", "/home/me/app") == "/elsewhere/a.js:3"
    assert short_location("/home/me/app/a.js", "/home/me/app/") == "a.js"
    assert short_location("https://x.test/a.js:1", "/") == "https://x.test/a.js:1"
    assert short_location("app.js:1:1", "/home") == "app.js:1:1"


def test_meta_keys_read_in_both_casings():
    # Older files' snake_case keys are renamed when read (jsprof.meta.normalise), so every
    # reader of a track's meta asks for one spelling.
    from jsprof.meta import normalise

    assert normalise({"captureLatencyMs": 1}) == {"captureLatencyMs": 1}
    assert normalise({"capture_latency_ms": 2}) == {"captureLatencyMs": 2}
    assert normalise({"bufferFull": False, "buffer_full": True}) == {"bufferFull": False}
    assert normalise({"my_key": 1}) == {"my_key": 1}  # not jsprof's: kept as written


def test_tree_shows_locations_as_the_table_does(tmp_path):
    # The tree, like the table, shows file:// locations relative to the current directory.
    table = report(tmp_path, _trace(tmp_path))
    tree = report(tmp_path, _trace(tmp_path), "--tree")
    assert any(ln.split()[-2:] == ["hot", "src/deep/app.js:12:3"] for ln in table), table
    hot = [ln for ln in tree if " hot " in ln]
    assert hot and hot[0].split()[-2:] == ["hot", "src/deep/app.js:12:3"], tree
    assert not any("file://" in ln for ln in tree), tree


# ---- issue 20: rows fit the terminal, elided in the middle; --wide; piped: whole (#36) ----

# V8 names compiled regular expressions `RegExp: <source>`: here 1,500+ characters.
REGEXP_JS = """\
const words = Array.from({length: 60}, (_, i) => "token" + i + "abcdefghij".repeat(2));
const re = new RegExp("^(?:" + words.join("|") + ")+$");
const s = words.join("").repeat(3);
const end = Date.now() + 300;
let n = 0;
while (Date.now() < end) if (re.test(s + n++)) n++;
"""


def _jsprof(tmp_path, *args, **kw):
    p = subprocess.run([*JSPROF, *map(str, args)], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path, **kw)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_rows_fit_the_width_with_names_elided_in_the_middle(tmp_path):
    script = tmp_path / "re.js"
    script.write_text(REGEXP_JS)
    trace = tmp_path / "re.json"
    _jsprof(tmp_path, "record", "--engine", "node", "-o", trace, script)
    rows = json.loads(_jsprof(tmp_path, "report", trace, "--json", "--all"))["rows"]
    regexp = next(r["name"] for r in rows if r["name"].startswith("RegExp: "))
    assert len(regexp) > 1000  # --json: whole
    # by line, a native with neither script nor line is "(unknown)" once (it said
    # "(unknown) (line unknown)")
    lines = json.loads(_jsprof(tmp_path, "report", trace, "--by", "line", "--json", "--all"))
    (where,) = {r["location"] for r in lines["rows"] if r["name"] == regexp}
    assert where == "(unknown)", where
    for args in (["report", trace, "--all"], ["report", trace, "--tree", "--threshold", "0"],
                 ["diff", trace, trace, "--all"]):
        # Piped (#36): names whole, as --wide prints them (it cut them to 100 columns)
        piped = _jsprof(tmp_path, *args)
        assert regexp in piped and "…" not in piped, args
        assert _jsprof(tmp_path, *args, "--wide") == piped
        # A terminal 100 columns wide: rows fit it
        lines = _in_pty(tmp_path, args, 100)
        # the title above and the summary line below a table are prose, not rows
        rows_only = [ln for ln in lines[1:] if "showing " not in ln]
        assert max(len(ln) for ln in rows_only) <= 100, max(rows_only, key=len)
        if args[0] == "diff":
            # diff's footer (124 columns in one line) wraps to the width as well
            assert max(len(ln) for ln in lines[1:]) <= 100, max(lines[1:], key=len)
        hit = [ln for ln in lines if "RegExp: ^" in ln]
        assert hit and "…" in hit[0], args
        # the start of the name and the end of it, with the middle left out
        assert regexp[-8:] in hit[0].split("…", 1)[1], hit[0]
        wide = "".join(_in_pty(tmp_path, [*args, "--wide"], 100))
        assert regexp in wide and "…" not in wide


def _in_pty(tmp_path, argv, columns: int) -> list[str]:
    """`jsprof ARGV`'s stdout lines as a terminal `columns` wide shows them (a pty)."""
    import fcntl
    import os
    import pty
    import re
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    p = subprocess.Popen([*JSPROF, *map(str, argv)], stdout=follower,
                         stderr=subprocess.PIPE, cwd=tmp_path, env=env)
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert p.wait(timeout=60) == 0, p.stderr.read()
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.decode()).replace("\r", "")
    return [ln for ln in text.splitlines() if ln.strip()]


def test_rows_fit_a_terminal(tmp_path):
    """In a terminal (a pty 72 columns wide) every row fits it."""
    b = TraceBuilder()
    url = (tmp_path / ("deep/" * 30) / "app.js").as_uri()
    sid = b.stack_id([b.frame_id("main" * 40, b.resource_id(url), 1, 1),
                      b.frame_id("x" * 300, b.resource_id(url), 1234, 56)])
    for t in range(5):
        b.add_sample(float(t), sid)
    path = tmp_path / "t.json"
    jsprof.save(Recording([Track("main", b.build(), sample_interval=1.0)]), path)
    for extra in ([], ["--tree"]):
        lines = _in_pty(tmp_path, ["report", path, *extra], 72)
        text = "\n".join(lines)
        assert len(lines) >= 3, text
        assert max(len(ln) for ln in lines if "showing" not in ln) <= 72, text
        assert any(":1234:56" in ln and "…" in ln for ln in lines), text  # the end kept


def test_a_row_with_no_location_gives_its_name_the_room(tmp_path):
    # Function and location shared the room equally, row by row alike: at 64 columns
    # `(garbage collector)` was cut to `(garbag…ector)` beside its empty location. The rows
    # that have a location keep sharing it (aligned); the others' names take it whole.
    b = TraceBuilder()
    url = (tmp_path / ("deep/" * 10) / "app.js").as_uri()
    hot = b.stack_id([b.frame_id("renderTheWholeProductList", b.resource_id(url), 12, 3)])
    gc = b.stack_id([b.frame_id("(garbage collector)")])
    for t, sid in enumerate([hot] * 3 + [gc] * 2):
        b.add_sample(float(t), sid)
    path = tmp_path / "t.json"
    jsprof.save(Recording([Track("main", b.build(), sample_interval=1.0)]), path)
    lines = _in_pty(tmp_path, ["report", path], 64)
    text = "\n".join(lines)
    assert max(len(ln) for ln in lines if "showing" not in ln) <= 64, text
    (row,) = [ln for ln in lines if "garbage" in ln]
    assert row.rstrip().endswith("  (garbage collector)"), text
    (row,) = [ln for ln in lines if ":12:3" in ln]
    assert "…" in row and row.rstrip().endswith("app.js:12:3"), text
    at = lines[1].index("location")
    assert row[at - 1] == " " and row[at] != " ", text  # under its header


def test_elision_rules():
    from jsprof.render.rows import (
        LOCATION_END,
        elide_location,
        elide_middle,
        fit_widths,
        output_width,
    )

    assert elide_middle("abcdefghij", 10) == "abcdefghij"
    assert elide_middle("abcdefghij", 7) == "abc…hij"
    # a location keeps more of its end
    assert elide_middle("http://127.0.0.1:8000/page.html:14:18", 20, LOCATION_END) == (
        "http:/…ge.html:14:18"
    )
    # ... and its file name and position whole when they fit (a start of under four
    # characters is left out); when they do not, it is elided as any location
    loc = "http://127.0.0.1:8000/page.html:14:18"
    assert elide_location(loc, 20) == "http…page.html:14:18"
    assert elide_location(loc, 17) == "…page.html:14:18"
    assert elide_location(loc, 30) == "http://12…8000/page.html:14:18"
    assert elide_location(loc, 12) == elide_middle(loc, 12, LOCATION_END) == "http…l:14:18"
    assert elide_location(loc, 99) == loc
    assert elide_middle("日本語のなまえ", 7) == "日本…え"  # wide characters count two
    assert fit_widths([10, 50], 100) == [10, 50]  # all fit
    assert fit_widths([10, 500], 60) == [10, 50]  # the narrow keeps its width
    assert fit_widths([300, 500], 60) == [30, 30]
    assert fit_widths([300, 500], 10) == [12, 12]  # never below the minimum
    assert output_width(None) is None and output_width(80) == 80  # piped: no limit (#36)
    assert output_width(80, wide=True) is None
