"""One upload, from request bytes to what the store keeps: checks, decoding, normalising.

No HTTP framework here: `app.py` hands over headers and body bytes, and turns `Refused`
into the 4xx answer. Every check that can refuse an upload cheaply (size, content type,
encoding) runs before any parsing, and parsing is bounded: the body is inflated in a
streaming decompressor that stops at the limit, so a gzip bomb costs at most the limit.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import zlib
from typing import Any

import msgspec
import numpy as np
import orjson

from ..errors import TraceFormatError
from ..meta import COMMAND_LINES
from ..trace import ProfilerTrace
from .config import Limits

_GZIP_MAGIC = b"\x1f\x8b"
_TYPES = ("application/json", "text/plain")
# fullmatch: `$` would let a trailing newline through (and store "x\n" apart from "x").
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_TRACE_KEYS = ("resources", "frames", "stacks", "samples")
_TRACE_KEY_SET = frozenset(_TRACE_KEYS)
# The top level only, values left undecoded: a scan at memory speed.
_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])
# Keys the collector sets; a client's envelope meta cannot override them.
SERVER_KEYS = ("app", "release", "route", "env", "receivedAt")
# The envelope's keys: the trace, the client's meta, and what made users wait (stored in
# meta, under "timeline", once checked; a client's own meta.timeline is not kept).
_ENVELOPE_KEYS = frozenset({"trace", "meta", "timeline"})


class Refused(Exception):
    """An upload that is not stored: the HTTP status and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = " ".join(message.split())  # one line, whatever the reader said


def check_upload_id(value: str | None) -> str | None:
    if value is None:
        return None
    if not _ID.fullmatch(value):
        raise Refused(
            400,
            "query parameter id: expected 1-128 letters, digits, '.', '_', ':' or '-' "
            "(a UUID is fine)",
        )
    return value


def check_content_type(value: str | None) -> None:
    media = (value or "").split(";", 1)[0].strip().lower()
    if media not in _TYPES:
        got = f"{value!r}" if value else "none"
        raise Refused(
            415, f"Content-Type {got} is not accepted; send application/json or text/plain"
        )


def check_encoding(value: str | None) -> str:
    enc = (value or "identity").strip().lower()
    if enc in ("", "none"):
        enc = "identity"
    if enc not in ("identity", "gzip", "x-gzip", "deflate"):
        raise Refused(
            415, f"Content-Encoding {value!r} is not accepted; send gzip, deflate or none"
        )
    return "gzip" if enc == "x-gzip" else enc


def check_length(value: str | None, limits: Limits) -> None:
    if value is None:
        return
    try:
        n = int(value)
    except ValueError:
        raise Refused(400, f"Content-Length {value!r} is not a number") from None
    if n > limits.max_body:
        raise Refused(413, f"body of {n} bytes is over the {limits.max_body} byte limit")


def decode_body(body: bytes, encoding: str, limits: Limits) -> tuple[bytes, bool]:
    """Undo Content-Encoding, never producing more than `max_decompressed` bytes.

    Returns the bytes and whether `body` is exactly one gzip stream of them (then the
    store can keep the client's gzip instead of compressing again).

    A body that starts with gzip's magic bytes but came without Content-Encoding is
    inflated too: `navigator.sendBeacon` cannot set headers, and no JSON starts with 0x1f.
    """
    if encoding == "identity":
        if body[:2] != _GZIP_MAGIC:
            if len(body) > limits.max_decompressed:
                raise Refused(413, "body is over the decompressed size limit")
            return body, False
        encoding = "gzip"
    cap = limits.max_decompressed
    if encoding == "gzip":
        attempts = [31]
    else:  # RFC 9110's deflate is zlib-wrapped; some clients send raw deflate anyway
        attempts = [15, -15]
    for i, wbits in enumerate(attempts):
        d = zlib.decompressobj(wbits)
        try:
            out = d.decompress(body, cap + 1)
        except zlib.error as e:
            if i + 1 < len(attempts):
                continue
            raise Refused(400, f"body is not valid {encoding} data ({e})") from None
        if len(out) > cap or d.unconsumed_tail:
            raise Refused(413, f"body inflates to more than the {cap} byte decompressed size limit")
        if not d.eof:
            raise Refused(400, f"{encoding} body is cut short")
        if d.unused_data.strip(b"\x00"):
            raise Refused(400, f"{encoding} body has data after its end")
        return out, encoding == "gzip" and not d.unused_data
    raise AssertionError("unreachable")  # pragma: no cover


