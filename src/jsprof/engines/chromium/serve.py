"""The loopback HTTP server that serves a local page or script to Chromium.

A local `.html` file is served from a server rooted at its folder (so relative scripts,
workers and modules load as they would from a web server); a `.js`/`.mjs` file gets a
generated blank page that loads it with `<script src>` (`type=module` for `.mjs`), so it
runs before `load`. The server binds 127.0.0.1 on a random port, serves only files under
its root, never lists folders, and sends `Cache-Control: no-store`; `jsprof run` adds
`Document-Policy: js-profiling` so the page may use the browser's own `Profiler`.

The port is random, so in a recording a served file is named by its `file://` URL
(`PageServer.file_url`), as Node and QuickJS name a local script: two recordings of one
page then share their resources (and `diff` matches them).
"""

from __future__ import annotations

import html
import http.server
import os
import re
import threading
import urllib.parse
from pathlib import Path
from typing import Any

# Not in the file system: a name a user's folder will not have.
GENERATED_PAGE = "/__jsprof__/page.html"
_TYPES = {
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".cjs": "text/javascript",
    ".json": "application/json",
    ".map": "application/json",
    ".wasm": "application/wasm",
    ".html": "text/html; charset=utf-8",
    ".htm": "text/html; charset=utf-8",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}


def script_page(script_name: str, module: bool) -> bytes:
    src = html.escape("/" + urllib.parse.quote(script_name), quote=True)
    kind = ' type="module"' if module else ""
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8"><title>jsprof</title></head>'
        f'<body><script{kind} src="{src}"></script></body></html>\n'
    ).encode()


class _Handler(http.server.SimpleHTTPRequestHandler):
    server: PageServer  # type: ignore[assignment]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib's name
        pass  # the page's requests are not the user's output

    def end_headers(self) -> None:
        for k, v in self.server.headers.items():
            self.send_header(k, v)
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def guess_type(self, path: str | os.PathLike[str]) -> str:
        ext = os.path.splitext(os.fspath(path))[1].lower()
        return _TYPES.get(ext) or super().guess_type(path)

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(404, "no listing")
        return None

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == GENERATED_PAGE and self.server.page is not None:
            body = self.server.page
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


class PageServer(http.server.ThreadingHTTPServer):
    """Serves `root` on 127.0.0.1:<random>; `page` is the generated page, if any."""

    daemon_threads = True

    def __init__(
        self,
        root: str,
        page: bytes | None = None,
        headers: dict[str, str] | None = None,
        script: str | None = None,
    ) -> None:
        self.root = os.path.abspath(root)
        self.page = page
        self.script = script  # the .js/.mjs the generated page loads (its file names it)
        self.headers = dict(headers or {})

        def handler(*args: Any, **kw: Any) -> _Handler:
            return _Handler(*args, directory=self.root, **kw)

        super().__init__(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self.serve_forever,
            kwargs={"poll_interval": 0.1},
            daemon=True,
            name="jsprof-page-server",
        )
        self._thread.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A tab closed mid-response (BrokenPipe) is normal here, and the page's server
        # is not the user's program: its errors must not reach the user's stderr.
        pass

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def url(self, path: str) -> str:
        return self.origin + path

    def _origins(self) -> tuple[str, ...]:
        # The same server by name: a test page loads an out-of-process iframe from
        # `localhost` (another site to Chromium).
        port = self.server_address[1]
        return (f"http://127.0.0.1:{port}", f"http://localhost:{port}")

    def file_url(self, url: str) -> str:
        """The `file://` URL (of the real path, as `trace.normalise_resource` spells a
        local script) of the file this server serves at `url`; the generated page is
        named by its script. Any other URL, or a path outside the root (never served),
        comes back unchanged. Query and fragment are not part of a file's name. A `blob:`
        URL the page made (a worker from a Blob) is of the page's origin: that origin is
        spelled by the served folder's `file://` URL (blob:file:///app/UUID), so it does
        not carry the server's random port."""
        if url.startswith("blob:"):
            for origin in self._origins():
                if url.startswith("blob:" + origin + "/"):
                    return "blob:" + Path(os.path.realpath(self.root)).as_uri() + url[
                        len("blob:" + origin):]
            return url
        for origin in self._origins():
            if url.startswith(origin + "/"):
                break
        else:
            return url
        path = url[len(origin) :].split("#", 1)[0].split("?", 1)[0]
        if path == GENERATED_PAGE and self.script is not None:
            return Path(os.path.realpath(self.script)).as_uri()
        rel = urllib.parse.unquote(path).lstrip("/")
        full = os.path.normpath(os.path.join(self.root, rel))
        if full != self.root and not full.startswith(self.root + os.sep):
            return url
        return Path(os.path.realpath(full)).as_uri()

    def file_urls_in(self, text: str) -> str:
        """`text` (an error's stack) with each served URL in it spelled by `file_url`."""
        ports = "|".join(re.escape(o) for o in self._origins())
        return re.sub(rf"(?:{ports})/[^\s()\[\]'\"<>]*", self._sub, text)

    def _sub(self, m: re.Match[str]) -> str:
        # A stack frame's `url:line:col`: the position stays beside the renamed file.
        whole = m.group(0)
        pos = re.search(r"(?::\d+)+$", whole)
        tail = pos.group(0) if pos else ""
        return self.file_url(whole[: len(whole) - len(tail)]) + tail

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(2.0)


def serve_target(path: str, headers: dict[str, str] | None = None) -> tuple[PageServer, str]:
    """Serve a local .html/.js/.mjs file; returns the server and the URL to open."""
    folder, name = os.path.split(os.path.abspath(path))
    ext = os.path.splitext(name)[1].lower()
    if ext in (".html", ".htm"):
        srv = PageServer(folder, headers=headers)
        return srv, srv.url("/" + urllib.parse.quote(name))
    srv = PageServer(
        folder,
        page=script_page(name, module=ext == ".mjs"),
        headers=headers,
        script=os.path.join(folder, name),
    )
    return srv, srv.url(GENERATED_PAGE)
