"""The fleet queries over HTTP: `GET /v1/query/top|flame|flame_time|diff|export|series|
options|regressions|vitals` and `GET /v1/traces`.

Query parameters are the CLI's options (`app`, `release`, `route`, `env`, `since`, `until`,
repeatable `where=KEY=VALUE`; `top`, `max_nodes`, `base`, `new`, repeatable `fail_if`, ...),
`format` picks JSON or HTML. Every route needs the read token (`require_read`); uploading
source maps (`POST /v1/sourcemaps`) is a write and needs the admin token. Queries run in a
worker thread of their own (never the pool ingest's appends use) and never compact: they
read the committed tables plus the uploads the background compactor has not reached yet.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ..render.base import MEDIA_TYPES, JsonRenderer
from ..render.html import HtmlTablePage

MAX_BODY = 64 << 20  # a source map
# Work a reader may ask of the server in one request.
CAPS = {"resamples": 5000, "max_nodes": 200_000, "limit": 1000}

# Pages we make from query results: our own markup only, no script, no outside fetches.
PAGE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'self'"
)


def _auth(request: Request) -> None:
    from .auth import require_read

    require_read(request)


def _store(request: Request) -> Any:
    return request.app.state.store


def _json(doc: Any, status: int = 200) -> Response:
    out = JsonRenderer(indent=False)
    return Response(
        out.render(doc),
        status_code=status,
        media_type=out.media_type,
        headers={"Cache-Control": "no-store"},
    )


def _error(status: int, msg: str) -> Response:
    return JSONResponse({"error": msg}, status_code=status, headers={"Cache-Control": "no-store"})


def _int(q: Any, name: str, default: int | None, allow_all: bool = False) -> int | None:
    from ..errors import UsageError

    v = q.get(name)
    if v is None or v == "":
        return default
    if allow_all and v == "all":
        return None
    try:
        n = int(v)
    except ValueError:
        raise UsageError(
            f"query parameter {name}: expected a whole number, got {v[:40]!r}"
        ) from None
    if n < (0 if name == "resamples" else 1):
        raise UsageError(f"query parameter {name}: must be at least 1, got {n}")
    cap = CAPS.get(name)
    if cap is not None and n > cap:
        raise UsageError(f"query parameter {name}: at most {cap:,}, got {n:,}")
    return n


FILTER_PARAMS = frozenset({"app", "release", "route", "env", "since", "until", "where",
                           "during", "slower_than", "target", "exclude_idle", "url_rule"})
# what selects samples
_SAMPLE_PARAMS = frozenset({"during", "slower_than", "target", "exclude_idle"})
# What each route reads: any other parameter is a mistake (`relase=` would otherwise be a
# filter silently not applied), answered 400 naming it.
ROUTE_PARAMS = {
    "top": FILTER_PARAMS | {"top", "format"},
    # time_view=fetch: the dashboard's page, whose Time view is read when its tab opens
    # (flame_time); without it the page holds its Time view, as a saved file must
    "flame": FILTER_PARAMS | {"format", "max_nodes", "time_view"},
    # pin: the page's upload set (`api.data_pin`), so the view answers for its graph's
    "flame_time": FILTER_PARAMS | {"pin", "drawn"},
    # (exclude_idle: top, flame, export and series, the dashboard's chart, which must
    # give the top table's share; the intervals of diff and regressions are resampled
    # over every sample)
    "diff": (FILTER_PARAMS - {"exclude_idle"})
    | {
        "base",
        "new",
        "top",
        "fail_if",
        "min_traces",
        "min_samples",
        "resamples",
        "format",
        "exact_resources",
    },
    "export": FILTER_PARAMS | {"format"},
    "vitals": (FILTER_PARAMS - _SAMPLE_PARAMS) | {"format"},
    "interactions": (FILTER_PARAMS - _SAMPLE_PARAMS) | {"format", "top", "functions"},
    "traces": (FILTER_PARAMS - _SAMPLE_PARAMS)
    | {"limit", "cursor", "function", "resource"},
    "series": FILTER_PARAMS | {"function", "by", "resource", "line", "column"},
    "regressions": (FILTER_PARAMS - {"exclude_idle"})
    | {"by", "min_change", "min_share", "min_traces", "min_samples", "format"},
    "options": frozenset({"app"}),
    "trace_flame": frozenset(),
}
# The path each route's refusals name (the rest are /v1/query/<route>).
_ROUTE_PATHS = {"traces": "/v1/traces", "trace_flame": "/v1/traces/{id}/flame"}


def check_params(request: Request, route: str) -> None:
    """400 for a query parameter `route` does not read, naming the closest it does."""
    import difflib

    from ..errors import UsageError
    from ..words import printable

    allowed = ROUTE_PARAMS[route]
    for name in request.query_params:
        if name not in allowed:
            close = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise UsageError(
                f"query parameter {printable(name[:40])!r}: not one "
                f"{_ROUTE_PATHS.get(route, '/v1/query/' + route)} reads "
                f"({', '.join(sorted(allowed)) or 'none'}){hint}"
            )


def filters_from_query(request: Request) -> Any:
    from ..errors import UsageError
    from ..fleet.filters import Filters, parse_time, parse_where

    q = request.query_params
    app = q.get("app")
    if not app:
        raise UsageError("query parameter app: missing; e.g. ?app=shop")

    def when(name: str) -> float | None:
        text = q.get(name)
        if not text:
            return None
        return parse_time(text, f"query parameter {name}")

    return Filters(
        app=app,
        release=q.get("release") or None,
        route=q.get("route") or None,
        env=q.get("env") or None,
        since=when("since"),
        until=when("until"),
        where=parse_where(q.getlist("where")),
        during=_during(q.get("during")),
        slower_than=_slower_than(q.get("slower_than"), q.get("during")),
        target=_target(q.get("target"), q.get("during")),
        exclude_idle=_flag(q.get("exclude_idle"), "exclude_idle"),
        url_rules=_url_rules(q.getlist("url_rule")),
    )


def _url_rules(items: list[str]) -> tuple[str, ...]:
    from ..fleet.releases import ScriptIdentity

    ScriptIdentity(items, "query parameter url_rule")
    return tuple(items)


def _flag(v: str | None, name: str) -> bool:
    from ..errors import UsageError

    if v in (None, "", "0", "false"):
        return False
    if v in ("1", "true"):
        return True
    raise UsageError(f"query parameter {name}: {v[:40]!r}; use 1 or 0")


def _during(v: str | None) -> str | None:
    from ..errors import UsageError
    from ..fleet.timeline import DURING

    if not v:
        return None
    if v not in DURING:
        raise UsageError(f"query parameter during: {v[:40]!r}; use one of {', '.join(DURING)}")
    return v


def _target(v: str | None, during: str | None) -> str | None:
    from ..errors import UsageError

    if v is None:
        return None
    if during != "interaction":
        raise UsageError("query parameter target: picks interactions; needs during=interaction")
    return v


def _slower_than(v: str | None, during: str | None) -> float | None:
    from ..errors import UsageError

    if not v:
        return None
    if not during:
        raise UsageError("query parameter slower_than: needs during=interaction|long-frame|load")
    try:
        ms = float(v)
    except ValueError:
        ms = float("nan")
    if not 0 <= ms < float("inf"):
        raise UsageError(f"query parameter slower_than: expected ms, 0 or more, got {v[:40]!r}")
    return ms


async def _run(request: Request, work: Callable[[], Response]) -> Response:
    from ..errors import JsprofError, UsageError

    _auth(request)

    def guarded() -> Response:
        try:
            return work()
        except UsageError as e:
            return _error(400, str(e))
        except JsprofError as e:
            return _error(422, str(e))

    return await in_query_thread(request, guarded)


async def in_query_thread(request: Request, fn: Callable[[], Response]) -> Response:
    """`fn()` in a thread of the queries' own limiter (`app.QUERY_THREADS`), never one of
    the pool ingest's appends wait for."""
    import anyio

    limiter = getattr(request.app.state, "query_limiter", None)
    return await anyio.to_thread.run_sync(fn, limiter=limiter)


