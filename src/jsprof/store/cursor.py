"""A reader's position in the raw store (`Store.iter_uploads`), kept between runs.

Its own module so that the tables' compactor, which saves one in its manifest, needs
nothing else of the raw store (jsprof.store.store imports the compactor to prune tables)."""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from .errors import StoreError


class Cursor:
    """A position in `iter_uploads`: per segment, how many of its records were consumed.

    Segments grow concurrently, so one offset cannot say where a reader is; a vector of
    per-segment counts can. `dumps`/`loads` keep it between runs (JSON).
    """

    __slots__ = ("last", "positions")

    def __init__(self, positions: Mapping[str, int] | None = None,
                 last: str | None = None) -> None:
        self.positions: dict[str, int] = dict(positions or {})
        # The segment of the record this cursor was yielded after (`iter_uploads`; None
        # when loaded): the compactor notes where each upload came from (`segments` of
        # its uploads part), so that `GET /v1/traces/{id}` on a bucket finds it without a
        # listing of every segment object. Not kept by `dumps`, not compared.
        self.last = last

    def dumps(self) -> str:
        return orjson.dumps(self.positions, option=orjson.OPT_SORT_KEYS).decode()

    @classmethod
    def loads(cls, text: str | bytes) -> Cursor:
        data = orjson.loads(text)
        if type(data) is not dict or not all(
            type(k) is str and type(v) is int and v >= 0 for k, v in data.items()
        ):
            raise StoreError("cursor: expected a JSON object of segment name -> count")
        return cls(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cursor) and self.positions == other.positions

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Cursor({self.positions!r})"


def put_time(name: str) -> int | None:
    """Where segment object `name` sorts among the time-sorted names (epoch ms): a
    time-sorted name's put time (`t<13 digits>-...`), an older jsprof's writer start
    (`<10 digits, s>-...`), by which a prune names its copy of it; None for another name."""
    if len(name) > 14 and name[0] == "t" and name[1:14].isdigit() and name[14] == "-":
        return int(name[1:14])
    if len(name) > 10 and name[:10].isdigit() and name[10] == "-":
        return int(name[:10]) * 1000
    return None


def segment_span(names: list[str]) -> list[str]:
    """[first, last] of the segment names an uploads part came from (its `segments`): the
    least name (an older jsprof's if any: they sort before the time-sorted ones) and the
    latest by `put_time`. Not the greatest name: an older jsprof's writer can start after
    a time-sorted put, and a prune's copy of its object is named by that start, past the
    time-sorted name (objstore.find_upload lists up to the last's `put_time`)."""
    return [min(names), max(names, key=lambda n: (put_time(n) or 0, n))]
