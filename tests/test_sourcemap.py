"""Source maps: a bundle minified by a real minifier (npm terser), profiled for real."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import jsprof
from jsprof import sourcemap_files
from jsprof.analysis import sourcemap
from jsprof.analysis.profile import hot_lines, summarize
from jsprof.record import record

TERSER = Path(__file__).parent / "js" / "node_modules" / ".bin" / "terser"

ORIG = """\
function computeChecksum(data) {
  let h = 0;
  for (let i = 0; i < data.length; i++) h = (h * 31 + data[i]) | 0;
  return h;
}

function buildTable(size) {
  const rows = [];
  for (let i = 0; i < size; i++) rows.push(i * 7 % 13);
  return rows;
}

function runWorkload() {
  let total = 0;
  const end = Date.now() + 250;
  while (Date.now() < end) total += computeChecksum(buildTable(2000));
  return total;
}

console.log(runWorkload() !== 0);
"""

DEFS = {"computeChecksum": 1, "buildTable": 7, "runWorkload": 13}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sm")
    (d / "orig.js").write_text(ORIG)
    assert TERSER.exists(), f"{TERSER} missing: `make test` installs tests/js (npm ci)"
    subprocess.run(
        [
            str(TERSER),
            "orig.js",
            "--compress",
            "--mangle",
            "toplevel",
            "--source-map",
            "url='bundle.min.js.map'",
            "-o",
            "bundle.min.js",
        ],
        cwd=d,
        check=True,
    )
    text = (d / "bundle.min.js").read_text()
    assert "computeChecksum" not in text  # really minified
    return d / "bundle.min.js"


def _names(rec):
    s = summarize(rec)
    return {k.name: (k.resource, k.line) for k in s.stats.keys}


@pytest.mark.npm
def test_quickjs_profile_maps_back_beside_the_script(bundle):
    rec = record(bundle, sample_interval=1.0)
    minified = _names(rec)
    assert not set(DEFS) & set(minified)
    mapped = _names(sourcemap_files.apply(rec))  # the sourceMappingURL comment beside the script
    orig = (bundle.parent / "orig.js").as_uri()
    for name, line in DEFS.items():
        assert mapped[name] == (orig, line)
    assert mapped[""][0] == orig  # top-level code keeps its empty name, mapped position


@pytest.mark.npm
def test_node_profile_with_map_file_on_the_command_line(bundle, tmp_path):
    out = tmp_path / "n.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "jsprof.cli",
            "record",
            "--engine",
            "node",
            "-o",
            str(out),
            str(bundle),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "jsprof.cli",
            "report",
            str(out),
            "--json",
            "--all",
            "--sourcemap",
            str(bundle) + ".map",
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    mapped = {r["name"]: r for r in rows if (r.get("resource") or "").endswith("orig.js")}
    assert "runWorkload" in mapped and mapped["runWorkload"]["line"] == DEFS["runWorkload"]
    # Frames without a mapping stay as they are.
    assert all(
        not (r.get("resource") or "").endswith("bundle.min.js") or r["name"] == ""
        for r in rows
        if r.get("resource")
    )


def test_bad_map_is_one_line(tmp_path):
    m = tmp_path / "x.map"
    m.write_text('{"version": 3, "sources": ["a.js"], "mappings": "A!!"}')
    with pytest.raises(sourcemap.SourceMapError, match=r"x.map: mappings line 1: invalid base64"):
        sourcemap_files.load_map(m)
    m.write_text('{"version": 2}')
    with pytest.raises(sourcemap.SourceMapError, match="not a version 3 source map"):
        sourcemap_files.load_map(m)
    trace = tmp_path / "t.json"
    jsprof.save(record_stub(), trace)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "jsprof.cli",
            "report",
            str(trace),
            "--sourcemap",
            str(tmp_path / "nope"),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "no such file or directory" in p.stderr
    assert "Traceback" not in p.stderr


def record_stub():
    b = jsprof.TraceBuilder()
    b.add_sample(0.0, b.stack_id([b.frame_id("f", b.resource_id("file:///x.js"), 1, 1)]))
    return b.build()


# ---- issue 20: `--by line` through a map: a line only where the map places it precisely ----

LIB = """\
function computeChecksum(data) {
  let h = 0;
  for (let i = 0; i < data.length; i++) h = (h * 31 + data[i]) | 0;
  return h;
}