def _session(request: Request) -> Any:
    from ..fleet import api

    # No compaction here: the collector compacts in the background (store/background.py);
    # a query reads the committed tables plus the uploads stored since (the tail), kept
    # in this worker between its queries (`tables.kept_tail`: each reads what is new)
    # reading at most --query-new-uploads of those a query (the rest: pendingUploads)
    return api.session(_store(request), keep_tail=True,
                       tail_new=getattr(getattr(request.app.state, "config", None),
                                        "query_new_uploads", None))


def _page(page: HtmlTablePage, rows: list[dict]) -> Response:
    return Response(
        page.render(rows),
        media_type=page.media_type,
        headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"},
    )


def _html_wanted(request: Request) -> bool:
    from ..errors import UsageError

    fmt = request.query_params.get("format")
    if fmt:
        if fmt not in ("json", "html"):
            raise UsageError(f"query parameter format: {fmt[:20]!r}; use json or html")
        return fmt == "html"
    return "text/html" in request.headers.get("accept", "") and "json" not in request.headers.get(
        "accept", ""
    )


async def top(request: Request) -> Response:
    def work() -> Response:
        from ..fleet import api

        check_params(request, "top")
        f = filters_from_query(request)
        n = _int(request.query_params, "top", 20, allow_all=True)
        with _session(request) as s:
            doc = api.top(s, f, n)
        if not _html_wanted(request):
            return _json(doc)
        cols = [
            ("selfPct", "self %"),
            ("totalPct", "total %"),
            ("selfMs", "self ms"),
            ("totalMs", "total ms"),
            ("traces", "traces"),
            ("p50SelfMs", "p50 self ms"),
            ("p95SelfMs", "p95 self ms"),
            ("name", "function"),
            ("resource", "resource"),
            ("line", "line"),
        ]
        return _page(HtmlTablePage(f"top functions: {api.describe(f)}", cols), doc["rows"])

    return await _run(request, work)


