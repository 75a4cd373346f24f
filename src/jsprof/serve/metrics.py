"""The collector's operator endpoints: `/metrics` (Prometheus text), `/healthz`, `/readyz`.

Counts from every worker: `jsprof serve` forks its workers, and each counts the uploads it
answered, so the counters live in prometheus_client's multiprocess mode (server.py gives
every run a fresh `PROMETHEUS_MULTIPROC_DIR` before it forks; each worker's values are in
files there, and a scrape, whichever worker answers it, adds them all up, a restarted
worker's too). What describes the store (compactor lag and runs, parts, disk use) is the
same from any worker: it is read from the store when scraped.

Who may ask (docs/field.md, "Operating a collector"): `/metrics` wants the read token, or
the metrics token (`--metrics-token-file`, `$JSPROF_METRICS_TOKEN`), which reads nothing
else, so Prometheus need not hold the key to every trace; `/healthz` and `/readyz` answer
anyone (load balancers and orchestrators probe without credentials) and say only a few
fixed words, never a path or an error's text.
"""

from __future__ import annotations

import os
import time
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

ENV = "PROMETHEUS_MULTIPROC_DIR"
# Seconds from a request's arrival to its answer: ~5 ms for a field upload on an idle
# worker; a busy one's group commit (fsync) and parse queue make the tail.
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# A refusal's reason, by its status (a fixed set: labels never hold what a client sent).
REASONS = {
    400: "invalid",
    401: "unauthorized",
    403: "origin_not_allowed",
    409: "id_conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    499: "client_disconnected",
    500: "internal_error",
    503: "store_unavailable",
}


def reason(status: int) -> str:
    return REASONS.get(status, f"http_{status}")


class Metrics:
    """One worker's upload counters (shared across workers in multiprocess mode)."""

    def __init__(self, apps: Any) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.multiprocess = bool(os.environ.get(ENV)) and os.path.isdir(os.environ[ENV])
        # Multiprocess: values go to the shared directory, and each scrape gathers them in a
        # registry of its own. Else (an app made by a test or an embedding program) this
        # process's registry is the whole truth.
        self.registry = None if self.multiprocess else CollectorRegistry(auto_describe=True)
        reg = self.registry
        self.apps = frozenset(apps)
        self.accepted = Counter(
            "jsprof_uploads_accepted", "Uploads stored (202), by app", ["app"], registry=reg
        )
        self.duplicates = Counter(
            "jsprof_uploads_duplicate",
            "Uploads answered 202 whose id was stored already (a client's retry): not stored again",
            ["app"], registry=reg,
        )
        self.refused = Counter(
            "jsprof_uploads_refused", "Uploads refused, by reason (from the HTTP status)",
            ["reason"], registry=reg,
        )
        self.bytes = Counter(
            "jsprof_upload_received_bytes",
            "Bytes of upload bodies received (as sent, compressed or not)", registry=reg,
        )
        self.ack = Histogram(
            "jsprof_upload_ack_seconds",
            "Seconds from an upload's request to its 202 (durable by then)",
            buckets=ACK_BUCKETS, registry=reg,
        )
        for name in self.apps:  # every configured app shows, at 0, from the start
            self.accepted.labels(name)
            self.duplicates.labels(name)

    def upload(self, status: int, seconds: float, app: str | None, body_bytes: int,
               duplicate: bool) -> None:
        if body_bytes:
            self.bytes.inc(body_bytes)
        if status == 202:
            label = app if app in self.apps else "?"
            (self.duplicates if duplicate else self.accepted).labels(label).inc()
            self.ack.observe(seconds)
        else:
            self.refused.labels(reason(status)).inc()

    def exposition(self, store: Any, compacting: bool) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest

        if self.multiprocess:
            from prometheus_client import multiprocess

            reg = CollectorRegistry()
            multiprocess.MultiProcessCollector(reg)
        else:
            reg = self.registry
        collector = _StoreCollector(store, compacting)
        reg.register(collector)
        try:
            return generate_latest(reg)
        finally:
            reg.unregister(collector)