def _type_name(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(v), "null" if v is None else "a number"
    )


def split_envelope(doc: Any) -> tuple[dict, dict, bool]:
    """(trace document, client meta, was an envelope); the envelope's `timeline`, if any,
    is in the meta under "timeline" (unchecked: `with_timeline` checks it)."""
    if type(doc) is not dict:
        raise Refused(400, f"body: expected a JSON object, got {_type_name(doc)}")
    if "trace" in doc and not any(k in doc for k in _TRACE_KEYS):
        extra = sorted(set(doc) - _ENVELOPE_KEYS)
        if extra:
            raise Refused(
                400, f"body.{extra[0]}: unknown envelope key; use trace, meta and timeline"
            )
        trace, meta = doc["trace"], doc.get("meta", {})
        if type(trace) is not dict:
            raise Refused(
                400, f"body.trace: expected a ProfilerTrace object, got {_type_name(trace)}"
            )
        if type(meta) is not dict:
            raise Refused(400, f"body.meta: expected an object, got {_type_name(meta)}")
        meta = {k: v for k, v in meta.items() if k != "timeline"}
        if doc.get("timeline") is not None:
            meta["timeline"] = doc["timeline"]
        return trace, meta, True
    return doc, {}, False


def check_trace(
    trace: dict, where: str, limits: Limits, has_markers: bool = True
) -> dict[str, Any]:
    """jsprof's own ProfilerTrace reader, plus the collector's size limits. A trace may be
    jsprof's own file (the `jsprof` key: one track, times of its own); what of its extras
    the store keeps is returned as meta (`track_meta`); the rest is refused or dropped."""
    from ..formats import jsprof as tracefile

    if not tracefile.is_profiler_trace(trace):
        raise Refused(
            400,
            f"{where}: not a ProfilerTrace (resources, frames, stacks, samples as "
            "profiler.stop() gives it, or a jsprof file); convert other formats with "
            "`jsprof upload`",
        )
    samples = trace.get("samples")
    if type(samples) is list and len(samples) > limits.max_samples:
        raise Refused(
            413, f"{where}.samples: {len(samples)} samples, over the limit of {limits.max_samples}"
        )
    try:
        rec = tracefile.recording_from_doc(trace, where, has_markers)
    except TraceFormatError as e:
        raise Refused(400, str(e)) from None
    check_size(rec.tracks[0].trace, where, limits)
    if tracefile.FORMAT_KEY not in trace:
        return {}
    return track_meta(rec, f"{where}.{tracefile.FORMAT_KEY}")


def track_meta(rec: Any, where: str) -> dict[str, Any]:
    """What the store keeps of a jsprof file's one track beside its ProfilerTrace: its time
    origin, interval, engine and track name, and its free-form meta (under the client's
    meta, which wins). Its per-sample lines and spans are dropped (the fleet keeps neither);
    samples that carry their own weights or counts are refused: the fleet weighs a sample by
    the time to the next one, and a merged profile is not one page load's recording. The
    file's command lines (meta `args`, `command`, `argv`) are not kept."""
    if len(rec.tracks) != 1:
        raise Refused(
            400,
            f"{where}.tracks: a recording of {len(rec.tracks)} tracks; post one track per "
            "upload (`jsprof upload` sends each track as its own)",
        )
    track = rec.tracks[0]
    t = track.trace
    if t.sample_count is not None:
        raise Refused(
            400,
            f"{where}.sampleCounts: a merged profile (each sample stands for several); "
            "upload the recordings it was merged from",
        )
    if t.sample_weight is not None:
        raise Refused(
            400,
            f"{where}.sampleWeights: samples with weights of their own; the collector weighs "
            "a sample by the time to the next (`jsprof upload` turns weights into times)",
        )
    # Not the command lines (`args`, `command`, `argv`): they may hold anything (jsprof
    # upload leaves them out too).
    meta: dict[str, Any] = {
        k: v for k, v in (track.meta or {}).items()
        if k not in SERVER_KEYS and k != "timeline" and k not in COMMAND_LINES
    }
    if track.time_origin is not None:
        meta["timeOrigin"] = track.time_origin
    if track.sample_interval is not None:
        meta["sampleInterval"] = track.sample_interval
    if track.engine is not None:
        meta["engine"] = track.engine
    meta["track"] = track.name
    return meta