# A flame page or an export is no JSON document that could say `damagedRecords` and
# `pendingUploads`: they travel as these headers (`fleet ... --url` prints its notes).
DAMAGED_HEADER = "X-Jsprof-Damaged-Records"
PENDING_HEADER = "X-Jsprof-Pending-Uploads"


def _notes_headers(s: Any) -> dict[str, str]:
    from ..fleet import api

    n = api.notes(s)
    return {DAMAGED_HEADER: str(int(n["damagedRecords"])),
            PENDING_HEADER: str(int(n["pendingUploads"]))}


def _flame_response(page: str, fmt: str, notes: dict[str, str] | None = None,
                    fetches: bool = False) -> Response:
    from ..render.flame import page_csp

    media = MEDIA_TYPES[fmt]  # a FlameRenderer's kind: html or svg
    # The file's own policy (its one script by hash, no network) as a header too: an SVG
    # has no <meta> to carry it, so a served SVG had no policy at all, and a script an
    # escaping slip let into one would have run on this origin, beside the dashboard's
    # session. Framed by this origin's dashboard and nowhere else.
    csp = page_csp(fmt, fetches) + "; frame-ancestors 'self'"
    return Response(
        page,
        media_type=media,
        headers={"Cache-Control": "no-store", "Content-Security-Policy": csp, **(notes or {})},
    )


async def flame(request: Request) -> Response:
    def work() -> Response:
        from ..errors import UsageError
        from ..fleet import api

        check_params(request, "flame")
        f = filters_from_query(request)
        fmt = request.query_params.get("format") or "html"
        if fmt not in ("html", "svg"):
            raise UsageError(f"query parameter format: {fmt[:20]!r}; use html or svg")
        later = request.query_params.get("time_view") or "inline"
        if later not in ("inline", "fetch"):
            raise UsageError(f"query parameter time_view: {later[:20]!r}; use inline or fetch")
        # The Time view's own reads (a spread of uploads' samples by time, the vitals) wait
        # for its tab: most looks at the dashboard's merged graph never open it.
        lazy = later == "fetch" and fmt == "html" and f.during is None
        max_nodes = _int(request.query_params, "max_nodes", 2000)
        with _session(request) as s:
            # pinned to the uploads this graph is drawn from: the view, read later,
            # counts none that arrive meanwhile (`api.flame_time`)
            time_url = None if not lazy else "/v1/query/flame_time?" + urlencode(
                [*_time_view_params(request, f), ("pin", str(api.data_pin(s)))])
            # The Time view links its example uploads to their own pages here.
            page = api.flame(s, f, fmt, max_nodes, example_url=_ROUTE_PATHS["trace_flame"],
                             time_url=time_url)
            notes = _notes_headers(s)
        return _flame_response(page, fmt, notes, fetches=time_url is not None)

    return await _run(request, work)


