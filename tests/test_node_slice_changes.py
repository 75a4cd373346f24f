"""record --engine node takes each thread's profile in slices (engines/node/isolate.py):
between one slice's end and the next one's start Node's main thread runs jsprof's commands
(the bridge, Profiler.stop serialising the slice, Profiler.start), not the program. That
time is no function's: before the fix it was the self time of whatever function ran just
before each change, since a sample stands for the time to the next one (a tsc run at
0.1 ms and load ~10: 3-5 % of the recording, up to 108 ms at one change, on functions
node --cpu-prof shows under 1 %). Real code: acorn (npm, pinned) parsing marked's source."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import jsprof
from jsprof.engines import _v8join
from jsprof.trace import sample_weights
from jsprof.traceparts import MARKER_CODE

pytestmark = [
    pytest.mark.npm,
    pytest.mark.skipif(shutil.which("node") is None, reason="needs node"),
]

JS = Path(__file__).parent / "js" / "node_modules"

SCRIPT = """
const acorn = require("./acorn.js");
const SOURCE = {source};
const end = Date.now() + 1500;
let n = 0;
while (Date.now() < end || n < 4) {{
  acorn.parse(SOURCE, {{ ecmaVersion: "latest", sourceType: "module", locations: true }});
  n++;
}}
"""


def test_the_time_between_slices_is_charged_to_no_function(tmp_path, monkeypatch):
    assert (JS / "acorn" / "dist" / "acorn.js").exists(), "tests/js missing: `make test`"
    shutil.copy(JS / "acorn" / "dist" / "acorn.js", tmp_path / "acorn.js")
    source = (JS / "marked" / "lib" / "marked.esm.js").read_text()
    script = tmp_path / "parse.js"
    script.write_text(SCRIPT.format(source=json.dumps(source)))

    seen: list = []
    orig = _v8join.thread_track

    def spy(slices, name, engine, requested_ms, time_origin, origin_us, *rest):
        seen.append((list(slices), origin_us))
        return orig(slices, name, engine, requested_ms, time_origin, origin_us, *rest)

    monkeypatch.setattr(_v8join, "thread_track", spy)
    rec = jsprof.record(script, engine="node", sample_interval=0.1)
    (track,) = rec.tracks
    (slices, origin_us), = seen
    # The windows where no slice recorded: from one slice's endTime to the next's start
    # (V8's clock, us), as the track's ms.
    bounds = [(p.get("startTime"), p.get("endTime")) for p in slices]
    windows = [
        ((end - origin_us) / 1000, (start - origin_us) / 1000)
        for (_, end), (start, _) in zip(bounds[:-1], bounds[1:], strict=True)
        if start > end
    ]
    assert len(windows) >= 3, f"too few slice changes to look at: {bounds}"

    trace = track.trace
    t = trace.sample_time
    w = sample_weights(trace, track.sample_interval)
    marker = trace.sample_marker
    # The samples of a function: a stack, not a pseudo frame ((program), GC, idle).
    js = trace.sample_stack >= 0
    if marker is not None:
        js &= marker == MARKER_CODE["script"]
    charged = 0.0
    for a, b in windows:
        overlap = np.clip(np.minimum(t + w, b) - np.maximum(t, a), 0, None)
        charged += float(overlap[js].sum())
    total = sum(b - a for a, b in windows)
    assert charged == 0.0, (
        f"{charged:.1f} ms of the {total:.1f} ms between slices charged to functions "
        f"({len(windows)} slice changes)"
    )