def check_size(t: ProfilerTrace, where: str, limits: Limits) -> None:
    if t.num_samples > limits.max_samples:
        raise Refused(
            413, f"{where}.samples: {t.num_samples} samples, over the limit of {limits.max_samples}"
        )
    # A stack n frames deep needs n distinct stacks: only a long table can be too deep.
    if t.num_stacks > limits.max_depth and _deeper_than(t.stack_parent, limits.max_depth):
        depth = int(t.stack_depths().max())
        if depth > limits.max_depth:
            raise Refused(
                413,
                f"{where}.stacks: a stack {depth} frames deep, over the limit of "
                f"{limits.max_depth}",
            )


def _deeper_than(parent: np.ndarray, limit: int) -> bool:
    """Whether any stack is more than `limit` frames deep, in O(log limit) vector steps:
    a stack is that deep when its `limit`-th ancestor exists, found by binary lifting
    (`stack_depths` climbs one level per step: ~0.5 ms per upload of 1,500 stacks)."""
    n = len(parent)
    if n == 0:
        return False
    # jump[i]: the 2^k-th ancestor of i, or n (a sentinel whose ancestor is itself).
    jump = np.where(parent < 0, n, parent).astype(np.intp)
    jump = np.append(jump, n)
    at = np.arange(n + 1, dtype=np.intp)  # each stack's ancestor at the distance so far
    k = limit
    while k:
        if k & 1:
            at = jump[at]
        k >>= 1
        if k:
            jump = jump[jump]
    return bool((at[:n] != n).any())


def strip_url(url: str) -> str:
    cut = len(url)
    for ch in "?#":
        i = url.find(ch)
        if 0 <= i < cut:
            cut = i
    return url[:cut]


def normalise_resources(trace: dict) -> bool:
    """Strip query strings and fragments; merge resources that become equal. True if changed.

    Frames keep their ids (only their resourceId is remapped), so stacks and samples stay
    exactly as uploaded.
    """
    resources = trace["resources"]
    if not any("?" in r or "#" in r for r in resources):
        return False
    new: list[str] = []
    index: dict[str, int] = {}
    remap = []
    for r in resources:
        s = strip_url(r)
        i = index.get(s)
        if i is None:
            i = index[s] = len(new)
            new.append(s)
        remap.append(i)
    trace["resources"] = new
    if len(new) != len(resources) or remap != list(range(len(remap))):
        for f in trace["frames"]:
            rid = f.get("resourceId")
            if rid is not None:
                f["resourceId"] = remap[rid]
    return True


def with_timeline(meta: dict, timeline: Any, keep_query: bool) -> dict:
    """`meta` with the envelope's timeline checked (`fleet.timeline.check`) under
    "timeline"; Refused (400 naming the field) when it is not valid. Its size is bounded by
    the timeline's own limits, not by the meta limit."""
    from ..fleet.timeline import TimelineError, check

    if timeline is None or timeline is False:
        return meta
    try:
        meta["timeline"] = check(timeline, "body.timeline", keep_query)
    except TimelineError as e:
        raise Refused(400, str(e)) from None
    return meta


def build_meta(
    client_meta: dict,
    params: dict[str, str | None],
    user_agent: str | None,
    limits: Limits,
) -> dict:
    meta: dict[str, Any] = {}
    for k, v in client_meta.items():
        if k not in SERVER_KEYS and k != "timeline":
            meta[k] = v
    for key in ("release", "route", "env"):
        v = params.get(key)
        if v is None:
            cv = client_meta.get(key)
            v = cv if type(cv) is str else None
        if v is not None:
            v = strip_url(v) if key == "route" else v
            # Every view lists these: a route is cut, like a URL; a release or env that
            # long is a client's mistake.
            if key == "route":
                v = cut(v, limits.max_url)
            elif len(v) > limits.max_label:
                raise Refused(
                    400, f"{key}: {len(v)} characters, over the limit of {limits.max_label}"
                )
            meta[key] = v
    meta["app"] = params["app"]
    meta["receivedAt"] = time.time() * 1000.0
    if "userAgent" not in meta and user_agent:
        meta["userAgent"] = user_agent
    for key in ("sampleInterval", "timeOrigin"):
        v = meta.get(key)
        if v is not None and (type(v) not in (int, float) or not math.isfinite(v)):
            raise Refused(400, f"body.meta.{key}: expected a finite number, got {_type_name(v)}")
    try:
        size = len(orjson.dumps(meta))
    except (TypeError, orjson.JSONEncodeError):  # pragma: no cover - it came from JSON
        raise Refused(400, "body.meta: not serialisable") from None
    if size > limits.max_meta:
        raise Refused(413, f"body.meta: {size} bytes, over the limit of {limits.max_meta}")
    return meta