class _StoreCollector:
    """The store as of this scrape (the same from any worker)."""

    def __init__(self, store: Any, compacting: bool) -> None:
        self.store = store
        self.compacting = compacting

    def describe(self) -> list:
        return []  # no fixed description: `collect` runs only at a scrape

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        from ..store import health

        if hasattr(self.store, "health"):  # on object storage: what its bucket says
            from ..store import StoreError

            try:
                h = self.store.health()
            except StoreError:
                return  # not reachable: /readyz says so; the request counters still go out
            yield from _object_store_metrics(h)
            return
        path = self.store.path
        lag = health.compaction_lag(self.store)
        yield GaugeMetricFamily(
            "jsprof_compactor_pending_uploads",
            "Uploads stored but not yet compacted into the query tables", value=lag.pending,
        )
        yield GaugeMetricFamily(
            "jsprof_compactor_lag_seconds",
            "Age of the oldest upload not yet compacted (0: caught up)", value=lag.seconds(),
        )
        st = health.read_status(path)
        yield GaugeMetricFamily(
            "jsprof_compactor_enabled",
            "1 when this collector compacts in the background (--compact-every)",
            value=1 if self.compacting else 0,
        )
        yield CounterMetricFamily(
            "jsprof_compactor_runs", "Compactor runs, over the store's life",
            value=int(st.get("runsTotal", 0)),
        )
        yield CounterMetricFamily(
            "jsprof_compactor_failures",
            "Compactor runs that failed (an error, or its process died), over the store's life",
            value=int(st.get("failuresTotal", 0)),
        )
        yield GaugeMetricFamily(
            "jsprof_compactor_consecutive_failures",
            f"Failed compactor runs in a row (readyz is not ready from {health.FAILING_AFTER})",
            value=int(st.get("consecutiveFailures", 0)),
        )
        yield GaugeMetricFamily(
            "jsprof_compactor_last_success_timestamp_seconds",
            "When the compactor last ran without error (Unix time; 0: never)",
            value=float(st.get("lastSuccessAt", 0.0)),
        )
        yield GaugeMetricFamily(
            "jsprof_store_table_parts", "Part files the query tables' manifest lists",
            value=health.table_parts(path),
        )
        use = health.current_disk_use(path, st)
        b = GaugeMetricFamily(
            "jsprof_store_bytes",
            "Bytes the store takes on disk, by top-level folder (at most 10 s old)",
            labels=["dir"],
        )
        f = GaugeMetricFamily(
            "jsprof_store_files", "Files in the store, by top-level folder (at most 10 s old)",
            labels=["dir"],
        )
        for name in sorted(use.bytes):
            b.add_metric([name], use.bytes[name])
            f.add_metric([name], use.files[name])
        yield b
        yield f


# ---- routes ----


def _json(doc: dict, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status, media_type="application/json",
                    headers={"Cache-Control": "no-store"})


async def _in_thread(request: Request, fn: Any, *args: Any) -> Any:
    """`fn(*args)` in one of the query threads (never the ones ingest's appends use)."""
    import functools

    import anyio

    return await anyio.to_thread.run_sync(
        functools.partial(fn, *args), limiter=request.app.state.query_limiter
    )


def require_metrics(request: Request) -> None:
    """The metrics token (reads nothing else) or the read token / a dashboard session."""
    from .auth import _bearer, check_throttle, has_read, record_failure, token_matches

    expected = request.app.state.config.metrics_token
    given = _bearer(request)
    if expected and given is not None:
        check_throttle(request)
        if token_matches(given, expected):
            return
        if token_matches(given, request.app.state.config.read_token):
            return
        record_failure(request)
    elif has_read(request):
        return
    raise HTTPException(
        401,
        "missing or wrong token; send Authorization: Bearer <metrics token or read token>",
        headers={"WWW-Authenticate": "Bearer"},
    )


async def metrics(request: Request) -> Response:
    require_metrics(request)
    state = request.app.state
    got = await _in_thread(
        request, state.metrics.exposition, state.store, state.config.compact_every > 0
    )
    from prometheus_client import CONTENT_TYPE_LATEST

    return Response(got, media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})


async def healthz(request: Request) -> Response:
    """The process answers: nothing else is looked at (a liveness probe restarts on no)."""
    return Response(b'{"status":"ok"}', media_type="application/json",
                    headers={"Cache-Control": "no-store"})


def _object_lag_seconds(h: dict) -> float:
    """Age of the oldest upload not yet compacted (by the receivedAt range in its segment
    object's name; 0: caught up)."""
    oldest = h.get("oldestPending")
    return 0.0 if oldest is None else max(0.0, time.time() - oldest / 1000.0)