function buildTable(size) {
  const rows = [];
  for (let i = 0; i < size; i++) rows.push(i * 7 % 13);
  return rows;
}
"""

APP = """\
// the workload, in a second source of the bundle
function runWorkload() {
  let total = 0;
  const end = Date.now() + 300;
  while (Date.now() < end) total += computeChecksum(buildTable(2000));
  return total;
}

console.log(runWorkload() !== 0);
"""

# each function's own file and lines (first, last)
RANGES = {
    "computeChecksum": ("lib.js", 1, 5),
    "buildTable": ("lib.js", 7, 11),
    "runWorkload": ("app.js", 2, 7),
}


def _terser(d: Path, out: str, *fmt: str) -> Path:
    subprocess.run(
        [str(TERSER), "lib.js", "app.js", "--compress", "--mangle", "toplevel", *fmt,
         "--source-map", f"url='{out}.map'", "-o", out],
        cwd=d, check=True,
    )
    return d / out


@pytest.mark.npm
@pytest.mark.parametrize("engine", ["quickjs", "node"])
def test_hot_lines_through_a_map_stay_in_their_function(tmp_path, engine):
    """A minified bundle of two sources is one line of three functions: a sample's line
    (no column) cannot say where on it the function was, so the rows say the line is
    unknown, where the first mapping on the line put all three at lib.js:1 (outside two of
    them, one in the wrong file). One statement per line (--format beautify) maps each
    hot line into its own function."""
    (tmp_path / "lib.js").write_text(LIB)
    (tmp_path / "app.js").write_text(APP)
    minified = _terser(tmp_path, "bundle.min.js")
    assert len(minified.read_text().splitlines()) == 2  # the code and the map comment
    pretty = _terser(tmp_path, "bundle.pretty.js", "--format", "beautify=true")
    for script in (minified, pretty):
        out = tmp_path / f"{script.name}.{engine}.json"
        p = subprocess.run(
            [sys.executable, "-m", "jsprof.cli", "record", "--engine", engine, "-o", str(out),
             str(script)],
            capture_output=True, text=True, timeout=120,
        )
        assert p.returncode == 0, p.stderr
        p = subprocess.run(
            [sys.executable, "-m", "jsprof.cli", "report", str(out), "--by", "line",
             "--sourcemap", "--json", "--all"],
            capture_output=True, text=True,
        )
        assert p.returncode == 0, p.stderr
        rows = [r for r in json.loads(p.stdout)["rows"] if r["name"] in RANGES]
        assert {r["name"] for r in rows} >= {"computeChecksum", "buildTable"}, rows
        known = {}
        for r in rows:
            file, first, last = RANGES[r["name"]]
            assert r["resource"] == (tmp_path / file).as_uri(), r  # the function's own file
            if r["line"] is not None:
                assert first <= r["line"] <= last, r  # and its own lines
                known.setdefault(r["name"], r["line"])  # rows come hottest first
        if script is minified:
            assert known == {}, rows
            assert all(r["location"].endswith("(line unknown)") for r in rows)
        else:
            # each loop is the hottest line of its function
            assert known["computeChecksum"] == 3 and known["buildTable"] == 9, rows


def _vlq(values):
    chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    out = ""
    for v in values:
        v = (-v << 1) | 1 if v < 0 else v << 1
        while True:
            digit, v = v & 31, v >> 5
            out += chars[digit | (32 if v else 0)]
            if not v:
                break
    return out


def _mappings(lines):
    """[[(gen col, src line, src col[, name]), ...] per generated line] (0-based) -> v3."""
    prev = [0, 0, 0, 0]
    out = []
    for segs in lines:
        col = 0
        parts = []
        for seg in segs:
            vals = [seg[0] - col, 0, seg[1] - prev[1], seg[2] - prev[2]]
            col, prev[1], prev[2] = seg[0], seg[1], seg[2]
            if len(seg) > 3:
                vals.append(seg[3] - prev[3])
                prev[3] = seg[3]
            parts.append(_vlq(vals))
        out.append(",".join(parts))
    return ";".join(out)


INLINED_SRC = """\
function f(a) {
  let s = 0;
  s = g(a);
  return s;
}

