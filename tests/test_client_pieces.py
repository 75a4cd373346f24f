"""The browser client joins a chunk's pieces (one Profiler each) into one trace in the page
(`mergeTraces` of js/jsprof-client.js, run here in Node from a copy named .mjs, as the ES
module it is): real Chromium traces, cut into pieces whose tables are numbered apart as
separate Profilers number them, come back as the same samples with the same stacks, and
the sample a piece repeats at its seam is left out."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from jsprof.engines.node.process import find_node

CLIENT = Path(__file__).parents[1] / "src" / "jsprof" / "js" / "jsprof-client.js"
DATA = Path(__file__).parent / "data" / "chromium"

MERGE = """
import {mergeTraces} from %s;
let text = "";
process.stdin.on("data", (d) => (text += d));
process.stdin.on("end", () => {
  const {pieces, after} = JSON.parse(text);
  process.stdout.write(JSON.stringify(mergeTraces(pieces, after ?? -Infinity)));
});
"""


@pytest.fixture(scope="module")
def client_mjs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client's text as an .mjs file: src/jsprof/js/ is CommonJS to Node (its
    package.json: Node's hooks and preloads live there), the client is the browser's module."""
    out = tmp_path_factory.mktemp("client") / "jsprof-client.mjs"
    out.write_bytes(CLIENT.read_bytes())
    return out


def _merge(client: Path, pieces: list[dict], after: float | None = None) -> dict:
    r = subprocess.run(
        [find_node(), "--input-type=module", "-e", MERGE % json.dumps(client.as_uri())],
        input=json.dumps({"pieces": pieces, "after": after}),
        capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _paths(t: dict) -> list[tuple]:
    """Per sample: its time, marker and stack as (name, url, line, column) leaf to root."""
    out = []
    for s in t["samples"]:
        path = []
        sid = s.get("stackId")
        while sid is not None:
            st = t["stacks"][sid]
            f = t["frames"][st["frameId"]]
            url = t["resources"][f["resourceId"]] if f.get("resourceId") is not None else None
            path.append((f["name"], url, f.get("line"), f.get("column")))
            sid = st.get("parentId")
        out.append((s["timestamp"], s.get("marker"), tuple(path)))
    return out


def _as_piece(t: dict, lo: int, hi: int, rng: random.Random) -> dict:
    """Samples lo..hi of `t` as a Profiler of their own would give them: only the stacks,
    frames and resources they use, numbered in an order of its own (parents first)."""
    samples = t["samples"][lo:hi]
    used: set[int] = set()
    for s in samples:
        sid = s.get("stackId")
        while sid is not None and sid not in used:
            used.add(sid)
            sid = t["stacks"][sid].get("parentId")
    depth = {}

    def d(i: int) -> int:
        if i not in depth:
            p = t["stacks"][i].get("parentId")
            depth[i] = 0 if p is None else d(p) + 1
        return depth[i]

    order = sorted(used, key=lambda i: (d(i), rng.random()))
    snew = {old: k for k, old in enumerate(order)}
    fused = sorted({t["stacks"][i]["frameId"] for i in used}, key=lambda _: rng.random())
    fnew = {old: k for k, old in enumerate(fused)}
    rused = sorted({t["frames"][f]["resourceId"] for f in fused
                    if t["frames"][f].get("resourceId") is not None}, key=lambda _: rng.random())
    rnew = {old: k for k, old in enumerate(rused)}
    frames = []
    for f in fused:
        g = dict(t["frames"][f])
        if g.get("resourceId") is not None:
            g["resourceId"] = rnew[g["resourceId"]]
        frames.append(g)
    stacks = []
    for old in order:
        st = {"frameId": fnew[t["stacks"][old]["frameId"]]}
        if t["stacks"][old].get("parentId") is not None:
            st["parentId"] = snew[t["stacks"][old]["parentId"]]
        stacks.append(st)
    out_samples = []
    for s in samples:
        s2 = dict(s)
        if s.get("stackId") is not None:
            s2["stackId"] = snew[s["stackId"]]
        out_samples.append(s2)
    return {"resources": [t["resources"][r] for r in rused], "frames": frames,
            "stacks": stacks, "samples": out_samples}


@pytest.mark.parametrize("name", ["trace-basic.json", "trace-builtins.json", "trace-idle.json"])
def test_pieces_join_into_the_trace_they_were_cut_from(client_mjs: Path, name: str) -> None:
    t = json.loads((DATA / name).read_text())
    n = len(t["samples"])
    rng = random.Random(name)
    cuts = sorted(rng.sample(range(1, n), 3))
    bounds = list(zip([0, *cuts], [*cuts, n], strict=True))
    # Each piece after the first also has the sample before it: the instant two Profilers
    # overlap at a seam. The join keeps it once.
    pieces = [_as_piece(t, max(0, lo - (i > 0)), hi, rng) for i, (lo, hi) in enumerate(bounds)]
    merged = _merge(client_mjs, pieces)
    assert _paths(merged) == _paths(t)
    # Interned again: one entry per distinct resource, frame and stack.
    assert len(set(merged["resources"])) == len(merged["resources"])
    keys = [json.dumps(f, sort_keys=True) for f in merged["frames"]]
    assert len(set(keys)) == len(keys)
    skeys = [(s["frameId"], s.get("parentId")) for s in merged["stacks"]]
    assert len(set(skeys)) == len(skeys)
    # `after`: the samples a piece sent earlier are left out (the tail sent on the way out).
    at = t["samples"][cuts[1] - 1]["timestamp"]
    tail = _merge(client_mjs, pieces[2:], after=at)
    assert _paths(tail) == [p for p in _paths(t) if p[0] > at]
