"""`jsprof report` tables as a pipe sees them: the columns stay, numbers are plain, no
trailing spaces, the title on one line, long file:// locations relative to the current
directory, idle time ranked and counted like any row, and "1 sample"."""

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
    from jsprof.render.summary import meta_get

    assert meta_get({"captureLatencyMs": 1}, "captureLatencyMs") == 1
    assert meta_get({"capture_latency_ms": 2}, "captureLatencyMs") == 2
    assert meta_get({"bufferFull": False, "buffer_full": True}, "bufferFull") is False
    assert meta_get({}, "bufferFull", "none") == "none"


def test_tree_shows_locations_as_the_table_does(tmp_path):
    # The tree, like the table, shows file:// locations relative to the current directory.
    table = report(tmp_path, _trace(tmp_path))
    tree = report(tmp_path, _trace(tmp_path), "--tree")
    assert any(ln.split()[-2:] == ["hot", "src/deep/app.js:12:3"] for ln in table), table
    hot = [ln for ln in tree if " hot " in ln]
    assert hot and hot[0].split()[-2:] == ["hot", "src/deep/app.js:12:3"], tree
    assert not any("file://" in ln for ln in tree), tree
