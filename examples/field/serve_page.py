"""Serve examples/field/page.html on http://127.0.0.1:8000 with the header the JS
Self-Profiling API needs (`Document-Policy: js-profiling`) on every page: a demo profiles
every visit. A real site sends it to its sampled sessions only, since the header costs every
page that gets it: jsprof.field's middlewares or the nginx snippet (docs/field.md)."""

import http.server
from functools import partial
from pathlib import Path


class Handler(http.server.SimpleHTTPRequestHandler):
    def end_headers(self) -> None:
        self.send_header("Document-Policy", "js-profiling")
        super().end_headers()


if __name__ == "__main__":
    handler = partial(Handler, directory=str(Path(__file__).parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), handler)
    print("open http://127.0.0.1:8000/page.html")
    server.serve_forever()
