"""jsprof's JSON for a stored upload: what `GET /v1/traces/{id}` answers, what `--forward`
converts, what an upload's own flame page reads (app.py, forward.py, query.py share it
without importing each other)."""

from __future__ import annotations

from typing import Any

import orjson


def trace_document(meta: dict, trace_json: bytes) -> bytes:
    """jsprof's JSON for a stored upload: the trace bytes as stored plus a `jsprof` key.

    The stored JSON is spliced, not re-encoded, so timestamps come back bit for bit.
    """
    # An upload of a recording (`jsprof upload`, a jsprof file) names its track and engine.
    track, engine = meta.get("track"), meta.get("engine")
    ext: dict[str, Any] = {"formatVersion": 1, "track": track if type(track) is str else "main"}
    if type(engine) is str:
        ext["engine"] = engine
    origin = meta.get("timeOrigin")
    ext["timeOrigin"] = origin if type(origin) in (int, float) else None  # unknown
    interval = meta.get("sampleInterval")
    if type(interval) in (int, float):
        ext["sampleInterval"] = interval
    ext["meta"] = meta
    body = trace_json.rstrip()
    if not body.endswith(b"}"):  # pragma: no cover - the store only holds JSON objects
        raise ValueError("stored trace is not a JSON object")
    head = body[:-1].rstrip()
    sep = b"" if head.endswith(b"{") else b","
    return b"".join((head, sep, b'"jsprof":', orjson.dumps(ext), b"}"))