def _time_view_params(request: Request, f: Any) -> list[tuple[str, str]]:
    """The filters of the flame page's Time view read: the page's own, with `since` and
    `until` as the epoch ms the graph was drawn with. An age (`since=1h`, the dashboard's
    choices) is read against the clock of each request: left as it came, the Time view
    opened half an hour later would cover another window than the graph above it."""
    out = [(k, v) for k, v in request.query_params.multi_items()
           if k in FILTER_PARAMS and k not in ("since", "until")]
    out += [(k, repr(v)) for k, v in (("since", f.since), ("until", f.until)) if v is not None]
    return out


PIN_DIGITS = 15  # an upload key bound: a whole number under 10**15 (JSON-exact)


def _pin(v: str | None, name: str = "pin") -> int | None:
    """flame_time's `pin=` (an upload key bound, `api.data_pin`) or `drawn=` (the uploads
    the graph counted): digits only, bounded; read as a number, never evaluated."""
    from ..errors import UsageError

    if v is None:
        return None
    if not (0 < len(v) <= PIN_DIGITS and v.isascii() and v.isdigit()):
        raise UsageError(f"query parameter {name}: {v[:20]!r}; expected the whole number the "
                         f"page's Time view URL carries (at most {PIN_DIGITS} digits)")
    return int(v)


async def flame_time(request: Request) -> Response:
    """`GET /v1/query/flame_time`: the Time view of the flame page of the same filters
    (JSON: `fleetTime`, the block the page would hold), which the dashboard's page reads
    when its Time tab is first opened."""
    def work() -> Response:
        from ..fleet import api

        check_params(request, "flame_time")
        f = filters_from_query(request)
        pin = _pin(request.query_params.get("pin"))
        drawn = _pin(request.query_params.get("drawn"), "drawn")
        with _session(request) as s:
            doc = api.flame_time(s, f, example_url=_ROUTE_PATHS["trace_flame"], pin=pin,
                                 drawn=drawn)
        return _json(doc)

    return await _run(request, work)


async def diff(request: Request) -> Response:
    def work() -> Response:
        from ..errors import UsageError
        from ..fleet import api

        q = request.query_params
        check_params(request, "diff")
        f = filters_from_query(request)
        if not q.get("base") or not q.get("new"):
            raise UsageError(
                "query parameters base and new: both needed, e.g. ?base=release=1.0&new=release=1.1"
            )
        base_f = f.with_side(q["base"], "base")
        new_f = f.with_side(q["new"], "new")
        fmt = q.get("format") or ("html" if _html_wanted(request) else "json")
        if fmt not in ("json", "html", "flame-html", "flame-svg"):
            raise UsageError(
                f"query parameter format: {fmt[:20]!r}; use json, html, flame-html or flame-svg"
            )
        flame_fmt = fmt.removeprefix("flame-") if fmt.startswith("flame-") else None
        with _session(request) as s:
            doc, page = api.diff(
                s,
                base_f,
                new_f,
                _int(q, "top", 20, allow_all=True),
                q.getlist("fail_if"),
                _int(q, "min_traces", 5),
                _int(q, "min_samples", 1000),
                flame_fmt,
                _int(q, "resamples", 200),
                q.get("exact_resources") in ("1", "true"),
            )
            notes = _notes_headers(s)
        if page is not None:
            return _flame_response(page, flame_fmt or "html", notes)
        if fmt == "json":
            return _json(doc)
        from ..fleet.text import rel_change

        rows = [
            dict(r, selfPpCi=_ci(r["selfPpCi"]), totalPpCi=_ci(r["totalPpCi"]),
                 selfRelPct=rel_change(r)) for r in doc["rows"]
        ]
        cols = [
            ("selfPp", "Δ self pp"),
            ("selfPpCi", "95% interval"),
            ("selfRelPct", "Δ self"),
            ("totalPp", "Δ total pp"),
            ("totalPpCi", "95% interval"),
            ("baseSelfPct", "base self %"),
            ("newSelfPct", "new self %"),
            ("name", "function"),
            ("resource", "resource"),
        ]
        notes = doc.get("warnings", []) + doc["failures"]  # the sides did not match; gates
        title = f"{doc['new']['filters']} vs {doc['base']['filters']}"
        return _page(HtmlTablePage(title, cols, notes), rows)

    return await _run(request, work)


def _ci(iv: list | None) -> str:
    return "" if iv is None else f"[{iv[0]:+.2f}, {iv[1]:+.2f}]"


