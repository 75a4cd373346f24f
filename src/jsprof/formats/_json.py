"""JSON helpers every JSON format shares: the parse, its one-line errors, the GC pause and
how messages name a value's type."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from ..errors import TraceFormatError


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while a parsed document is alive.

    A parse allocates millions of dicts; with the GC on, each young-generation pass walks
    them all (2-3x slower on node-heavy files). Re-enabling right after the parse only
    moves that cost to the next allocation, so the pause must cover the whole read, until
    the document is freed.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_json(data: bytes, source: str) -> Any:
    """orjson.loads with a clear one-line error. Call it inside `gc_paused()`."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        text = str(e).lower()
        if "recursion" in text or "depth limit" in text:
            raise TraceFormatError(
                f"{source}: JSON nesting deeper than 1024 levels; no trace format nests that deep"
            ) from None
        raise TraceFormatError(f"{source}: not valid JSON ({e}); is this a trace file?") from None


def type_name(v: Any) -> str:
    """A JSON value's type as messages name it ("an object", "null", ...)."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(v), "null" if v is None else "a number"
    )


def is_number(v: Any) -> bool:
    """A JSON number: int or float, never a boolean (Python's bool is an int)."""
    return type(v) is int or type(v) is float
