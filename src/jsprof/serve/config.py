"""The collector's settings: one plain object built by serve/cli.py, read by the app.

Stdlib only: `jsprof --help` imports this module's package without Starlette.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..textfiles import read_secret_file

MiB = 1 << 20
TOKEN_FILE = "read-token"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(|b|k|kb|kib|m|mb|mib|g|gb|gib)\s*$", re.I)
_SIZE_MULT = {"": 1, "b": 1, "k": 1024, "m": MiB, "g": 1 << 30}


@dataclass
class Limits:
    max_body: int = 8 * MiB  # bytes on the wire
    max_decompressed: int = 64 * MiB  # bytes after Content-Encoding is undone
    max_samples: int = 200_000
    max_depth: int = 1024  # frames in the deepest stack
    max_meta: int = 64 * 1024  # bytes of client metadata (JSON)
    max_name: int = 1024  # characters of a function name (longer ones are cut)
    max_url: int = 2048  # characters of a resource URL or a route (cut)
    max_label: int = 128  # characters of a release or env (refused)


@dataclass
class ServeConfig:
    store: str = "jsprof-store"
    apps: dict[str, str] = field(default_factory=dict)  # name -> ingest key
    origins: dict[str, list[str]] = field(default_factory=dict)  # name -> allowed origins
    read_token: str = ""
    admin_token: str | None = None
    # May read /metrics and nothing else (the read token may too): serve/metrics.py
    metrics_token: str | None = None
    rate_limit: float | None = None  # uploads per second per app (per worker process)
    keep_query: bool = False
    retention_s: float | None = None
    access_log: bool = False
    limits: Limits = field(default_factory=Limits)
    workers: int = 1
    read_timeout: float = 10.0  # headers within it; a body never stalls longer
    body_timeout: float = 120.0  # a whole body
    max_connections: int = 1000  # open connections per worker process
    forwarded_allow_ips: str | None = None  # proxies whose X-Forwarded-* are believed
    # Seconds between background compactions (one compactor process per store, whatever
    # the workers; store/background.py); 0: none (compact elsewhere, e.g. `jsprof fleet`).
    compact_every: float = 5.0
    # Seconds before a compactor process that died is started again, doubled for each death
    # in a row up to 60 s (store/background.py; on an object store, a fixed wait).
    compactor_restart_s: float = 2.0
    # New uploads (not compacted, not read by this worker before) one query reads at
    # most; None: `store.tables.view.TAIL_NEW_MAX`. The rest are its pendingUploads.
    query_new_uploads: int | None = None
    # Seconds raw segments are kept once compacted (store/retention.py); None: for ever.
    keep_raw_s: float | None = 7 * 86400.0
    # OTLP/HTTP profiles endpoint every stored upload is also pushed to (serve/forward.py)
    forward: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        d = json.loads(text)
        d["limits"] = Limits(**d["limits"])
        return cls(**d)


def parse_duration(text: str, what: str) -> float:
    """`30d`, `12h`, `90m`, `45s` -> seconds."""
    m = _DURATION.match(text)
    if not m:
        raise UsageError(f"{what}: {text!r} is not a duration; use e.g. 30d, 12h, 90m or 45s")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def parse_size(text: str, what: str) -> int:
    """`8MiB`, `64m`, `1048576` -> bytes."""
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"{what}: {text!r} is not a size; use e.g. 8MiB, 512KiB or 1048576")
    size = int(float(m.group(1)) * _SIZE_MULT[m.group(2).lower()[:1]])
    if size <= 0:
        # A limit of 0 bytes refuses every upload: a collector that takes nothing.
        raise UsageError(f"{what}: {text!r} is no room for an upload; use e.g. 8MiB")
    return size


def parse_rate(text: str) -> float:
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|m|h)\s*$", text)
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"--rate-limit: {text!r} is not a rate; use e.g. 50/s or 600/m")
    return float(m.group(1)) / _UNIT_S[m.group(2)]


_APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def parse_apps(items: list[str] | list[tuple[str, str]]) -> dict[str, str]:
    """NAME:KEY items, each bare (from --app) or as (where it came from, item): a mistake
    names its place (`--app-file apps.txt line 3`, `$JSPROF_APPS`), not an --app the user
    never gave."""
    apps: dict[str, str] = {}
    for entry in items:
        where, item = entry if isinstance(entry, tuple) else ("--app", entry)
        name, sep, key = item.partition(":")
        if not sep or not key or not _APP_NAME.match(name):
            raise UsageError(
                f"{where} {item!r}: expected NAME:KEY "
                "(NAME of letters, digits, . _ -; a non-empty KEY)"
            )
        if name in apps:
            raise UsageError(f"{where}: app {name} given twice")
        apps[name] = key
    return apps


def parse_origins(items: list[str], apps: dict[str, str]) -> dict[str, list[str]]:
    origins: dict[str, list[str]] = {}
    for item in items:
        name, sep, origin = item.partition("=")
        if not sep or name not in apps:
            known = ", ".join(sorted(apps)) or "none"
            raise UsageError(
                f"--allow-origin {item!r}: expected NAME=ORIGIN for an app given with --app "
                f"(apps: {known})"
            )
        origin = origin.rstrip("/")
        if origin != "*" and not re.match(r"^https?://[^/?#\s]+$", origin):
            raise UsageError(
                f"--allow-origin {item!r}: ORIGIN is scheme://host[:port] "
                "(e.g. https://shop.example) or *"
            )
        origins.setdefault(name, []).append(origin)
    return origins


def _read_token_file(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except PermissionError:
        raise UsageError(f"{path}: permission denied reading the read token") from None
    if not token:
        raise UsageError(f"{path}: empty; delete it to have a new token generated")
    return token


CMDLINE_WARNING = (
    "jsprof serve: warning: {flag} on the command line is readable by every user of this "
    "machine (/proc/PID/cmdline, ps); use {flag}-file FILE or ${env} instead"
)


def resolve_read_token(
    given: str | None, store: Path, file: str | None = None
) -> tuple[str, str | None]:
    """(token, the file it is kept in or None): --read-token-file, else --read-token (which
    warns; given on the command line, it is what the user asked for this run), else
    $JSPROF_READ_TOKEN, else one generated once into the store, mode 0600."""
    if file:
        return read_secret_file(file, "--read-token-file"), None
    if given:
        return given, None
    env = os.environ.get("JSPROF_READ_TOKEN")
    if env:
        return env, None
    path = store / TOKEN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_token_file(path), str(path)
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
        f.flush()
        os.fsync(f.fileno())
    return token, str(path)