async def export(request: Request) -> Response:
    def work() -> Response:
        from ..errors import UsageError
        from ..fleet import api
        from ..formats import FORMATS

        check_params(request, "export")
        fmt = request.query_params.get("format") or "jsprof"
        fmt = "jsprof" if fmt == "json" else fmt
        writer = FORMATS.get(fmt)
        if writer is None or getattr(writer, "write", None) is None:
            names = ", ".join(n for n, w in FORMATS.items() if getattr(w, "write", None))
            raise UsageError(f"query parameter format: {fmt[:20]!r}; export writes {names}")
        f = filters_from_query(request)
        with _session(request) as s:
            rec = api.recording(s, f)
            notes = _notes_headers(s)
        data = writer.write(rec)
        media = (
            "application/json"
            if data[:1] in (b"{", b"[")
            else ("text/plain; charset=utf-8" if fmt == "folded" else "application/octet-stream")
        )
        return Response(data, media_type=media, headers={"Cache-Control": "no-store", **notes})

    return await _run(request, work)


async def vitals(request: Request) -> Response:
    """INP, LCP and long-frame blocking p75 per route and release (`fleet vitals`)."""

    def work() -> Response:
        from ..fleet import api

        check_params(request, "vitals")
        f = filters_from_query(request)
        with _session(request) as s:
            doc = api.vitals(s, f)
        if not _html_wanted(request):
            return _json(doc)
        cols = [("route", "route"), ("release", "release"), ("pageLoads", "page loads"),
                ("interactions", "interactions"), ("inpP75Ms", "INP p75 ms"),
                ("longFrameBlockingP75Ms", "long-frame blocking p75 ms"),
                ("lcpP75Ms", "LCP p75 ms"), ("clsP75", "CLS p75")]
        from ..fleet.vitals import left_out_note

        left = left_out_note(doc)
        return _page(HtmlTablePage(f"web vitals: {api.describe(f)}", cols,
                                   [left[0].upper() + left[1:] + "."] if left else []),
                     doc["rows"])

    return await _run(request, work)


async def interactions(request: Request) -> Response:
    """Per interaction target and type: durations, long-frame time and the functions that
    ran during them (`fleet interactions`)."""

    def work() -> Response:
        from ..fleet import api

        check_params(request, "interactions")
        f = filters_from_query(request)
        n = _int(request.query_params, "top", 20, allow_all=True)
        k = _int(request.query_params, "functions", 5)
        with _session(request) as s:
            doc = api.interactions(s, f, n, k)
        if not _html_wanted(request):
            return _json(doc)
        cols = [("target", "target"), ("type", "type"), ("count", "interactions"),
                ("pageLoads", "page loads"), ("inpPageLoads", "INP of page loads"),
                ("p75Ms", "p75 ms"), ("longFrameMs", "long-frame ms")]
        return _page(HtmlTablePage(f"interactions: {api.describe(f)}", cols), doc["rows"])

    return await _run(request, work)


async def list_traces(request: Request) -> Response:
    """`GET /v1/traces?app=&release=&route=&since=&limit=&cursor=`: uploads with their meta."""

    def work() -> Response:
        from ..errors import UsageError
        from ..fleet import api

        check_params(request, "traces")
        f = filters_from_query(request)
        q = request.query_params
        limit = _int(q, "limit", 50)
        if q.get("resource") and q.get("function") is None:
            raise UsageError("query parameter resource: only with function (its script)")
        with _session(request) as s:
            return _json(api.list_uploads(s, f, limit, q.get("cursor"), q.get("function"),
                                          q.get("resource") or None))

    return await _run(request, work)


