"""`--url`: the same queries asked of a running `jsprof serve` (read token from the env)."""

from __future__ import annotations

import argparse
import http.client
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import orjson

from ..errors import JsprofError, UsageError
from ..words import printable
from .filters import Filters

TIMEOUT = 600.0
# serve/query.py's headers: what a flame page or an export cannot say in a document.
NOTE_HEADERS = (("damagedRecords", "X-Jsprof-Damaged-Records"),
                ("pendingUploads", "X-Jsprof-Pending-Uploads"))


_COUNT = re.compile(r"[0-9]{1,15}")

# The most of a server's answer read into memory. The server is not trusted (a proxy, a
# server that is not ours): without a cap an endless body fills the client's memory.
# Documents (top, diff, vitals, regressions) are kilobytes to a few megabytes; a flame page
# of a large merge tens of megabytes; an export is a trace file, under the readers' own cap.
MAX_DOC_BYTES = 64 << 20
MAX_PAGE_BYTES = 1 << 30
MAX_ERROR_BYTES = 64 << 10


def _count(v: str | None) -> int:
    """A header's count; 0 when absent (an older collector) or not a small number. ASCII
    digits only: str.isdigit() also says yes to "\u00b2" (a latin-1 header byte), which
    int() refuses."""
    return int(v) if v is not None and _COUNT.fullmatch(v) else 0


def note_count(v: object) -> int:
    """A count from a server's JSON document (`damagedRecords`, `pendingUploads`): the
    server is not trusted, so anything but a whole number in [0, 10**15) is no count, never
    text printed on the user's terminal."""
    return v if type(v) is int and 0 <= v < 10**15 else 0


def filter_params(f: Filters) -> list[tuple[str, str]]:
    out = [("app", f.app)]
    for k in ("release", "route", "env"):
        v = getattr(f, k)
        if v is not None:
            out.append((k, v))
    for k in ("since", "until"):
        v = getattr(f, k)
        if v is not None:
            out.append((k, repr(v)))  # epoch ms: the server parses numbers as such
    out += [("where", f"{k}={v}") for k, v in f.where]
    if f.during is not None:
        out.append(("during", f.during))
    if f.slower_than is not None:
        out.append(("slower_than", repr(f.slower_than)))
    if f.target is not None:
        out.append(("target", f.target))
    if f.exclude_idle:
        out.append(("exclude_idle", "1"))
    out += [("url_rule", r) for r in f.url_rules]
    return out


