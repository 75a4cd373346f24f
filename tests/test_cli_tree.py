"""`report --tree` has the table's title, says when tracks were merged and counts pruned
roots; `record`'s summary gives the same time as `report` for the same file."""

import re
import subprocess
import sys

import pytest

import jsprof
from jsprof.trace import Recording, TraceBuilder, Track

JSPROF = [sys.executable, "-m", "jsprof.cli"]


def _run(cwd, *args):
    p = subprocess.run([*JSPROF, *map(str, args)], capture_output=True, text=True,
                       timeout=120, cwd=cwd)
    assert p.returncode == 0, p.stderr
    return p


def _track(name, spec):
    """spec: (root name, samples) per root, 1 ms a sample."""
    b = TraceBuilder()
    t = 0.0
    for root, n in spec:
        sid = b.stack_id([b.frame_id(root, b.resource_id("file:///a.js"), 1, 1)])
        for _ in range(n):
            b.add_sample(t, sid)
            t += 1.0
    return Track(name, b.build(), engine="quickjs", sample_interval=1.0)


def test_tree_title_and_merged_tracks(tmp_path):
    path = tmp_path / "two.jsprof.json"
    jsprof.save(Recording([_track("main", [("big", 90)]), _track("worker 1", [("w", 10)])]),
                path)
    table = _run(tmp_path, "report", path).stdout.splitlines()
    tree = _run(tmp_path, "report", "--tree", path).stdout.splitlines()
    assert tree[0] == table[0] == ("main · quickjs · 1 ms interval; "
                                   "worker 1 · quickjs · 1 ms interval")
    assert tree[1].startswith("2 tracks merged into one tree"), tree
    one = _run(tmp_path, "report", "--tree", "--track", "worker 1", path).stdout.splitlines()
    assert one[0] == "worker 1 · quickjs · 1 ms interval" and "merged" not in one[1], one


def test_tree_counts_roots_below_the_threshold(tmp_path):
    path = tmp_path / "roots.jsprof.json"
    jsprof.save(Recording([_track("main", [("big", 90), ("small", 6), ("tiny", 4)])]), path)
    lines = _run(tmp_path, "report", "--tree", "--threshold", "5", path).stdout.splitlines()
    assert lines[-1] == "└─ (1 more below 5%: 4.0 ms)", lines
    assert any("small" in ln and ln.startswith("├─") for ln in lines), lines
    # every root shown: no such line, and the last root closes the tree
    lines = _run(tmp_path, "report", "--tree", "--threshold", "1", path).stdout.splitlines()
    assert "more below" not in lines[-1] and lines[-1].startswith("└─") and "tiny" in lines[-1]


@pytest.mark.under_load
def test_record_summary_and_report_give_one_time(tmp_path):
    script = tmp_path / "busy.js"
    script.write_text("function f(){let x=0;for(let i=0;i<2e6;i++)x+=i;return x}\n"
                      "for(let i=0;i<5;i++) f();\n")
    rec = _run(tmp_path, "record", "-o", "b.json", script).stderr
    n, ms = re.search(r"main: (\d+) samples over ([\d.]+) ms", rec).groups()
    foot = _run(tmp_path, "report", "b.json").stdout.splitlines()[-1]
    assert foot.startswith(f"{n} samples, {ms} ms"), (rec, foot)
    # the time the gap cap left out (a loaded machine) is said alike by both
    def lost(text: str) -> str | None:
        m = re.match(r" \(\+[\d.]+ ms lost", text)
        return None if m is None else m.group(0)

    said = rec.splitlines()[0][len(f"main: {n} samples over {ms} ms"):]
    assert lost(said) == lost(foot[len(f"{n} samples, {ms} ms"):]), (rec, foot)


def test_focus_tree_lists_no_zero_time_rows(tmp_path):
    # --focus leaves the other paths in the tree with no time: they are not rows, and not
    # "(N more below 2%: 0.0 ms)" either; paths with a little time still are counted.
    data = __import__("pathlib").Path(__file__).parent / "data" / "node" / "bench.cpuprofile"
    focused = _run(tmp_path, "report", data, "--focus", "sortObjects", "--tree",
                   "--threshold", "2").stdout
    assert "sortObjects" in focused
    assert not re.search(r"more below [\d.]+%: 0\.0 ms\)", focused), focused
    whole = _run(tmp_path, "report", data, "--tree", "--threshold", "2").stdout
    assert re.search(r"more below 2%: [1-9][\d.]* ms\)", whole)


def test_demo_tree_says_why_main_is_there_twice(tmp_path):
    # `make demo`'s tree shows `main` under the script and again as a root: two separate
    # synchronous runs of it, before and after its `await`. One note line says so (the
    # tree was right but unexplained); a script with one run has no such note.
    from pathlib import Path

    app = Path(__file__).resolve().parent.parent / "examples" / "app.js"
    _run(tmp_path, "record", "-o", "app.json", app)
    lines = _run(tmp_path, "report", "app.json", "--tree", "--threshold", "2").stdout
    lines = lines.splitlines()
    roots = [ln for ln in lines if ln.startswith(("├─", "└─")) and "%" in ln]
    assert any(re.search(r"ms  main  ", ln) for ln in roots), lines
    assert any(re.search(r"^│  └─ .* ms  main  ", ln) for ln in lines), lines  # under the script
    at = [i for i, ln in enumerate(lines) if ln.startswith("note:")]
    assert at, lines
    note = " ".join(lines[at[0]:])  # wrapped to the width
    assert note.startswith("note: main (under 2 roots): each root is a separate run of "
                           "JavaScript"), lines
    assert "after an await" in note, lines
    (tmp_path / "sync.js").write_text(
        "function work() { let x = 0; for (let i = 0; i < 3e6; i++) x += i; return x; }\n"
        "function main() { return work() + work(); }\nmain();\n"
    )
    _run(tmp_path, "record", "-o", "sync.json", "sync.js")
    out = _run(tmp_path, "report", "sync.json", "--tree").stdout
    assert "main" in out and "note:" not in out, out