function g(x) {
  let t = x * 2;
  return t + 1;
}
"""


@pytest.mark.parametrize("content", [True, False])
def test_a_line_below_the_function_is_not_its_line(tmp_path, content):
    """A minifier that inlined `g` into `f` maps a whole line of `f` to `g`'s line 9:
    every mapping on it agrees, it is in `f`'s file and below `f`'s start, yet outside
    `f` (lines 1-5), so it is not `f`'s line. Where `f` ends comes from the source (the
    map's sourcesContent, else the file)."""
    (tmp_path / "src.js").write_text(INLINED_SRC)
    doc = {
        "version": 3, "sources": ["src.js"], "names": ["f"],
        "mappings": _mappings([
            [(0, 0, 0), (9, 0, 9, 0)],  # function f(a) {
            [(2, 1, 2)],  #   let s = 0;
            [(2, 8, 2)],  #   s = a * 2 + 1;   <- g's `return t + 1`, inlined
            [(2, 3, 2)],  #   return s;
        ]),
    }
    if content:
        doc["sourcesContent"] = [INLINED_SRC]
        (tmp_path / "src.js").unlink()
    (tmp_path / "gen.js.map").write_text(json.dumps(doc))
    b = jsprof.TraceBuilder()
    fid = b.frame_id("f", b.resource_id((tmp_path / "gen.js").as_uri()), 1, 11)  # V8: at `(`
    for t, line in enumerate([2, 3, 3, 4]):
        b.add_sample(float(t), b.stack_id([fid]), line=line)
    rec = sourcemap_files.apply(jsprof.Recording.of(b.build(), sample_interval=1.0),
                          str(tmp_path / "gen.js.map"))
    lines = {k.line: int(n) for k, n in zip(hot_lines(rec).stats.keys,
                                           hot_lines(rec).stats.self_samples, strict=True)}
    assert lines == {2: 1, 0: 2, 4: 1}  # line 3's two samples: unknown, not line 9


def test_analysis_reads_no_files() -> None:
    """analysis/ works on data it is given: no open(), no file reads, stats or listings.
    The file side of source maps is `jsprof.sourcemap_files`."""
    import ast

    root = Path(jsprof.__file__).parent / "analysis"
    io_attrs = {"read_text", "read_bytes", "write_text", "write_bytes", "open", "stat",
                "is_file", "is_dir", "exists", "isfile", "isdir", "iterdir", "glob", "rglob",
                "listdir", "scandir"}
    found = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call):
                fn = node.func
                if isinstance(fn, ast.Name) and fn.id == "open":
                    found.append(f"{where} open()")
                elif isinstance(fn, ast.Attribute) and fn.attr in io_attrs:
                    found.append(f"{where} .{fn.attr}()")
    assert found == []


def test_a_frame_at_the_function_keyword_keeps_its_lines(tmp_path):
    """QuickJS places a function at its `function` keyword (1:1), and a map may too: the
    function's extent is the declaration's, not the keyword token's (tree-sitter calls
    that token `function` as well), else every line below the first read as unknown."""
    (tmp_path / "src.js").write_text(INLINED_SRC)
    doc = {
        "version": 3, "sources": ["src.js"], "names": [],
        "mappings": _mappings([
            [(0, 0, 0)],  # function f(a) {  (one segment, at the keyword: no name)
            [(2, 1, 2)],  #   let s = 0;
            [(2, 2, 2)],  #   s = g(a);
            [(2, 3, 2)],  #   return s;
        ]),
    }
    (tmp_path / "gen.js.map").write_text(json.dumps(doc))
    b = jsprof.TraceBuilder()
    fid = b.frame_id("f", b.resource_id((tmp_path / "gen.js").as_uri()), 1, 1)  # at `function`
    for t, line in enumerate([2, 3, 3, 4]):
        b.add_sample(float(t), b.stack_id([fid]), line=line)
    rec = sourcemap_files.apply(jsprof.Recording.of(b.build(), sample_interval=1.0),
                                str(tmp_path / "gen.js.map"))
    stats = hot_lines(rec).stats
    lines = {k.line: int(n) for k, n in zip(stats.keys, stats.self_samples, strict=True)}
    assert lines == {2: 1, 3: 2, 4: 1}


