"""Doors out on a real minified bundle (issue 32's "numbers described right"): marked,
bundled and minified by esbuild (npm, pinned in tests/js), recorded on QuickJS. A
minified bundle has many functions on one line, told apart by their columns only, and
many anonymous ones: what each export keeps must read back as the recording said it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import jsprof
from jsprof.analysis.profile import count_share_shift, summarize
from jsprof.formats import folded, pprof, read_any

pytestmark = pytest.mark.npm

JS = Path(__file__).parent / "js" / "node_modules"
DRIVER = """import { marked } from "marked";
const SRC = ("# Title\\n\\nSome *text* with `code` and [a link](http://x.y).\\n\\n- one\\n" +
  "- two\\n\\n```js\\nlet a = 1;\\n```\\n> quote\\n\\n| a | b |\\n|---|---|\\n| 1 | 2 |\\n")
  .repeat(40);
let n = 0;
const end = Date.now() + 700;
while (Date.now() < end || n < 5) { marked.parse(SRC); n++; }
console.log(n > 0);
"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> dict:
    """The bundle and its QuickJS recording (CPU clock: samples of the parsing, however
    busy the machine), saved as .jsprof.json."""
    d = tmp_path_factory.mktemp("bundle")
    assert (JS / "marked").is_dir(), "tests/js missing: `make test` installs it"
    (d / "drv.mjs").write_text(DRIVER)
    subprocess.run(
        [str(JS / ".bin" / "esbuild"), "drv.mjs", "--bundle", "--minify", "--format=esm",
         "--outfile=b.min.mjs", "--log-level=warning"],
        cwd=d, check=True, timeout=120, env={**os.environ, "NODE_PATH": str(JS)},
    )
    rec = jsprof.record(d / "b.min.mjs", clock="cpu")
    jsprof.save(rec, d / "b.jsprof.json")
    return {"dir": d, "rec": rec, "json": d / "b.jsprof.json"}


def _keys(rec) -> dict:
    """(self, total) samples per function (name, file, line, column): the report's rows."""
    s = summarize(rec)
    return {tuple(k): (a, b) for k, a, b in zip(s.stats.keys, s.stats.self_samples.tolist(),
                                                s.stats.total_samples.tolist(), strict=True)}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jsprof.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_pprof_keeps_functions_on_one_line_apart(bundle):
    """Written as pprof and read back, every function keeps its column (Line.column), so
    functions of the same name on the same line stay separate rows: before, the columns
    were dropped and they read back as one (a terser bundle's 551 rows became 413)."""
    rec = bundle["rec"]
    keys = _keys(rec)
    by_line = Counter((name, url, line) for name, url, line, _col in keys)
    assert max(by_line.values()) >= 2, by_line  # the bundle has such functions
    back = read_any(pprof.write(rec), "b.pprof")
    assert _keys(back) == keys
    # and through the CLI, as a user does it: as many rows as the recording's
    d = bundle["dir"]
    assert _cli("convert", str(bundle["json"]), "b.pprof", cwd=d).returncode == 0
    rows = [_cli("report", f, "--all", "--json", cwd=d) for f in (str(bundle["json"]), "b.pprof")]
    a, b = (json.loads(r.stdout)["rows"] for r in rows)
    assert len(a) == len(b)


def test_folded_reads_anonymous_functions_back_as_anonymous(bundle):
    """Folded stacks write an anonymous function as `(anonymous) (url:line:col)`; read
    back it is that function again (empty name), so a diff against the recording shows
    no function new or removed (before: `(anonymous)` new, each anonymous one removed)."""
    rec = bundle["rec"]
    keys = _keys(rec)
    assert any(not name for name, *_ in keys)  # the bundle has anonymous functions
    back = read_any(folded.write(rec), "b.folded")
    assert _keys(back) == keys  # samples per function: folded stacks keep counts
    d = bundle["dir"]
    assert _cli("convert", str(bundle["json"]), "b.folded", cwd=d).returncode == 0
    r = _cli("diff", str(bundle["json"]), "b.folded", "--all", cwd=d)
    assert r.returncode == 0, r.stderr
    assert "[new]" not in r.stdout and "[removed]" not in r.stdout, r.stdout


def test_folded_counts_are_said_to_be_counts_not_times(bundle):
    """Folded stacks hold sample counts only (read back 1 ms a sample): report's footer,
    its JSON, diff's header and JSON say the ms are sample counts, and diff warns when one
    side only is; `convert` to folded says how far counting moves the shares when the
    samples did not weigh alike. Before: `3906 samples, 3906.0 ms` of a 5,258 ms
    recording, and a diff of samples against ms, unsaid."""
    d, src = bundle["dir"], str(bundle["json"])
    r = _cli("convert", src, "c.folded", cwd=d)
    assert r.returncode == 0, r.stderr
    got = count_share_shift(summarize(bundle["rec"]))
    assert got is not None
    said = [line for line in r.stderr.splitlines() if "keep sample counts" in line]
    if got[0] >= 0.05:
        assert len(said) == 1 and f"up to {got[0]:.1f} percentage points" in said[0], r.stderr
    else:
        assert said == [], r.stderr
    # read back, every sample weighs alike: converting it again has nothing to say
    r = _cli("convert", "c.folded", "again.folded", cwd=d)
    assert r.returncode == 0 and "keep sample counts" not in r.stderr, r.stderr

    footer = _cli("report", "c.folded", cwd=d).stdout.splitlines()[-1]
    assert "keep sample counts, not times" in footer and " ms;" not in footer
    assert "not times" not in _cli("report", src, cwd=d).stdout
    assert json.loads(_cli("report", "c.folded", "--json", cwd=d).stdout)[
        "ms_are_sample_counts"] is True
    assert "ms_are_sample_counts" not in json.loads(_cli("report", src, "--json", cwd=d).stdout)

    r = _cli("diff", src, "c.folded", cwd=d)
    assert "c.folded: read from folded stacks" in r.stdout.splitlines()[0], r.stdout
    assert "c.folded holds sample counts, not times" in r.stderr, r.stderr
    r = _cli("diff", src, "c.folded", "--json", cwd=d)
    assert json.loads(r.stdout)["ms_are_sample_counts"] == ["c.folded"]
    r = _cli("diff", "again.folded", "c.folded", cwd=d)  # both counts: no mismatch to warn of
    assert "holds sample counts" not in r.stderr and "not times" in r.stdout.splitlines()[0]


def test_a_flame_graph_of_folded_stacks_says_its_ms_are_counts(bundle):
    """`jsprof flame` of folded stacks: the subtitle counts samples and says the ms are
    sample counts, where a recording's gives its ms (before: '405.0 ms · 405 samples')."""
    d = bundle["dir"]
    assert _cli("convert", str(bundle["json"]), "f.folded", cwd=d).returncode == 0
    for src, out in ((str(bundle["json"]), "r.svg"), ("f.folded", "f.svg")):
        r = _cli("flame", src, "-o", out, cwd=d)
        assert r.returncode == 0, r.stderr
    assert "keep sample counts, not times" in (d / "f.svg").read_text()
    assert "not times" not in (d / "r.svg").read_text()