class Remote:
    def __init__(self, url: str) -> None:
        u = urllib.parse.urlparse(url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise UsageError(f"--url {url!r}: expected http://HOST:PORT")
        self.base = url.rstrip("/")
        # The last answer's store notes, from its headers (flame pages and exports carry
        # them there, having no JSON document): {"damagedRecords", "pendingUploads"}.
        self.notes: dict[str, int] = {}

    def _token(self, env: str) -> str:
        tok = os.environ.get(env)
        if not tok:
            raise UsageError(f"--url needs the token in the environment variable {env}")
        return tok

    def _request(self, method: str, path: str, params: list[tuple[str, str]],
                 token_env: str = "JSPROF_READ_TOKEN", body: bytes | None = None,
                 limit: int = MAX_DOC_BYTES) -> bytes:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        req = urllib.request.Request(url, data=body, method=method, headers={
            "Authorization": f"Bearer {self._token(token_env)}",
            "Accept": "application/json",
        })
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                self.notes = {k: _count(resp.headers.get(h)) for k, h in NOTE_HEADERS}
                data = resp.read(limit + 1)
                if len(data) > limit:
                    raise JsprofError(
                        f"--url {self.base}: {path} answered more than {limit >> 20} MiB "
                        "(not a jsprof serve, or narrow the query with --since/--release)")
                return data
        except urllib.error.HTTPError as e:
            raw = e.read(MAX_ERROR_BYTES)
            try:
                msg = orjson.loads(raw).get("error") or raw.decode("utf-8", "replace")
            except (orjson.JSONDecodeError, AttributeError):
                msg = raw.decode("utf-8", "replace")[:300]
            err = UsageError if e.code in (400, 401, 403, 404, 422) else JsprofError
            # The server's words: on the user's terminal only as visible escapes.
            raise err(f"{self.base}{path}: {e.code} {printable(str(msg))[:300]}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise JsprofError(f"--url {self.base}: cannot connect ({reason})") from None
        except http.client.HTTPException as e:  # a header line over 64 KiB, 100+ headers
            raise JsprofError(
                f"--url {self.base}: not an answer of jsprof serve ({printable(str(e))[:200]})"
            ) from None

    def _doc(self, path: str, params: list[tuple[str, str]], method: str = "GET",
             **kw: Any) -> dict:
        """A JSON document the server answered; a one-line error when it is none."""
        raw = self._request(method, path, params, **kw)
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            doc = None
        if not isinstance(doc, dict):
            raise JsprofError(f"--url {self.base}: {path} answered no JSON object "
                              "(not a jsprof serve?)")
        return doc

    def _page(self, path: str, params: list[tuple[str, str]]) -> str:
        """A flame page (HTML or SVG) the server answered: UTF-8 text, else one line."""
        try:
            return self._request("GET", path, params, limit=MAX_PAGE_BYTES).decode("utf-8")
        except UnicodeDecodeError:
            raise JsprofError(f"--url {self.base}: {path} answered no UTF-8 page "
                              "(not a jsprof serve?)") from None

    def vitals(self, f: Filters) -> dict:
        params = filter_params(f) + [("format", "json")]
        return self._doc("/v1/query/vitals", params)

    def interactions(self, f: Filters, n: int | None, functions: int) -> dict:
        params = filter_params(f) + [("format", "json"), ("functions", str(functions))]
        params.append(("top", "all" if n is None else str(n)))
        return self._doc("/v1/query/interactions", params)

    def top(self, f: Filters, n: int | None) -> dict:
        params = filter_params(f) + [("format", "json")]
        params.append(("top", "all" if n is None else str(n)))
        return self._doc("/v1/query/top", params)

    def flame(self, f: Filters, fmt: str, max_nodes: int) -> str:
        params = filter_params(f) + [("format", fmt), ("max_nodes", str(max_nodes))]
        return self._page("/v1/query/flame", params)

    def diff(self, args: argparse.Namespace, f: Filters, fmt: str | None
             ) -> tuple[dict, str | None]:
        params = filter_params(f) + [("base", args.base), ("new", args.new)]
        params += [("fail_if", r) for r in args.fail_if]
        params += [("min_traces", str(args.min_traces)), ("min_samples", str(args.min_samples)),
                   ("resamples", str(args.resamples)),
                   ("top", "all" if args.top is None else str(args.top))]
        if args.exact_resources:
            params.append(("exact_resources", "1"))
        doc = self._doc("/v1/query/diff", params + [("format", "json")])
        page = None
        if fmt is not None:
            page = self._page("/v1/query/diff", params + [("format", f"flame-{fmt}")])
        return doc, page

    def regressions(self, f: Filters, by: str, min_change: float, min_traces: int,
                    min_samples: int, min_share: float = 0.5) -> dict:
        params = filter_params(f) + [
            ("by", by), ("min_change", repr(min_change)), ("min_traces", str(min_traces)),
            ("min_samples", str(min_samples)), ("min_share", repr(min_share))]
        return self._doc("/v1/query/regressions", params)

    def recording(self, f: Filters) -> Any:
        from ..formats import read_any
        from ..io import MAX_INPUT_BYTES

        data = self._request("GET", "/v1/query/export", filter_params(f),
                             limit=MAX_INPUT_BYTES)
        return read_any(data, f"{self.base}/v1/query/export")

    def upload_sourcemaps(self, app: str, release: str, items: list[str],
                          notes: list[str] | None = None) -> list[str]:
        from .sourcemaps import _map_files, with_line_starts, with_sources

        names = []
        for p in _map_files(items):
            doc = self._doc(
                "/v1/sourcemaps", [("app", app), ("release", release), ("name", p.name)],
                "POST", token_env="JSPROF_ADMIN_TOKEN",
                # at most the collector's limit on a map's body (serve/query.py MAX_BODY)
                body=with_line_starts(p, with_sources(p, p.read_bytes(), notes, limit=64 << 20),
                                      notes, limit=64 << 20),
            )
            stored = doc.get("stored")
            # The server's name for it, printed: a string, as visible escapes.
            names.append(printable(stored)[:300] if isinstance(stored, str) else p.name)
        return names