def _fast_path(
    data: bytes,
    limits: Limits,
    keep_query: bool,
    where: str = "body",
    keys: Any = None,
) -> bool:
    """True when `data` is a bare ProfilerTrace that is valid by jsprof's reader and needs
    no change, checked with the reader's typed decoding straight from the bytes (about half
    the cost of parsing to dicts and validating those). Anything else (an envelope, a
    query string to strip) takes the general path, which decides the same way; this one
    only saves work. Raises Refused for an invalid trace. `keys`: its top-level keys when
    the caller has them already.
    """
    from ..formats import jsprof as tracefile

    if keys is None:
        try:
            keys = _TOP_LEVEL.decode(data).keys()
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            # Skipping a value nested past the interpreter's limit recurses too (a body
            # 100,000 arrays deep): the general path's parser refuses it with the reader's
            # words.
            return False
    if keys != _TRACE_KEY_SET:
        return False  # an envelope, jsprof's own key, extra keys: the general path decides
    try:
        rec = tracefile.read_bytes(data, where)
    except TraceFormatError as e:
        # Its error comes from the validating path, as the general path's would: no need
        # to parse the body a third time to say the same.
        raise Refused(400, str(e)) from None
    if len(rec.tracks) != 1:
        return False
    t = rec.tracks[0].trace
    check_size(t, where, limits)
    if not keep_query and any("?" in r or "#" in r for r in t.resources):
        return False
    if _too_long(t.resources, limits.max_url) or _too_long(
        [f[0] for f in t.frames], limits.max_name
    ):
        return False  # the general path cuts them
    return True


def _fast_envelope(
    parts: dict[str, msgspec.Raw], limits: Limits, keep_query: bool
) -> tuple[bytes, dict, Any] | None:
    """(the trace's bytes as uploaded, the client's meta, its timeline) when `parts` is the
    envelope the browser client sends, `{"trace": ..., "meta": ..., "timeline": ...}`, with
    a trace the fast path takes; else None (the general path decides, and words any
    error)."""
    if "trace" not in parts or not parts.keys() <= _ENVELOPE_KEYS:
        return None
    trace = bytes(parts["trace"])
    if trace[:1] != b"{":
        return None
    meta: Any = {}
    if "meta" in parts:
        try:
            meta = orjson.loads(bytes(parts["meta"]))
        except orjson.JSONDecodeError:
            return None
        if type(meta) is not dict:
            return None
    timeline = None
    if "timeline" in parts:
        try:
            timeline = orjson.loads(bytes(parts["timeline"]))
        except orjson.JSONDecodeError:
            return None
    if not _fast_path(trace, limits, keep_query, "body.trace"):
        return None
    return trace, meta, timeline


def _too_long(texts: Any, cap: int) -> bool:
    return max(map(len, texts), default=0) > cap  # the loop in C


def cut(text: str, cap: int) -> str:
    """`text` whole when it fits `cap` characters, else its start, `…` and its end (the end
    of a URL or a name is often what tells it apart)."""
    if len(text) <= cap:
        return text
    head = (cap - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (cap - 1 - head) :]


def cap_names(trace: dict, limits: Limits) -> bool:
    """Cut function names and resource URLs to the limits (one upload with a 32 MiB name
    made every view of its app 33-68 MB). True if anything was cut."""
    changed = False
    resources = trace["resources"]
    for i, r in enumerate(resources):
        if len(r) > limits.max_url:
            resources[i] = cut(r, limits.max_url)
            changed = True
    for f in trace["frames"]:
        name = f["name"]
        if len(name) > limits.max_name:
            f["name"] = cut(name, limits.max_name)
            changed = True
    return changed


def prepare(
    raw: bytes,
    encoding: str,
    params: dict[str, str | None],
    user_agent: str | None,
    limits: Limits,
    keep_query: bool,
) -> tuple[dict, bytes, bytes | None]:
    """(meta, normalised ProfilerTrace JSON, the body when it is that JSON gzipped) or Refused."""
    data, is_gzip = decode_body(raw, encoding, limits)
    return prepare_decoded(data, is_gzip, raw, params, user_agent, limits, keep_query)


# Bodies up to this size (inflated) are checked on the event loop itself: a field upload
# (~300 KiB of JSON, ~5 ms) costs a third less CPU without the hand-off to the parse thread
# and back, and the loop is held at most ~10-20 ms. Anything bigger, or that does not say
# its size, goes to the parse thread.
INLINE_MAX = 1 << 20


