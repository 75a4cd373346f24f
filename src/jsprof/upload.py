"""`jsprof upload`: recordings made anywhere (any engine, any format jsprof reads) into a
`jsprof serve` collector, where the fleet queries them beside the browsers' uploads.

Each track with samples is one upload, in the envelope the browser client sends:
`{"trace": <its ProfilerTrace>, "meta": {...}}`, gzip'd. The meta carries what the store
keeps of a track (its time origin, interval, engine, track name and free-form meta, the
file's name, and one `pageLoad` id per file, so the tracks of one recording count as one
page load); the app, release, route and env go in the query, as the client sends them.
Samples that carry weights of their own (pprof, folded, speedscope, a CPU-clock track) get
times whose gaps are those weights, since the collector weighs a sample by the time to the
next; a merged profile (per-sample counts) is refused: it is not one recording. A Chromium
recording's long animation frames and interactions go as the envelope's `timeline`.

The ingest key comes from a file and goes in the `X-Jsprof-Key` header: never in a URL, a
command line or a message. Upload ids are derived from the file's bytes, its track and the
labels, so uploading the same file again stores nothing twice (the collector answers a
repeated id with 202). Core only: the standard library's HTTP client, no field extra.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from .errors import JsprofError, UsageError
from .meta import COMMAND_LINES
from .textfiles import read_secret_file
from .trace import Recording, Track
from .words import printable

# Keys the collector sets itself (serve/ingest.py SERVER_KEYS): a track's meta cannot. And
# the profiled program's command lines (meta.COMMAND_LINES: `args`, a command's `command`
# and `argv`): they may hold anything (serve/ingest.py drops them from a posted jsprof file
# alike).
_SERVER_KEYS = frozenset({"app", "release", "route", "env", "receivedAt", "timeline"}
                         | COMMAND_LINES)
TIMEOUT = 120.0
MAX_ERROR_BYTES = 64 << 10
RETRIES = 3  # for 5xx/429 and connection errors; a 4xx is the collector's final word


class Refused(JsprofError):
    """One file that was not uploaded (whole or in part): one line saying why."""


@dataclass
class Upload:
    id: str
    track: str
    samples: int
    body: bytes  # gzip'd JSON envelope


def read_key(path: str | Path) -> str:
    """The ingest key: the first line of `path` (--key-file), whitespace stripped."""
    return read_secret_file(path, "--key-file", "app's ingest key")


def check_url(url: str) -> str:
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise UsageError(f"--url {url!r}: expected the collector's http(s)://HOST:PORT")
    if u.username or u.password or u.query:
        raise UsageError("--url: give the collector's address only (the key goes in --key-file)")
    return url.rstrip("/")


def _json_safe(meta: dict) -> dict:
    try:
        return orjson.loads(orjson.dumps(meta))
    except (TypeError, orjson.JSONEncodeError):
        return {k: v for k, v in meta.items() if type(v) in (str, int, float, bool)}


def track_upload(
    track: Track, source: str, digest: str, labels: dict[str, str | None]
) -> Upload | None:
    """The upload of one track (None when it has no samples); Refused for a merged one."""
    from .formats.jsprof import trace_to_doc

    t = track.trace
    if t.num_samples == 0:
        return None
    where = f"{source}: track {printable(track.name)!r}"
    if t.sample_count is not None:
        raise Refused(
            f"{where} is a merged profile (each sample stands for several); upload the "
            "recordings it was merged from"
        )
    doc = trace_to_doc(t)
    interval = track.sample_interval
    if t.sample_weight is not None:
        # The collector weighs a sample by the gap to the next: times with those gaps (the
        # last sample weighs the interval, as in every upload).
        w = np.asarray(t.sample_weight, dtype=np.float64)
        start = float(t.sample_time[0]) if t.num_samples else 0.0
        times = start + np.concatenate(([0.0], np.cumsum(w[:-1])))
        for s, ts in zip(doc["samples"], times.tolist(), strict=True):
            s["timestamp"] = ts
        if interval is None and len(w):
            interval = float(w[-1]) or None
    meta: dict[str, Any] = {
        k: v for k, v in _json_safe(dict(track.meta or {})).items() if k not in _SERVER_KEYS
    }
    meta.update(
        {
            "track": track.name,
            "source": Path(source).name,
            "pageLoad": digest[:32],
            "uploadedBy": "jsprof upload",
        }
    )
    if track.time_origin is not None:
        meta["timeOrigin"] = track.time_origin
    if interval is not None:
        meta["sampleInterval"] = interval
    if track.engine is not None:
        meta["engine"] = track.engine
    envelope: dict[str, Any] = {"trace": doc, "meta": meta}
    timeline = track_timeline(track)
    if timeline is not None:
        envelope["timeline"] = timeline
    body = orjson.dumps(envelope)
    ident = hashlib.sha256(
        "\0".join(
            [digest, track.name, *(labels.get(k) or "" for k in ("app", "release", "route", "env"))]
        ).encode()
    ).hexdigest()
    return Upload(f"jsprof-{ident[:40]}", track.name, t.num_samples, gzip.compress(body, 6))


def track_timeline(track: Track) -> dict | None:
    """A Chromium recording's long animation frames and interactions (its spans) as the
    client's `timeline`, so `fleet --during` and `vitals` see them: on the samples' clock,
    the longest kept within the client's limits. None when the track has none, or when they
    would not pass the collector's check (the samples still go)."""
    from .timeline import (
        MAX_INTERACTIONS,
        MAX_LONG_FRAMES,
        MAX_SCRIPTS,
        TimelineError,
        check,
        from_spans,
    )

    pl = from_spans(track.spans)
    if not pl.long_frames and not pl.interactions:
        return None

    def longest(e: dict) -> float:
        return -(e.get("duration") or 0.0)

    frames = sorted(pl.long_frames, key=longest)
    inters = sorted(pl.interactions, key=longest)
    doc = {
        "longFrames": [
            {**f, "scripts": sorted(f.get("scripts") or [], key=longest)[:MAX_SCRIPTS]}
            for f in frames[:MAX_LONG_FRAMES]
        ],
        "interactions": inters[:MAX_INTERACTIONS],
        "load": None,
        "dropped": {
            "longFrames": max(0, len(frames) - MAX_LONG_FRAMES),
            "interactions": max(0, len(inters) - MAX_INTERACTIONS),
        },
    }
    try:
        return check(doc, "timeline", keep_query=True)
    except TimelineError:
        return None


