"""The scripts the flame files inline (package data beside this package: render/*.js),
and the Content-Security-Policy that lets only them run."""

from __future__ import annotations

import base64
import functools
import hashlib
from pathlib import Path

# The JavaScript is package data of render/ (pyproject's "render/*.js").
JS_DIR = Path(__file__).resolve().parent.parent


@functools.cache
def flame_script() -> str:
    """The viewer page's script (`flame.js`, package data), inlined into every page."""
    return (JS_DIR / "flame.js").read_text(encoding="utf-8")


# The viewer's modules, each its own <script> before flame.js (which uses them): the call
# tree's columns and sums, the transforms, and the Bottom-up and Call tree tables.
VIEWER_MODULES = ("viewer_tree.js", "viewer_transforms.js", "viewer_tables.js")


@functools.cache
def viewer_modules() -> tuple[str, ...]:
    """The texts of VIEWER_MODULES (package data), inlined into every page."""
    return tuple((JS_DIR / n).read_text(encoding="utf-8") for n in VIEWER_MODULES)


@functools.cache
def svg_script() -> str:
    """The SVG picture's script (`flame_svg.js`: zoom, search, details over its elements)."""
    return (JS_DIR / "flame_svg.js").read_text(encoding="utf-8")


def page_csp(kind: str, fetches: bool = False) -> str:
    """The Content-Security-Policy of a flame file of this kind ("html" or "svg"): only its
    own script runs (pinned by hash), no network. The HTML page carries it in a <meta>; an
    SVG cannot, so whoever serves one sends it as a header (`jsprof serve` does).
    `fetches`: a page served by the collector that reads a view from its own origin when
    the view is opened (the dashboard's merged page: its Time view)."""
    scripts = (*viewer_modules(), flame_script()) if kind == "html" else (svg_script(),)
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
        for s in scripts)
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src {hashes}" + ("; connect-src 'self'" if fetches else "")
    )