async def trace_flame(request: Request) -> Response:
    """`GET /v1/traces/{id}/flame`: one upload's flame graph (the renderer's own page, as
    `jsprof flame` draws that trace), for the dashboard's links to example uploads."""
    from ..errors import UsageError
    from ..words import printable
    from .app import _Failed, _get, error, in_thread
    from .document import trace_document

    _auth(request)
    try:
        check_params(request, "trace_flame")  # ?format=svg is not an svg: say so
    except UsageError as e:
        return error(400, str(e))
    upload_id = request.path_params["id"]
    got = await in_thread(_get, _store(request), upload_id)
    if isinstance(got, _Failed):
        return error(got.status, got.message, got.headers)
    if got is None:
        return error(404, f"no upload with id {printable(upload_id[:128])!r}")
    meta, trace_json = got

    def work() -> Response:
        from ..analysis.busy import attribute
        from ..analysis.calltree import build_call_tree
        from ..fleet.vitals import upload_vitals
        from ..formats import read_any
        from ..render.flame import render_flame
        from ..timeline import interaction_end, to_spans
        from ..trace import join_spans, spans_in_order

        # as `jsprof report` of this upload: busy time attributed (its meta's timeline)
        rec, _ = attribute(read_any(trace_document(meta, trace_json), f"upload {upload_id}"))
        timeline, chunks = _page_load_timeline(request, meta, upload_id)
        if timeline and rec.tracks:
            # Its long animation frames and interactions as lanes of its Time view: on the
            # page's performance.now(), the clock of its samples (no shift); those of its
            # page load's other chunks too where they cover its samples (an interaction is
            # reported in the chunk after the one that holds its samples, at times).
            t = rec.tracks[0]
            st = t.trace.sample_time
            lo, hi = (float(st.min()), float(st.max())) if len(st) else (0.0, 0.0)
            hi += float(t.sample_interval or 0.0)
            ends = {"longFrames": lambda w: w["start"] + w["duration"],
                    "interactions": interaction_end}
            # The upload's own windows all (one that ended after its last sample, reported
            # with its chunk, was left out: 6 boxes of its 7 long frames); the other chunks'
            # where they cover its samples.
            mine = meta.get("timeline") if isinstance(meta.get("timeline"), dict) else {}
            kept = {k: {(w.get("start"), w.get("duration")) for w in mine.get(k) or ()
                        if isinstance(w, dict)} for k in ends}
            own = {k: [w for w in timeline[k]
                       if (w["start"], w["duration"]) in kept[k]
                       or (w["start"] < hi and ends[k](w) > lo)]
                   for k in ends}
            spans = join_spans(t.spans, to_spans(own))
            t.spans = spans_in_order(spans) if spans is not None and len(spans) else None
        tree = build_call_tree(rec)
        bits = [f"{meta.get(k)}" for k in ("app", "release", "route") if meta.get(k)]
        page = render_flame(
            tree, "html", title=f"upload {upload_id}",
            subtitle=" · ".join([*bits, f"{tree.total_time:.1f} ms"]), rec=rec,
            facts=upload_vitals(timeline, chunks),
        )
        return _flame_response(page, "html")

    return await _run(request, work)


MAX_CHUNKS = 50  # a page load's uploads read for one upload's page at most


def _page_load_timeline(request: Request, meta: dict, upload_id: str
                        ) -> tuple[dict | None, int]:
    """The timeline of the upload's whole page load (every chunk's, merged as the fleet
    merges them: `timeline.page_loads`) and how many uploads it came from. An upload
    without a page-load id is a page load of its own."""
    from .. import timeline as tl
    from ..fleet.filters import Filters

    own = meta.get("timeline")
    pl_id, app = meta.get("pageLoad"), meta.get("app")
    items = [(upload_id, own)]
    if isinstance(pl_id, str) and isinstance(app, str):
        from ..store import StoreError

        with _session(request) as s:
            up = s.engine.uploads(s.snap, Filters(app=app, release=meta.get("release")))
            ids = [u for u, p in zip(up.id, up.page_load, strict=True)
                   if p == pl_id and u != upload_id][:MAX_CHUNKS]
        store = _store(request)
        for uid in ids:
            try:
                got = store.get(uid)
            except StoreError:  # damaged on disk: that chunk's timeline is left out
                got = None
            if got is not None:
                items.append((uid, got[0].get("timeline")))
    if not any(t for _, t in items):
        return None, len(items)
    pl = tl.page_loads([("load", t) for _, t in items])["load"]
    dropped: dict[str, int] = {}
    for _, t in items:
        for k, v in ((t or {}).get("dropped") or {}).items():
            dropped[k] = max(dropped.get(k, 0), v)  # the client's counts only grow
    out = {"longFrames": pl.long_frames, "interactions": pl.interactions, "load": pl.load,
           "dropped": dropped}
    if pl.unsampled_counts():  # the piece running as the page left, never sent
        out["unsampledCounts"] = pl.unsampled_counts()
    return out, len(items)


