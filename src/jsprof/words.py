"""Words as every command prints them: counts ("1 sample", "2 samples") and names from the
profiled code made safe for a terminal."""

from __future__ import annotations

import re


def plural(n: int, word: str, words: str | None = None) -> str:
    """`n` and its noun: `word` for exactly one, else `words` (default: `word` + "s")."""
    return f"{n} {word}" if n == 1 else f"{n} {words or word + 's'}"


# Characters a terminal acts on or that break a row: C0/C1 controls (ESC starts the escape
# sequences a profiled web page could otherwise write to the user's terminal), line and
# paragraph separators, bidi overrides and other invisible format characters.
_UNSAFE = re.compile(
    "[\\x00-\\x1f\\x7f-\\x9f\\u00ad\\u061c\\u180e\\u200b-\\u200f\\u2028-\\u202e"
    "\\u2060-\\u206f\\ufeff\\ufff9-\\ufffb]"
)
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(m: re.Match[str]) -> str:
    ch = m.group()
    c = ord(ch)
    return _SHORT.get(ch) or (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}")


def printable(text: str | None) -> str:
    """`text` safe for a terminal and on one line. Function names, resource URLs and track
    names come from the profiled code (a web page under `--engine chromium`), so every text
    output passes them through here: control and format characters become visible escapes
    (`\\x1b`, `\\n`, `\\u2028`) as `repr` writes them. JSON and trace outputs keep them."""
    if not text:
        return text or ""
    return _UNSAFE.sub(_escape_char, text)


def printable_lines(text: str | None) -> str:
    """`text` safe for a terminal, its line breaks and tabs kept: for output a web page
    writes (its console, its errors' stacks), which may span lines but must not reach the
    terminal's escape sequences."""
    if not text:
        return text or ""
    return _UNSAFE.sub(lambda m: m.group() if m.group() in "\n\t" else _escape_char(m), text)
