"""Where a function's lines are in its source text: the function (tree-sitter) at a frame's
position, for the viewer's source view. Pure: the text is given, nothing is read here."""

from __future__ import annotations

import re
from typing import Any

from .sourcemap import _FUNCTION_NODES, _parse

# An HTML page's scripts: their bodies are kept, everything else (markup) becomes spaces,
# so lines and columns stay the page's own and the parser sees JavaScript only.
_SCRIPT = re.compile(r"(<script\b[^>]*>)(.*?)(</script\s*>)", re.IGNORECASE | re.DOTALL)
_NOT_NEWLINE = re.compile(r"[^\n]")


def script_text(text: str, resource: str) -> str:
    """`text` as JavaScript: an .html/.htm page's inline scripts in place, the rest blank."""
    path = resource.split("#", 1)[0].split("?", 1)[0].lower()
    if not path.endswith((".html", ".htm")):
        return text
    out, pos = [], 0
    for m in _SCRIPT.finditer(text):
        out.append(_NOT_NEWLINE.sub(" ", text[pos : m.start(2)]))
        out.append(m.group(2))
        pos = m.end(2)
    out.append(_NOT_NEWLINE.sub(" ", text[pos:]))
    return "".join(out)


class SourceFile:
    """One source's lines and, parsed on first use, its syntax tree."""

    def __init__(self, text: str, resource: str) -> None:
        self.lines = text.split("\n")
        self._resource = resource
        self._text = text
        self._tree: Any = False  # not parsed yet

    def function_lines(
        self, line: int | None, column: int | None, named: bool = True
    ) -> tuple[int, int] | None:
        """(first, last) 1-based lines of the function whose frame is at `line`:`column`
        (engines point at its `function` keyword, name or parameters); None for a position
        in no function (top-level code) or a source that does not parse there. A frame
        with no name (`named` False) at a function's first character is taken for the
        script's own code, which starts there too (at 1:1)."""
        span = self.function_span(line, column, named)
        return None if span is None else (span[0][0], span[1][0])

    def function_span(
        self, line: int | None, column: int | None, named: bool = True
    ) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """As `function_lines`, with columns: ((line, column), (line, column)) of the
        function's first character and of the one after its last, 1-based lines and
        columns in characters (a minified script's functions share its long lines: the
        columns say where on them each one is)."""
        if not line or line > len(self.lines):
            return None
        if self._tree is False:
            self._tree = _parse(script_text(self._text, self._resource))
        if self._tree is None:
            return None
        row = line - 1
        # tree-sitter counts columns in bytes, frames in characters of the line
        col = len(self.lines[row][: max((column or 1) - 1, 0)].encode("utf-8"))
        node = self._tree.root_node.descendant_for_point_range((row, col), (row, col))
        # named: the keyword token `function` has that type too
        while node is not None and not (node.is_named and node.type in _FUNCTION_NODES):
            node = node.parent
        if node is None or (not named and tuple(node.start_point) == (row, col)):
            return None
        (r0, c0), (r1, c1) = node.start_point, node.end_point
        return (r0 + 1, self._chars(r0, c0) + 1), (r1 + 1, self._chars(r1, c1) + 1)

    def _chars(self, row: int, byte_col: int) -> int:
        """A tree-sitter column (bytes of the line) in characters."""
        text = self.lines[row] if row < len(self.lines) else ""
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))
