"""Text for the flame files: frame names come from the profiled program, so they are
untrusted and reach an SVG or HTML document only through these (escaped XML/HTML text, or
JSON with `<`, `>`, `&` and U+2028/2029 escaped)."""

from __future__ import annotations

import html
import re
from typing import Any

import orjson

from ..base import visible

_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def clean(s: str) -> str:
    """Replace characters XML cannot carry at all (even escaped) with U+FFFD."""
    return _BAD_CHARS.sub("\ufffd", s)


def function_texts(functions: list[Any]) -> tuple[list[str], list[str]]:
    """Each function's label and location (FunctionKey's), cleaned: once per page for
    every view that words them (frames, model, index), not once per view and node."""
    return [clean(f.label()) for f in functions], [clean(f.location()) for f in functions]


def esc(s: str) -> str:
    """Escape for XML/HTML text and attribute values, bidirectional controls shown as
    escapes (base.visible: a name must not draw reversed)."""
    return html.escape(visible(clean(s)), quote=True)


def script_json(obj: object) -> str:
    """JSON safe inside <script> in HTML and in SVG (XML): no `<`, `>`, `&`, U+2028/9 raw.

    `</script>` cannot close the element early, `<!--` cannot open a comment, `&` cannot
    start an entity in XML, and the two line separators are escaped for old JS parsers.
    """
    data = orjson.dumps(obj).decode()
    return (
        data.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
