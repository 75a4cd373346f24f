"""Serve examples/field/page.html on http://127.0.0.1:8000 with the header the JS
Self-Profiling API needs (`Document-Policy: js-profiling`); any static server that can add a
response header does the same (nginx: `add_header Document-Policy js-profiling;`)."""

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