def uploads_of(rec: Recording, data: bytes, source: str, labels: dict[str, str | None]
               ) -> list[Upload]:
    digest = hashlib.sha256(data).hexdigest()
    out = [u for tr in rec.tracks if (u := track_upload(tr, source, digest, labels))]
    if not out:
        raise Refused(f"{source}: no track has samples; nothing to upload")
    return out


def _error_text(raw: bytes) -> str:
    try:
        msg = orjson.loads(raw).get("error")
    except (orjson.JSONDecodeError, AttributeError):
        msg = None
    if not isinstance(msg, str):
        msg = raw.decode("utf-8", "replace")[:300]
    return printable(" ".join(msg.split()))[:400]


def post(base: str, key: str, labels: dict[str, str | None], up: Upload, source: str,
         sleep: Callable[[float], None] = time.sleep) -> None:
    """POST one upload; returns once the collector answered 202 (stored, or stored before).
    Refused with the collector's one line for a 4xx; a 5xx, 429 or a connection error is
    tried RETRIES times (backing off) before it is."""
    params = [(k, v) for k, v in labels.items() if v is not None] + [("id", up.id)]
    url = f"{base}/v1/traces?{urllib.parse.urlencode(params)}"
    headers = {
        "Content-Type": "application/json",
        "Content-Encoding": "gzip",
        "X-Jsprof-Key": key,
    }
    where = f"{source}: track {printable(up.track)!r}"
    for attempt in range(RETRIES):
        req = urllib.request.Request(url, data=up.body, method="POST", headers=headers)
        retry_after = None
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                resp.read(MAX_ERROR_BYTES)
                if resp.status == 202:
                    return
                problem = f"the collector answered {resp.status}, not 202"
        except urllib.error.HTTPError as e:
            text = _error_text(e.read(MAX_ERROR_BYTES))
            if e.code < 500 and e.code != 429:
                raise Refused(f"{where}: refused by the collector ({e.code}): {text}") from None
            problem = f"the collector answered {e.code}: {text}"
            retry_after = e.headers.get("Retry-After")
        except (urllib.error.URLError, OSError) as e:
            problem = f"cannot reach {base} ({printable(str(getattr(e, 'reason', e)))})"
        except http.client.HTTPException as e:
            problem = f"{base} is not a jsprof serve ({printable(str(e))[:200]})"
        if attempt + 1 < RETRIES:
            wait = 2.0**attempt
            if retry_after and retry_after.isdigit():
                wait = min(30.0, max(wait, float(retry_after)))
            sleep(wait)
    raise Refused(f"{where}: not uploaded: {problem}")


@dataclass
class Result:
    uploaded: list[tuple[str, list[Upload]]]
    refused: list[str]


def upload_files(
    paths: list[str], url: str, key: str, labels: dict[str, str | None],
    on_done: Callable[[str, list[Upload]], None] | None = None,
    on_refused: Callable[[str], None] | None = None,
) -> Result:
    """Upload every file (each track its own upload); one line per refused file, the others
    go on. `labels`: app (required), release, route, env."""
    from .errors import TraceFormatError
    from .io import read_any, read_input

    base = check_url(url)
    res = Result([], [])
    for path in paths:
        try:
            data, source = read_input(path)
            rec = read_any(data, source)
            ups = uploads_of(rec, data, source, labels)
            for up in ups:
                post(base, key, labels, up, source)
        except (Refused, TraceFormatError, JsprofError) as e:
            line = " ".join(str(e).split())
            res.refused.append(line)
            if on_refused:
                on_refused(line)
            continue
        res.uploaded.append((source, ups))
        if on_done:
            on_done(source, ups)
    return res