@pytest.mark.npm
def test_the_decoder_gives_the_reference_lines_on_real_maps_and_the_same_errors(tmp_path):
    # The mappings are decoded by whole-string numpy operations (a per-character Python
    # loop was ~30 % of a source-mapped report of prettier): line for line what the
    # Python reference gives on esbuild's and terser's maps of a real library, and the
    # same one-line error (or the same lines) on random and broken mappings.
    import random

    bins = Path(__file__).parent / "js" / "node_modules" / ".bin"
    acorn = Path(__file__).parent / "js" / "node_modules" / "acorn" / "dist" / "acorn.mjs"
    subprocess.run([str(bins / "esbuild"), str(acorn), "--bundle", "--minify", "--format=esm",
                    "--sourcemap", f"--outfile={tmp_path / 'e.js'}"], check=True,
                   capture_output=True)
    subprocess.run([str(TERSER), str(acorn), "-c", "-m", "--source-map", "url='t.js.map'",
                    "-o", str(tmp_path / "t.js")], check=True, capture_output=True)
    subprocess.run([str(bins / "esbuild"), str(acorn), "--bundle", "--format=esm",
                    "--sourcemap", f"--outfile={tmp_path / 'p.js'}"], check=True,
                   capture_output=True)
    for name in ("e.js.map", "t.js.map", "p.js.map"):
        mappings = json.loads((tmp_path / name).read_text())["mappings"]
        got = sourcemap._decode(mappings, name)
        want = sourcemap._decode_python(mappings, name)
        assert len(got[0]) == len(want[0]) and sum(map(len, want[1])) > 1000, name
        for gl in range(len(want[0])):
            assert (got[0][gl], got[1][gl]) == (want[0][gl], want[1][gl]), (name, gl)

    def decoded(f, text):
        try:
            cols, segs = f(text, "m.map")
            return [list(c) for c in cols], [list(s) for s in segs]
        except sourcemap.SourceMapError as e:
            return str(e)

    rng = random.Random(5)
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    odd = b64 + ",;!é "
    for _ in range(3000):
        text = "".join(rng.choice(odd if rng.random() < 0.05 else b64 + ",,;")
                       for _ in range(rng.randint(0, 60)))
        assert decoded(sourcemap._decode, text) == decoded(sourcemap._decode_python, text), text
    # Values past 32 bits (ECMA-426's range) are a corrupt map's: one clear error from
    # both decoders. Before, the numpy one summed twenty 59-bit columns in int64 and
    # returned negative (wrapped) columns where the reference's were huge.
    def vlq(v: int) -> str:
        v = (-v << 1) | 1 if v < 0 else v << 1
        out = ""
        while True:
            d, v = v & 31, v >> 5
            out += b64[d | (32 if v else 0)]
            if not v:
                return out

    huge = ",".join("AAA" + vlq((1 << 59) - 1) for _ in range(20))
    for text in (huge, "A" + vlq(1 << 32) + "AA", vlq(-(1 << 33)) + "AAA"):
        got = decoded(sourcemap._decode, text)
        assert got == decoded(sourcemap._decode_python, text)
        assert isinstance(got, str) and "out of range" in got, got
    # the largest 32-bit values still decode, the same both ways
    edge = f"{vlq((1 << 31) - 1)}AAA,{vlq(-(1 << 31) + 1)}AAA;AA{vlq(1 << 30)}A"
    assert decoded(sourcemap._decode, edge) == decoded(sourcemap._decode_python, edge)
    assert not isinstance(decoded(sourcemap._decode, edge), str)
