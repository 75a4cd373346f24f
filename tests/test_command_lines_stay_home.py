"""The profiled program's command lines stay in the local recording: a script's `args`, and
`record --engine node -- COMMAND`'s `command` and each process's `argv` (which may hold a
token: `-- node deploy.js --api-key=...`). `jsprof upload` leaves them out of what it
sends, and the collector drops them from a posted jsprof file; `args` was, `command` and
`argv` were sent and stored."""

from __future__ import annotations

import gzip

import numpy as np
import orjson

from jsprof.serve.ingest import track_meta
from jsprof.trace import ProfilerFrame, ProfilerTrace, Recording, Track
from jsprof.upload import track_upload

SECRET = "--api-key=sk_live_0123456789abcdef"


def _track() -> Track:
    tr = ProfilerTrace(
        resources=["file:///app/deploy.js"],
        frames=[ProfilerFrame("deploy", 0, 3, 1)],
        stack_parent=[-1],
        stack_frame=[0],
        sample_time=np.array([0.0, 1.0, 2.0]),
        sample_stack=np.array([0, 0, 0]),
    )
    meta = {"command": ["node", "deploy.js", SECRET], "argv": ["/usr/bin/node",
            "/app/deploy.js", SECRET], "args": [SECRET], "pid": 7, "processExit": "ok"}
    return Track("pid 7 deploy.js", tr, sample_interval=1.0, meta=meta)


def test_upload_sends_no_command_line() -> None:
    up = track_upload(_track(), "deploy.jsprof.json", "0" * 64, {"app": "shop"})
    assert up is not None
    body = gzip.decompress(up.body)
    assert SECRET.encode() not in body
    meta = orjson.loads(body)["meta"]
    assert meta["processExit"] == "ok" and meta["pid"] == 7  # the rest is sent
    assert not {"command", "argv", "args"} & set(meta)


def test_the_collector_keeps_no_command_line() -> None:
    meta = track_meta(Recording([_track()]), "body.jsprof")
    assert SECRET not in orjson.dumps(meta).decode()
    assert meta["processExit"] == "ok" and meta["track"] == "pid 7 deploy.js"
