"""Which uploads a query covers: the contract's filters, parsed once for every engine."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field, replace
from datetime import datetime

from ..errors import UsageError

_REL = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d|w)$")
_UNIT_MS = {"s": 1e3, "m": 60e3, "h": 3600e3, "d": 86400e3, "w": 7 * 86400e3}


def parse_time(text: str, option: str, now_ms: float | None = None) -> float:
    """`7d`/`12h`/`30m` (that long before now) or an ISO time -> epoch ms."""
    now = time.time() * 1000.0 if now_ms is None else now_ms
    s = text.strip()
    try:
        ms = float(s)  # epoch ms, as `--url` sends it
    except ValueError:
        pass
    else:
        # float() also reads `nan`, `inf` and 1e999: no time, and NaN compares false with
        # every receivedAt, so `--since nan` would silently match nothing (or everything).
        if not math.isfinite(ms):
            raise UsageError(
                f"{option} {text[:40]!r}: not a time; use epoch ms, an ISO time "
                "(2026-11-30T12:00Z) or an age like 7d, 12h, 30m"
            )
        return ms
    m = _REL.match(s)
    if m:
        return now - float(m[1]) * _UNIT_MS[m[2]]
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{option} {text!r}: expected an ISO time (2026-11-30T12:00Z) or an age like "
            "7d, 12h, 30m"
        ) from None
    if dt.tzinfo is None:
        from datetime import UTC

        dt = dt.replace(tzinfo=UTC)  # a time without zone is UTC, as receivedAt is
    return dt.timestamp() * 1000.0


def glob_regex(pattern: str) -> str:
    """A route GLOB as a regex both engines run alike: `*` any run, `?` one character."""
    out = []
    for ch in pattern:
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return "".join(out)


@dataclass(frozen=True)
class Filters:
    app: str
    release: str | None = None
    route: str | None = None  # a GLOB
    env: str | None = None
    since: float | None = None  # epoch ms, inclusive
    until: float | None = None  # epoch ms, exclusive
    where: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    # --during interaction|long-frame|load: only samples inside those windows of the
    # client's timeline (fleet/during.py); slower_than: their threshold in ms (None: the
    # default of the kind, `timeline.DEFAULT_SLOWER_THAN`)
    during: str | None = None
    slower_than: float | None = None
    # --target: with --during interaction, only the interactions on this target (the
    # client's selector, exactly as `fleet interactions` lists it)
    target: str | None = None
    # --exclude-idle: samples with no JavaScript that are (idle) or (program) are left out
    # (query.without_idle): a mostly idle page load filled the merged views with waiting.
    exclude_idle: bool = False
    # --url-rule: how script URLs are named across releases (`fleet.releases`; () the
    # default rule, "none" drops what came before, REGEX=REPL adds a substitution)
    url_rules: tuple[str, ...] = ()
    # scripts (as the identity rule names them) read without their source maps: set by a
    # comparison across releases where some release has no map for them
    # (`release.one_sided_maps`), never by a user
    unmapped: frozenset[str] = frozenset()

    def with_side(self, spec: str, option: str) -> Filters:
        """`release=A` (or `route=/x*,env=prod`, any meta key): this filter set narrowed."""
        f = self
        extra = list(self.where)
        for part in spec.split(","):
            key, eq, value = part.partition("=")
            key = key.strip()
            if not eq or not key:
                raise UsageError(
                    f"{option} {spec!r}: expected KEY=VALUE pairs like release=1.4.2 "
                    "(or route=/cart*,env=prod)"
                )
            if key in ("release", "route", "env"):
                f = replace(f, **{key: value})
            elif key in ("since", "until"):
                f = replace(f, **{key: parse_time(value, f"{option} {key}=")})
            elif key == "app":
                f = replace(f, app=value)
            else:
                extra.append((key, value))
        return replace(f, where=tuple(extra))

    def to_params(self) -> dict[str, object]:
        return {
            "app": self.app, "release": self.release, "route": self.route, "env": self.env,
            "since": self.since, "until": self.until, "where": [list(w) for w in self.where],
            "during": self.during, "slowerThan": self.slower_than, "target": self.target,
            "excludeIdle": self.exclude_idle, "urlRules": list(self.url_rules),
        }


def parse_where(items: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for i, item in enumerate(items):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(
                f"--where {item!r} (number {i + 1}): expected KEY=VALUE, e.g. --where "
                "country=DE"
            )
        out.append((key.strip(), value))
    return tuple(out)


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def where_number(value: str) -> float | None:
    """`--where KEY=VALUE`'s VALUE as the number a meta number must equal (float64), or
    None when VALUE is not a JSON number."""
    if not _JSON_NUMBER.fullmatch(value):
        return None
    x = float(value)
    return x if x == x and abs(x) != float("inf") else None


def meta_matches(meta: dict, key: str, value: str, num: float | None) -> bool:
    """Whether an upload's meta has `key` equal to VALUE: the one rule both engines apply.

    A string equals VALUE exactly; a number equals VALUE read as a number, both as float64
    (`1.5e300`, `1.5e+300` and `15e299` are one value, whatever spelling the meta or an
    engine prints); true, false and null are those words; an object or an array, or a key
    the meta does not have, never matches."""
    if key not in meta:
        return False
    v = meta[key]
    t = type(v)
    if t is str:
        return v == value
    if t is bool:
        return value == ("true" if v else "false")
    if v is None:
        return value == "null"
    if t in (int, float):
        try:
            return num is not None and float(v) == num
        except OverflowError:  # an integer beyond float64: no VALUE can equal it
            return False
    return False
