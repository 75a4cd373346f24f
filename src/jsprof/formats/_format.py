"""What a format is (`Format`) and what readers are shown of an input (`Probe`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, BinaryIO

from ..trace import Recording
from ._json import parse_json

_FIRST_KEY = re.compile(rb'\s*\{\s*"([A-Za-z$_][A-Za-z0-9$_]{0,63})"\s*:')


class Probe:
    """One input as the sniffers and readers see it: its bytes, and, computed only when a
    sniffer asks, the first key of a JSON object and the parsed JSON document.

    Sniffing is cheap by design: a reader whose sniffer can decide from the first bytes
    never makes anyone parse the whole file generically.
    """

    def __init__(self, data: bytes, source: str) -> None:
        self.data = data
        self.source = source

    @cached_property
    def is_json(self) -> bool:
        return self.data[:64].lstrip()[:1] in (b"{", b"[")

    @cached_property
    def first_key(self) -> str | None:
        """The first key of a top-level JSON object, or None."""
        m = _FIRST_KEY.match(self.data, 0, 4096)
        return m[1].decode() if m else None

    @cached_property
    def doc(self) -> Any:
        """The parsed JSON (call inside `gc_paused()`); None when the input is not JSON."""
        return parse_json(self.data, self.source) if self.is_json else None


@dataclass(frozen=True)
class Format:
    name: str
    description: str
    extensions: tuple[str, ...]
    # sniff_head decides from the first bytes alone (no parse); sniff may parse the input.
    # Every reader's sniff_head is tried, in the readers' order, before any sniff.
    sniff_head: Callable[[Probe], bool] | None = None
    sniff: Callable[[Probe], bool] | None = None
    read: Callable[[Probe], Recording] | None = None
    write: Callable[[Recording], bytes] | None = None
    # Optional: the same bytes as `write`, written to an open file as they are made (a big
    # output then needs no buffer its size); `io.save` prefers it for plain files.
    write_file: Callable[[Recording, BinaryIO], None] | None = None
