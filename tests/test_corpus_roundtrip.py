"""No writer ever writes what jsprof's own reader refuses: real libraries (marked, acorn,
lodash, from tests/js/node_modules) recorded at 0.1 ms on every engine, then the file
`record` wrote, and that file converted to every format jsprof writes, read back.

The workload (tests/js/corpus.mjs) includes the class syntax engines give odd positions
(field initializers, private and static fields, static blocks): QuickJS once wrote them
as `"line": 0`, which `validate`, `report` and `flame` then refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import jsprof
from formats_util import JS
from jsprof.formats import FORMATS, detect
from jsprof.trace import Recording

CORPUS = JS / "corpus.mjs"
JSPROF = [sys.executable, "-m", "jsprof.cli"]

pytestmark = pytest.mark.npm

ENGINES = [
    pytest.param(["--engine", "quickjs"], id="quickjs"),
    pytest.param(["--engine", "quickjs", "--workers", "2"], id="quickjs-workers"),
    pytest.param(["--engine", "node"], id="node"),
    pytest.param(["--engine", "chromium"], id="chromium", marks=pytest.mark.chromium),
]


def jsprof_cli(*args: object, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*JSPROF, *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def frames_are_spec(rec: Recording) -> None:
    """Positions, where a frame has them, are 1-based; without a line, no column."""
    for track in rec.tracks:
        for i, f in enumerate(track.trace.frames):
            assert f.line is None or f.line >= 1, (track.name, i, f)
            assert f.column is None or (f.line is not None and f.column >= 1), (track.name, i, f)


@pytest.mark.parametrize("engine", ENGINES)
def test_real_libraries_record_and_every_format_read_back(
    engine: list[str], tmp_path: Path
) -> None:
    if not (JS / "node_modules" / "marked").is_dir():
        pytest.fail("tests/js/node_modules lacks marked; run `make test` (npm ci there)")
    out = tmp_path / "corpus.jsprof.json"
    p = jsprof_cli("record", *engine, "--interval", "0.1", "-o", out, CORPUS)
    assert p.returncode == 0, p.stderr
    assert "corpus ok true 1" in p.stdout, (p.stdout, p.stderr)
    v = jsprof_cli("validate", out)
    assert v.returncode == 0, v.stderr
    rec = jsprof.load(out)
    frames_are_spec(rec)
    resources = {r for t in rec.tracks for r in t.trace.resources}
    # the libraries themselves are in the profile, not only the script driving them
    for lib in ("marked.esm.js", "acorn.mjs", "lodash.js"):
        assert any(r.endswith(lib) for r in resources), (lib, sorted(resources))
    n = sum(t.trace.num_samples for t in rec.tracks)
    assert n >= 200, n
    for name, fmt in FORMATS.items():
        if fmt.write is None:
            continue
        # a .cpuprofile holds one thread: each track on its own, as `convert --track` does
        parts = [Recording([t]) for t in rec.tracks] if name == "cpuprofile" else [rec]
        for k, part in enumerate(parts):
            dest = tmp_path / f"corpus{k}{fmt.extensions[0]}"
            jsprof.save(part, dest, format=name)
            data = dest.read_bytes()
            if fmt.read is None:  # write-only (Firefox): well-formed JSON, a thread a track
                doc = json.loads(data)
                assert len(doc["threads"]) == len(part.tracks), name
                continue
            # read back as the same format (by content), by the reader `validate` uses
            assert detect(data, str(dest)) is fmt, name
            back = jsprof.load(dest)
            frames_are_spec(back)
            assert sum(t.trace.num_samples for t in back.tracks) > 0, name