async def regressions(request: Request) -> Response:
    """`fleet regressions --json` (by release or day); 200 whether or not any was found."""

    def work() -> Response:
        from ..errors import UsageError
        from ..fleet.regressions import BY
        from ..fleet.regressions import regressions as find

        q = request.query_params
        check_params(request, "regressions")
        f = filters_from_query(request)
        if (q.get("format") or "json") != "json":
            raise UsageError(f"query parameter format: {q['format'][:20]!r}; use json")
        by = q.get("by") or "release"
        if by not in BY:
            raise UsageError(f"query parameter by: {by[:20]!r}; use release or day")
        def percent(name: str, default: str, top: float) -> float:
            text = q.get(name) or default
            try:
                v = float(text)
            except ValueError:
                v = math.nan
            if not (0 <= v < math.inf and v <= top):
                raise UsageError(f"query parameter {name}: expected a percentage, 0 or more, "
                                 f"got {text[:40]!r}")
            return v

        min_change = percent("min_change", "10", math.inf)
        min_share = percent("min_share", "0.5", 100.0)
        from ..fleet import api

        with _session(request) as s:
            doc = find(s, f, min_change, _int(q, "min_traces", 5), _int(q, "min_samples", 1000),
                       by=by, min_share=min_share)
            doc.update(api.notes(s))
        return _json(doc)

    return await _run(request, work)


async def series(request: Request) -> Response:
    """A function's self and total share per release (or per day): the dashboard's chart."""

    def work() -> Response:
        from ..errors import UsageError
        from ..fleet import api

        check_params(request, "series")
        f = filters_from_query(request)
        name = request.query_params.get("function")
        if name is None:
            raise UsageError("query parameter function: missing; the function's name")
        by = request.query_params.get("by") or "release"
        if by not in ("release", "day"):
            raise UsageError(f"query parameter by: {by[:20]!r}; use release or day")
        q = request.query_params
        if (q.get("line") or q.get("column")) and q.get("resource") is None:
            raise UsageError("query parameter line/column: only with resource (the script)")
        with _session(request) as s:
            return _json(api.series(s, f, name, by, q.get("resource"), _int(q, "line", None),
                                    _int(q, "column", None)))

    return await _run(request, work)


async def options(request: Request) -> Response:
    """Apps, releases, routes and envs seen, for the dashboard's pickers."""

    def work() -> Response:
        from ..fleet import api

        check_params(request, "options")
        with _session(request) as s:
            return _json(api.options(s, request.query_params.get("app")))

    return await _run(request, work)


async def post_sourcemap(request: Request) -> Response:
    from ..errors import UsageError
    from .auth import require_admin

    require_admin(request)
    q = request.query_params
    app, release = q.get("app"), q.get("release")
    if not app or not release:
        return _error(
            400, "query parameters app and release: both needed, e.g. ?app=shop&release=1.4.2"
        )
    length = request.headers.get("content-length") or "0"
    if not length.isascii() or not length.strip().isdigit():
        return _error(400, f"Content-Length {length[:40]!r} is not a number")
    size = int(length)
    if size > MAX_BODY:
        return _error(413, f"source map over {MAX_BODY} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return _error(413, f"source map over {MAX_BODY} bytes")
    name = (q.get("name") or "upload.map").replace("/", "_").replace("\\", "_")[:200]

    def work() -> Response:
        from ..fleet import sourcemaps

        try:
            stored = sourcemaps.store_map(_store(request).path, app, release, bytes(body), name)
        except UsageError as e:
            return _error(400, str(e))
        return _json({"stored": stored}, 201)

    return await in_query_thread(request, work)


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/query/top", top, methods=["GET"]),
        Route("/v1/query/flame", flame, methods=["GET"]),
        Route("/v1/query/flame_time", flame_time, methods=["GET"]),
        Route("/v1/query/diff", diff, methods=["GET"]),
        Route("/v1/query/export", export, methods=["GET"]),
        Route("/v1/query/series", series, methods=["GET"]),
        Route("/v1/query/vitals", vitals, methods=["GET"]),
        Route("/v1/query/interactions", interactions, methods=["GET"]),
        Route("/v1/query/regressions", regressions, methods=["GET"]),
        # beside the collector's POST /v1/traces (a method Starlette matches per route)
        Route("/v1/traces", list_traces, methods=["GET"]),
        Route("/v1/traces/{id}/flame", trace_flame, methods=["GET"]),
        Route("/v1/query/options", options, methods=["GET"]),
        Route("/v1/sourcemaps", post_sourcemap, methods=["POST"]),
    ]


__all__ = ["routes", "HTTPException"]