def says_small(raw: bytes, encoding: str) -> bool:
    """Whether a body says it inflates to at most INLINE_MAX bytes: its length, or a gzip
    stream's ISIZE trailer (a lie costs at most INLINE_MAX inflated bytes: see
    `prepare_small`)."""
    if raw[:2] == _GZIP_MAGIC and encoding in ("identity", "gzip"):
        return len(raw) >= 18 and int.from_bytes(raw[-4:], "little") <= INLINE_MAX
    return encoding == "identity" and len(raw) <= INLINE_MAX


def prepare_small(
    raw: bytes,
    encoding: str,
    params: dict[str, str | None],
    user_agent: str | None,
    limits: Limits,
    keep_query: bool,
) -> tuple[dict, bytes, bytes | None] | None:
    """`prepare` for a body that `says_small`, inflating no more than INLINE_MAX bytes;
    None when it is bigger than it said (then `prepare` decides, with the real limits)."""
    small = dataclasses.replace(limits, max_decompressed=min(limits.max_decompressed, INLINE_MAX))
    try:
        data, is_gzip = decode_body(raw, encoding, small)
    except Refused as e:
        if e.status == 413 and limits.max_decompressed > INLINE_MAX:
            return None
        raise
    return prepare_decoded(data, is_gzip, raw, params, user_agent, limits, keep_query)


def prepare_decoded(
    data: bytes,
    is_gzip: bool,
    raw: bytes,
    params: dict[str, str | None],
    user_agent: str | None,
    limits: Limits,
    keep_query: bool,
) -> tuple[dict, bytes, bytes | None]:
    """`prepare` once the body is inflated (`data`; `raw` as it came, kept when it is the
    gzip of `data`)."""
    if not data.strip():
        raise Refused(400, "body is empty; expected a ProfilerTrace")
    try:
        parts = _TOP_LEVEL.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        # Not a JSON object, or nested past the interpreter's limit (skipping a value
        # 100,000 arrays deep recurses too): the general path's parser words the refusal.
        parts = None
    if parts is not None:
        if _fast_path(data, limits, keep_query, keys=parts.keys()):
            meta = build_meta({}, params, user_agent, limits)
            # Valid and nothing to change: keep the bytes as uploaded (the client's gzip too).
            return meta, data, raw if is_gzip else None
        # The browser client's envelope: its trace's bytes are kept as uploaded, not parsed
        # to dicts and dumped again (2.4x the CPU of a bare trace before).
        envelope = _fast_envelope(parts, limits, keep_query)
        del parts
        if envelope is not None:
            trace, client_meta, timeline = envelope
            meta = build_meta(client_meta, params, user_agent, limits)
            return with_timeline(meta, timeline, keep_query), trace, None
    meta, trace_json = prepare_general(data, params, user_agent, limits, keep_query)
    return meta, trace_json, raw if is_gzip and trace_json is data else None


def prepare_general(
    data: bytes,
    params: dict[str, str | None],
    user_agent: str | None,
    limits: Limits,
    keep_query: bool,
) -> tuple[dict, bytes]:
    """Any body, through dicts: envelopes, normalising, and the wording of every error."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        text = str(e).lower()
        if "recursion" in text or "depth limit" in text:  # as `jsprof validate` says it
            raise Refused(
                400, "body: JSON nesting deeper than 1024 levels; no trace format nests that deep"
            ) from None
        raise Refused(400, f"body: not valid JSON ({e})") from None
    trace, client_meta, envelope = split_envelope(doc)
    where = "body.trace" if envelope else "body"
    # No "marker" anywhere in the bytes: no sample can have one, and the reader can skip
    # its per-sample marker pass (a tenth of the validation of a 6,000-sample trace).
    extras = check_trace(trace, where, limits, has_markers=b'"marker"' in data)
    timeline = client_meta.get("timeline") if envelope else None
    if extras:
        client_meta = {**extras, **client_meta}
    meta = build_meta(client_meta, params, user_agent, limits)
    meta = with_timeline(meta, timeline, keep_query)
    changed = False if keep_query else normalise_resources(trace)
    changed = cap_names(trace, limits) or changed
    if envelope or changed or set(trace) != set(_TRACE_KEYS):
        return meta, orjson.dumps({k: trace[k] for k in _TRACE_KEYS})
    return meta, data  # nothing to change: the bytes as uploaded