def _object_store_metrics(h: dict) -> Any:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    from ..store import health

    yield GaugeMetricFamily(
        "jsprof_compactor_pending_uploads",
        "Uploads stored but not yet compacted into the query tables", value=h["pending"])
    yield GaugeMetricFamily(
        "jsprof_compactor_lag_seconds",
        "Age of the oldest upload not yet compacted (0: caught up)",
        value=_object_lag_seconds(h))
    st = h.get("report") or {}
    yield CounterMetricFamily(
        "jsprof_compactor_runs", "Compactor runs, over the store's life (the lease holders')",
        value=int(st.get("runsTotal", 0)))
    yield CounterMetricFamily(
        "jsprof_compactor_failures",
        "Compactor runs that failed, over the store's life (the lease holders')",
        value=int(st.get("failuresTotal", 0)))
    yield GaugeMetricFamily(
        "jsprof_compactor_consecutive_failures",
        f"Failed compactor runs in a row (failing from {health.FAILING_AFTER})",
        value=int(st.get("consecutiveFailures", 0)))
    yield GaugeMetricFamily(
        "jsprof_compactor_last_success_timestamp_seconds",
        "When the compactor last ran without error (Unix time; 0: never)",
        value=float(st.get("lastSuccessAt", 0.0)))
    yield GaugeMetricFamily(
        "jsprof_store_table_parts", "Part files the query tables' manifest lists",
        value=h["parts"])
    b = GaugeMetricFamily("jsprof_store_bytes", "Bytes the store takes, by top-level folder",
                          labels=["folder"])
    n = GaugeMetricFamily("jsprof_store_files", "Objects in the store, by top-level folder",
                          labels=["folder"])
    for folder, v in sorted(h["folders"].items()):
        b.add_metric([folder], v["bytes"])
        n.add_metric([folder], v["objects"])
    yield b
    yield n
    # those figures are the compactor's walk of the bucket, a step a run (no scrape lists
    # the bucket's history): when its last whole walk began
    yield GaugeMetricFamily(
        "jsprof_store_walked_timestamp_seconds",
        "When the compactor's last whole walk of the bucket (the bytes and files above) "
        "began (Unix time, the bucket's clock; 0: none yet)",
        value=float(h.get("foldersAt") or 0.0))


def _object_readiness(store: Any) -> dict[str, str]:
    """A store on an object store is ready when its bucket answers a listing."""
    from ..store import StoreError

    try:
        store.health()
    except StoreError:
        return {"store": "not reachable (the object store does not answer; see the log)"}
    return {"store": "ok"}


def readiness(store_path: Any, compacting: bool) -> dict[str, str]:
    """Each check -> "ok" or a few fixed words saying what is wrong."""
    from ..store import health

    checks = {"store": _writable(store_path)}
    if compacting:
        st = health.read_status(store_path)
        n = int(st.get("consecutiveFailures", 0))
        checks["compactor"] = (
            f"failing ({n} runs in a row; see the collector's log)" if health.failing(st)
            else "ok"
        )
    return checks


def _writable(store_path: Any) -> str:
    """Write, sync and remove a small file in the store: what an append needs of the disk."""
    import errno

    probe = os.path.join(os.fspath(store_path), f".ready-{os.getpid()}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"\0" * 4096)
            os.fdatasync(fd)
        finally:
            os.close(fd)
            try:
                os.unlink(probe)
            except FileNotFoundError:
                pass
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return "not writable (disk full)"
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return "not writable (permission or read-only filesystem)"
        return "not writable (I/O error)"
    return "ok"


async def readyz(request: Request) -> Response:
    state = request.app.state
    if hasattr(state.store, "health"):
        checks = await _in_thread(request, _object_readiness, state.store)
    else:
        checks = await _in_thread(
            request, readiness, state.store.path, state.config.compact_every > 0
        )
    bad = [f"{k} {v}" for k, v in checks.items() if v != "ok"]
    if bad:
        return _json({"error": "not ready: " + "; ".join(bad), "checks": checks}, 503)
    return _json({"status": "ready", "checks": checks})


def status(store: Any, compacting: bool) -> dict[str, Any]:
    """The compactor's lag and state, and the store's disk use: the dashboard's status line."""
    from ..store import health

    if hasattr(store, "health"):  # on object storage
        h = store.health()
        st = h.get("report") or {}
        return {
            "compactor": {"enabled": compacting, "pending": h["pending"],
                          "lagSeconds": _object_lag_seconds(h),
                          "failing": health.failing(st),
                          "consecutiveFailures": int(st.get("consecutiveFailures", 0)),
                          "lastRunAt": st.get("lastRunAt"),
                          "lastSuccessAt": st.get("lastSuccessAt")},
            "store": {"bytes": sum(v["bytes"] for v in h["folders"].values()),
                      "files": sum(v["objects"] for v in h["folders"].values())},
        }
    lag = health.compaction_lag(store)
    st = health.read_status(store.path)
    use = health.current_disk_use(store.path, st)
    return {
        "compactor": {
            "enabled": compacting,
            "pending": lag.pending,
            "lagSeconds": lag.seconds(),
            "failing": health.failing(st),
            "consecutiveFailures": int(st.get("consecutiveFailures", 0)),
            "lastRunAt": st.get("lastRunAt"),
            "lastSuccessAt": st.get("lastSuccessAt"),
        },
        "store": {"bytes": use.total_bytes, "files": use.total_files},
    }


async def get_status(request: Request) -> Response:
    from .auth import require_read

    require_read(request)
    state = request.app.state
    return _json(await _in_thread(request, status, state.store, state.config.compact_every > 0))


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/status", get_status, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/readyz", readyz, methods=["GET", "HEAD"]),
    ]
