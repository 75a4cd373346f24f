"""`jsprof serve`, `jsprof serve prune`, `jsprof serve check`: argument parsing only (stdlib
imports at module level, so `jsprof --help` stays light; the server and store load when the
command runs)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..argtypes import path, positive_int
from ..errors import UsageError
from ..textfiles import read_secret_file, read_text_file
from ..words import plural
from .config import (
    CMDLINE_WARNING,
    Limits,
    ServeConfig,
    parse_apps,
    parse_duration,
    parse_origins,
    parse_rate,
    parse_size,
    resolve_read_token,
)

DEFAULT_STORE = "jsprof-store"


def _port(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {s!r}") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0-65535 (0 picks a free port), got {v}")
    return v


def _seconds_or_off(s: str) -> float:
    if s.strip() in ("0", "0.0"):
        return 0.0
    try:
        return _seconds(s)
    except argparse.ArgumentTypeError as e:  # the refusal names the off switch too
        raise argparse.ArgumentTypeError(f"{e} (or 0: off)") from None


def _seconds(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {s!r}") from None
    if not 0 < v < 86400:
        raise argparse.ArgumentTypeError(f"must be over 0 and under a day, got {s}")
    return v


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="collect ProfilerTraces from browsers (HTTP collector with an embedded store)",
        description="Collect ProfilerTraces posted by browsers (jsprof-client.js) into a store. "
        "The first stdout line is `jsprof serve: listening on http://HOST:PORT`.",
    )
    p.add_argument(
        "--store", type=path,
        default=DEFAULT_STORE, help=f"store directory (default ./{DEFAULT_STORE})"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8400, help="port (default 8400; 0: a free one)")
    p.add_argument(
        "--app",
        action="append",
        default=[],
        metavar="NAME:KEY",
        help="an app that may upload, with its public ingest key (repeatable; or lines of "
        "NAME:KEY in --app-file or $JSPROF_APPS)",
    )
    p.add_argument(
        "--app-file",
        type=path,
        metavar="FILE",
        help="apps that may upload, one NAME:KEY per line (# comments)",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="NAME=ORIGIN",
        help="let pages from ORIGIN upload for app NAME (CORS; repeatable; * for any)",
    )
    p.add_argument(
        "--read-token-file",
        type=path,
        metavar="FILE",
        help="file holding the token for reading traces and queries (else $JSPROF_READ_TOKEN, "
        "else one is generated and kept in the store)",
    )
    p.add_argument(
        "--read-token",
        metavar="TOKEN",
        help="the read token itself (warns: other users can see a command line; prefer "
        "--read-token-file or $JSPROF_READ_TOKEN)",
    )
    p.add_argument(
        "--admin-token-file",
        type=path,
        metavar="FILE",
        help="file holding the token for admin writes (source maps); or $JSPROF_ADMIN_TOKEN",
    )
    p.add_argument(
        "--admin-token",
        metavar="TOKEN",
        help="the admin token itself (warns, as --read-token does)",
    )
    p.add_argument(
        "--metrics-token-file",
        type=path,
        metavar="FILE",
        help="file holding a token that may read /metrics and nothing else (or "
        "$JSPROF_METRICS_TOKEN); the read token may read /metrics too",
    )
    p.add_argument(
        "--forwarded-allow-ips",
        metavar="IPS",
        help="behind a TLS proxy: the proxy addresses (comma-separated, or *) whose "
        "X-Forwarded-For/-Proto are believed; then the sign-in cookie is Secure",
    )
    p.add_argument(
        "--rate-limit",
        metavar="N/s",
        help="uploads per second per app, in each worker process (off by default)",
    )
    p.add_argument(
        "--workers", type=positive_int, default=1, help="collector processes (default 1)"
    )
    p.add_argument(
        "--read-timeout",
        type=_seconds,
        default=10.0,
        metavar="S",
        help="a request's headers must arrive within S seconds, and its body never stall "
        "longer (default 10; a whole body gets 12x that)",
    )
    p.add_argument(
        "--max-connections",
        type=positive_int,
        default=1000,
        metavar="N",
        help="open connections per worker; past it the slowest is closed (default 1000, "
        "lowered to fit the open-file limit)",
    )
    p.add_argument("--access-log", action="store_true", help="log each request on stderr")
    p.add_argument(
        "--keep-query",
        action="store_true",
        help="keep query strings and fragments in resource URLs (stripped by default)",
    )
    p.add_argument("--retention", metavar="AGE", help="delete uploads older than AGE (e.g. 30d)")
    p.add_argument(
        "--compact-every",
        type=_seconds_or_off,
        default=5.0,
        metavar="S",
        help="compact new uploads into the query tables every S seconds, in one background "
        "process per store (default 5; 0: never, e.g. when `jsprof fleet` runs elsewhere)",
    )
    p.add_argument(
        "--query-new-uploads",
        type=positive_int,
        default=None,
        metavar="N",
        help="uploads not compacted yet that one query reads beyond those its worker read "
        "before (default 300, ~2 s of one core); the rest are counted in the answer "
        "(pendingUploads) and read by the next queries",
    )
    p.add_argument(
        "--compactor-restart",
        type=_seconds,
        default=2.0,
        metavar="S",
        help="start a compactor process that died again after S seconds, doubled for each "
        "death in a row up to 60 s (default 2; a bucket's compactor: S each time)",
    )
    p.add_argument(
        "--keep-raw",
        default="7d",
        metavar="AGE",
        help="keep raw uploads this long once compacted (default 7d; 0: delete them once "
        "compacted; forever: keep them); GET /v1/traces/{id} answers 410 past it",
    )
    p.add_argument(
        "--forward",
        metavar="URL",
        help="also push every stored upload, as OTLP profiles, to this OTLP/HTTP endpoint "
        "(e.g. Pyroscope's http://HOST:4040; /v1development/profiles when URL has no path); "
        "batched and retried in the background, never delaying an upload; needs jsprof[otlp]",
    )
    g = p.add_argument_group("limits per upload")
    g.add_argument("--max-body", default="8MiB", metavar="SIZE", help="body on the wire (8MiB)")
    g.add_argument(
        "--max-decompressed", default="64MiB", metavar="SIZE", help="after decompression (64MiB)"
    )
    g.add_argument("--max-samples", type=positive_int, default=200_000, help="samples (200000)")
    g.add_argument("--max-depth", type=positive_int, default=1024, help="stack depth (1024)")
    p.set_defaults(func=main)

    ps = p.add_subparsers(dest="serve_command", metavar="{prune,check,compact,backup}")
    pr = ps.add_parser("prune", help="delete old uploads from a store")
    _add_store_arg(pr)
    pr.add_argument("--older-than", required=True, metavar="AGE", help="e.g. 30d, 12h")
    pr.add_argument("--app", metavar="NAME", help="only this app's uploads")
    pr.set_defaults(func=main_prune)
    ck = ps.add_parser(
        "check",
        help="verify every stored upload's checksums and report damage (read-only)",
        description="Read every record of a store and check it. Prints one line per problem "
        "found; exit status 1 when there is any, 0 when the store is sound.",
    )
    _add_store_arg(ck)
    ck.set_defaults(func=main_check)
    bk = ps.add_parser(
        "backup",
        help="copy a store, while collectors run, into a new folder (a store itself)",
        description="Copy the store consistently into a new folder while collectors keep "
        "taking uploads (the compactor waits meanwhile). The copy is a store: restore by "
        "serving it (jsprof serve --store DIR) or by putting it where the store was. A store "
        "on s3:// is copied to a folder or an empty s3:// prefix, and restored by copying "
        "that back into an empty prefix (docs/store.md).",
    )
    _add_store_arg(bk)
    bk.add_argument("--to", type=path, required=True, metavar="DIR",
                    help="the new folder (must not exist), or an empty s3://bucket/prefix")
    bk.set_defaults(func=main_backup)
    cp = ps.add_parser(
        "compact",
        help="compact every upload not compacted yet into the query tables, once",
        description="Compact the uploads stored since the last compaction into the Parquet "
        "tables `jsprof fleet` reads, then merge small parts: what a collector's background "
        "compactor does, for a store no collector compacts (--compact-every 0, or a copy). "
        "Queries never compact: they read what is not compacted yet, up to a cap, in memory.",
    )
    _add_store_arg(cp)
    cp.set_defaults(func=main_compact)


def _add_store_arg(sub: argparse.ArgumentParser) -> None:
    # SUPPRESS: `jsprof serve --store X prune ...` keeps X instead of this default.
    sub.add_argument(
        "--store", type=path,
        default=argparse.SUPPRESS, help=f"store directory (default ./{DEFAULT_STORE})"
    )


def _app_items(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Each NAME:KEY with where it was given, for parse_apps's one-line mistakes."""
    items = [("--app", a) for a in args.app]
    if args.app_file:
        text = read_text_file(args.app_file, "--app-file")
        lines = [
            (f"--app-file {args.app_file} line {n}", line.strip())
            for n, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
        if not lines:
            # Given a file of apps, a collector refusing every upload is not what was meant.
            raise UsageError(f"--app-file {args.app_file}: no NAME:KEY line; one app a line")
        items += lines
    env = os.environ.get("JSPROF_APPS")
    if env:
        items += [("$JSPROF_APPS", a) for a in env.replace(",", " ").split()]
    return items


def _admin_token(args: argparse.Namespace) -> str | None:
    if args.admin_token_file:
        return read_secret_file(args.admin_token_file, "--admin-token-file")
    return args.admin_token or os.environ.get("JSPROF_ADMIN_TOKEN") or None


def _metrics_token(args: argparse.Namespace) -> str | None:
    if args.metrics_token_file:
        return read_secret_file(args.metrics_token_file, "--metrics-token-file")
    return os.environ.get("JSPROF_METRICS_TOKEN") or None


def _config(args: argparse.Namespace) -> ServeConfig:
    apps = parse_apps(_app_items(args))
    limits = Limits(
        max_body=parse_size(args.max_body, "--max-body"),
        max_decompressed=parse_size(args.max_decompressed, "--max-decompressed"),
        max_samples=args.max_samples,
        max_depth=args.max_depth,
    )
    return ServeConfig(
        store=args.store,
        apps=apps,
        origins=parse_origins(args.allow_origin, apps),
        admin_token=_admin_token(args),
        metrics_token=_metrics_token(args),
        rate_limit=parse_rate(args.rate_limit) if args.rate_limit else None,
        keep_query=args.keep_query,
        retention_s=parse_duration(args.retention, "--retention") if args.retention else None,
        access_log=args.access_log,
        limits=limits,
        workers=args.workers,
        read_timeout=args.read_timeout,
        body_timeout=args.read_timeout * 12,
        max_connections=args.max_connections,
        forwarded_allow_ips=args.forwarded_allow_ips,
        compact_every=args.compact_every,
        compactor_restart_s=args.compactor_restart,
        query_new_uploads=args.query_new_uploads,
        keep_raw_s=_keep_raw(args.keep_raw),
        forward=_forward(args.forward),
    )


def _keep_raw(text: str) -> float | None:
    t = text.strip().lower()
    if t in ("forever", "never", "inf"):
        return None
    if t in ("0", "0s"):
        return 0.0
    try:
        return parse_duration(text, "--keep-raw")
    except UsageError:
        raise UsageError(
            f"--keep-raw: {text!r} is not an age; use e.g. 7d or 12h, 0 (delete raw uploads "
            "once compacted) or forever"
        ) from None


def _forward(url: str | None) -> str | None:
    if url is None:
        return None
    from ..extras import require
    from .forward import endpoint

    require("otlp", "jsprof serve --forward")
    try:
        return endpoint(url)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _open_store(path: str) -> object:
    from ..store import StoreError, open_store

    try:
        return open_store(path)
    except StoreError as e:
        raise UsageError(f"--store {e}") from None


def main(args: argparse.Namespace) -> int:
    config = _config(args)
    from . import server

    # Bound first: a host that does not resolve or a port in use is one line, before a
    # store or a read token is made for a collector that cannot listen.
    sock = server.bind(args.host, args.port)
    remote = "://" in config.store
    if remote:
        _check_object_store(args)
    if args.read_token_file:  # and a token file that will not read: before the store too
        resolve_read_token(None, Path(config.store), args.read_token_file)
    store = _open_store(config.store)
    if remote:  # the bucket answers, as whom the environment says: before taking uploads
        from ..store import StoreError

        try:
            store.probe()  # type: ignore[attr-defined]
        except StoreError as e:
            from ..store.errors import about_store

            raise UsageError(about_store(config.store, e)) from None
    # Finish dead writers' segments (and their claims) before any worker takes uploads: a
    # retried upload then finds its claim even if a machine crash had lost it.
    store.recover()
    store.close()  # opened here only to create it and check it; each worker opens its own
    token, kept_in = resolve_read_token(args.read_token, Path(config.store), args.read_token_file)
    config.read_token = token
    err = sys.stderr
    for flag, env in (
        ("--read-token", "JSPROF_READ_TOKEN"),
        ("--admin-token", "JSPROF_ADMIN_TOKEN"),
    ):
        if getattr(args, flag[2:].replace("-", "_")):
            print(CMDLINE_WARNING.format(flag=flag, env=env), file=err)
    shown = store.url if remote else Path(config.store).resolve()  # type: ignore[attr-defined]
    print(f"jsprof serve: store {shown}", file=err)
    if kept_in:
        # the token itself never goes to a log: the file (mode 0600) holds it
        print(f"jsprof serve: read token generated into {kept_in} (mode 0600; read it "
              "from there)", file=err)
    else:
        # Where it came from, by resolve_read_token's order, so the user knows which
        # secret the dashboard's sign-in wants (never the token itself).
        if args.read_token_file:
            where = f"the file {args.read_token_file} (--read-token-file)"
        elif args.read_token:
            where = "--read-token"
        else:
            where = "$JSPROF_READ_TOKEN"
        print(f"jsprof serve: read token from {where}", file=err)
    if not config.apps:
        print("jsprof serve: no --app NAME:KEY given; every upload will be refused", file=err)
    else:
        print(f"jsprof serve: apps {', '.join(sorted(config.apps))}", file=err)
    err.flush()
    return server.run(config, args.host, args.port, sock)


def _check_object_store(args: argparse.Namespace) -> None:
    """What a store on an object store cannot do yet, refused before anything starts."""
    from ..extras import require

    require("s3", "jsprof serve --store s3://")
    if not (args.read_token_file or args.read_token or os.environ.get("JSPROF_READ_TOKEN")):
        raise UsageError(
            f"--store {args.store}: a store on object storage keeps no read-token file; "
            "give --read-token-file FILE or set $JSPROF_READ_TOKEN")
    if args.retention and args.compact_every <= 0:
        raise UsageError(f"--store {args.store}: --retention on object storage is the "
                         "compactor's; give --compact-every SECONDS (> 0)")


def _existing_store(path: str) -> None:
    if not Path(path, "segments").is_dir():
        raise UsageError(f"--store {path}: not a jsprof store (no segments/ folder)")


def main_check(args: argparse.Namespace) -> int:
    if "://" in args.store:
        return _check_objects(args.store)
    _existing_store(args.store)
    store = _open_store(args.store)
    rep = store.check()
    out = sys.stdout
    print(
        f"jsprof serve check: {args.store}: {plural(rep.segments, 'segment')}, "
        f"{plural(rep.records, 'upload')}",
        file=out,
    )
    for f in rep.findings:
        print(f"{f.segment}: offset {f.offset}: {f.length} bytes: {f.what}", file=out)
    for name in rep.open_segments:
        print(f"open segment: {name}", file=out)
    if rep.quarantined:
        print(
            f"quarantine: {plural(len(rep.quarantined), 'file')} of damaged bytes in "
            f"{Path(args.store, 'quarantine')}",
            file=out,
        )
    failing = _check_compactor(store, rep.records, out)
    damaged_runs = store._index.damaged()  # noqa: SLF001 - the store's claim index
    for what in sorted(damaged_runs.values()):
        print(f"claim index: {what}; the uploads it held are not found by id "
              "(their records are in their segments)", file=out)
    if rep.findings or damaged_runs:
        print(
            f"jsprof serve check: {plural(len(rep.findings) + len(damaged_runs), 'problem')} "
            "found: readers skip "
            "damaged records; their bytes are kept (copied to quarantine/ before a rewrite)",
            file=sys.stderr,
        )
        return 1
    if failing:
        print(
            "jsprof serve check: the compactor is failing: queries read a growing uncompacted "
            "tail; its error is above and in the collector's log",
            file=sys.stderr,
        )
        return 1
    return 0


def _check_objects(url: str) -> int:
    """`jsprof serve check --store s3://...`: every segment object's records and the
    manifest's parts (`store/objcheck.py`), the compactor's lag, the bucket's bytes.
    Read-only."""
    from ..extras import require

    require("s3", "a store on s3://")
    from ..store import StoreError
    from ..store.errors import about_store
    from ..store.objcheck import check_objects
    from ..store.objects import open_objects

    try:
        rep = check_objects(open_objects(url))
    except StoreError as e:
        raise UsageError(about_store(url, e)) from None
    out = sys.stdout
    print(f"jsprof serve check: {url}: {plural(rep.segments, 'segment object')}, "
          f"{plural(rep.records, 'upload')}", file=out)
    for f in rep.findings:
        print(f"{f.segment}: offset {f.offset}: {f.length} bytes: {f.what}", file=out)
    now = time.time()
    if rep.pending:
        oldest = max(0.0, now - (rep.oldest_pending or now * 1000) / 1000)
        print(f"compactor: {plural(rep.pending, 'upload')} not yet compacted, the oldest "
              f"received {_ago(oldest)} ago", file=out)
    else:
        print("compactor: caught up", file=out)
    failing = _compactor_runs(rep.report, now, out)
    total = sum(b for b, _ in rep.folders.values())
    parts = ", ".join(f"{k} {_size(b)} in {plural(n, 'object')}"
                      for k, (b, n) in sorted(rep.folders.items()))
    print(f"bucket: {_size(total)} in {plural(sum(n for _, n in rep.folders.values()), 'object')}"
          f"{f' ({parts})' if parts else ''}", file=out)
    if rep.compacted:
        print(f"bucket: {_size(total / rep.compacted)} per compacted upload "
              f"({plural(rep.compacted, 'upload')} in the tables)", file=out)
    if rep.findings:
        print(f"jsprof serve check: {plural(len(rep.findings), 'problem')} found: readers "
              "skip damaged records; the objects are left as they are", file=sys.stderr)
        return 1
    if failing:
        print("jsprof serve check: the compactor is failing: queries read a growing "
              "uncompacted tail; its error is above and in the lease holder's log",
              file=sys.stderr)
        return 1
    return 0


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def _compactor_runs(st: dict, now: float, out: object) -> bool:
    """The compactor's last runs from its report (`st`); True when it is failing."""
    from ..store import health

    failing = health.failing(st)
    if failing:
        ok_at = st.get("lastSuccessAt")
        since = f"{_ago(now - ok_at)} ago" if ok_at else "never"
        print(
            f"compactor: failing, {plural(int(st['consecutiveFailures']), 'run')} in a row "
            f"(last success {since}): {st.get('lastError', '?')}",
            file=out,
        )
    elif st.get("lastRunAt"):
        last = "ok" if not st.get("consecutiveFailures") else f"failed: {st.get('lastError')}"
        print(f"compactor: last run {_ago(now - st['lastRunAt'])} ago, {last}; "
              f"{plural(int(st.get('failuresTotal', 0)), 'failed run')} of "
              f"{int(st.get('runsTotal', 0))}", file=out)
    return failing


def _check_compactor(store: object, records: int, out: object) -> bool:
    """The compactor's lag and last runs, and the disk the store takes; True when the
    compactor is failing (its last runs all failed)."""
    from ..store import health

    now = time.time()
    lag = health.compaction_lag(store)
    if lag.pending:
        print(
            f"compactor: {plural(lag.pending, 'upload')} not yet compacted, the oldest "
            f"received {_ago(lag.seconds(now))} ago",
            file=out,
        )
    else:
        print("compactor: caught up", file=out)
    failing = _compactor_runs(health.read_status(store.path), now, out)
    use = health.disk_use(store.path)
    parts = ", ".join(f"{k} {_size(v)} in {plural(use.files[k], 'file')}"
                      for k, v in sorted(use.bytes.items()))
    print(f"disk: {_size(use.total_bytes)} in {plural(use.total_files, 'file')} ({parts})",
          file=out)
    compacted = health.compacted_uploads(store.path)
    if compacted:
        print(f"disk: {_size(use.total_bytes / compacted)} per compacted upload "
              f"({plural(compacted, 'upload')} in the tables)", file=out)
    elif records:
        print(f"disk: {_size(use.total_bytes / records)} per stored upload", file=out)
    return failing


def main_compact(args: argparse.Namespace) -> int:
    from ..store.retention import retire_claims
    from ..store.tables.compact import compact
    from ..store.tables.merge import merge_parts

    if "://" in args.store:
        return _compact_objects(args.store)
    _existing_store(args.store)
    store = _open_store(args.store)
    try:
        stats = compact(store)
        merged = merge_parts(store.path)
        retire_claims(store)  # as the background compactor does: the store's files stay few
    except PermissionError as e:
        raise UsageError(f"--store {args.store}: cannot write its tables ({e.strerror}); "
                         "compact as a user who may write the store") from None
    finally:
        store.close()
    print(f"jsprof serve compact: {plural(stats.uploads, 'upload')} compacted "
          f"({plural(stats.skipped, 'unreadable upload')} skipped), "
          f"{plural(merged.merged, 'part')} merged")
    return 0


def _compact_objects(url: str) -> int:
    """`jsprof serve compact --store s3://...`: one run, under the bucket's lease."""
    from ..extras import require

    require("s3", "a store on s3://")
    from ..store import StoreError
    from ..store.objects import open_objects
    from ..store.objstore import Lease, ObjectCompactor, mirror_dir

    try:
        objects = open_objects(url)
        lease = Lease(objects)
        if not lease.acquire():
            raise UsageError(f"--store {url}: another compactor holds the lease "
                             "(leases/compactor.json); try again later")
        try:
            comp = ObjectCompactor(objects, mirror_dir(objects.url, "compactor"))
            stats = comp.run(lease.acquire)
        finally:
            lease.release()
    except StoreError as e:
        from ..store.errors import about_store

        raise UsageError(about_store(url, e)) from None
    print(f"jsprof serve compact: {plural(stats.uploads, 'upload')} compacted "
          f"({plural(stats.skipped, 'unreadable upload')} skipped, "
          f"{plural(comp.duplicates, 'repeated upload')} dropped)")
    return 0


def _backup_objects(src_url: str, dst_url: str) -> int:
    """`jsprof serve backup` to, from or between object stores: a copy of a store on
    object storage (`objbackup.py`), or its restore from such a copy into an empty one."""
    from ..extras import require

    require("s3", "a store on s3://")
    from ..store import StoreError
    from ..store.errors import about_store
    from ..store.objbackup import copy_store, is_backup
    from ..store.objects import open_objects

    try:
        src = open_objects(src_url)
        if "://" not in src_url:
            if not Path(src_url).is_dir():
                raise UsageError(f"--store {src_url}: no such directory")
            if not is_backup(src):
                raise UsageError(
                    f"--store {src_url}: not a whole backup of a store on object storage "
                    "(no backup.json: a copy that did not finish?); restore from another")
        dst = open_objects(dst_url)
        st = copy_store(src, dst)
    except StoreError as e:
        raise UsageError(about_store(src_url, e)) from None
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        raise UsageError(f"serve backup --store {src_url} --to {dst_url}: {where}"
                         f"{e.strerror or e}") from None
    print(f"jsprof serve backup: {src_url} -> {dst_url}: "
          f"{plural(st.segments, 'segment object')}, {plural(st.parts, 'table part')}, "
          f"{_size(st.bytes)}")
    return 0


def _prune_objects(url: str, age: float, app: str | None) -> int:
    """`jsprof serve prune --store s3://...`: the mark, then the cut under the bucket's
    lease (`store/objprune.py`); while a collector's compactor holds the lease, it makes
    the cut at its next run."""
    from ..extras import require

    require("s3", "a store on s3://")
    from ..store import StoreError
    from ..store.errors import about_store
    from ..store.objects import open_objects
    from ..store.objprune import mark, prune_objects
    from ..store.objstore import Lease, ObjectCompactor, mirror_dir

    try:
        objects = open_objects(url)
        cut = objects.clock() * 1000 - age * 1000
        mark(objects, cut, app)  # from now on no query counts what the cut removes
        lease = Lease(objects)
        if not lease.acquire():
            print(f"jsprof serve prune: {url}: marked; the compactor holding the lease "
                  "(a running collector's) removes the uploads at its next run")
            return 0
        try:
            comp = ObjectCompactor(objects, mirror_dir(objects.url, "compactor"))
            res = prune_objects(comp, cut, app, lease.acquire, marked=True)
        finally:
            lease.release()
    except StoreError as e:
        raise UsageError(about_store(url, e)) from None
    print(f"jsprof serve prune: removed {plural(res.tables_removed, 'upload')} from the "
          f"tables and {plural(res.removed, 'raw record')} ({plural(res.deleted, 'segment object')}"
          f" deleted, {res.rewritten} written anew), kept {res.kept} in the segment objects "
          "it read")
    if res.recent:
        print(f"jsprof serve prune: {plural(res.recent, 'segment object')} of the last "
              "minutes kept whole (their uploads are left out of every query); a later "
              "cut removes them", file=sys.stderr)
    return 0


def main_prune(args: argparse.Namespace) -> int:
    from ..store import retention

    age = parse_duration(args.older_than, "--older-than")
    if "://" in args.store:
        return _prune_objects(args.store, age, args.app)
    _existing_store(args.store)
    store = _open_store(args.store)
    try:
        res = retention.prune(store, time.time() * 1000 - age * 1000, app=args.app)
    finally:
        store.close()
    print(
        f"jsprof serve prune: removed {plural(res.removed, 'upload')}, kept {res.kept} in the "
        "segments it read"
    )
    if res.busy:
        print(
            f"jsprof serve prune: {len(res.busy)} open segment(s) of running collectors were "
            "skipped; they are pruned once closed",
            file=sys.stderr,
        )
    return 0


def main_backup(args: argparse.Namespace) -> int:
    if "://" in args.store or "://" in args.to:
        return _backup_objects(args.store, args.to)
    _existing_store(args.store)
    from ..store import StoreError
    from ..store.backup import backup

    try:
        st = backup(args.store, args.to)
    except StoreError as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        # The file it names may be the store's (unreadable) or the copy's (no room, no right).
        where = f"{e.filename}: " if e.filename else ""
        raise UsageError(f"serve backup --store {args.store} --to {args.to}: {where}"
                         f"{e.strerror or e}; nothing was kept of the copy") from None
    print(
        f"jsprof serve backup: {args.store} -> {args.to}: {plural(st.segments, 'segment')} "
        f"({st.open_segments} still open: finished when the copy is first served), "
        f"{plural(st.files, 'file')}, {_size(st.bytes)}"
    )
    return 0
