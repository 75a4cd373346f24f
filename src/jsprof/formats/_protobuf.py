"""A small protocol-buffers wire codec: what Perfetto's trace packets need, pprof's sniffer
(a file's head only) and the search for where a malformed pprof or OTLP file breaks
(`where_it_breaks`: byte offsets, which the `protobuf` package does not give).

pprof's Profile message itself is read and written with the `protobuf` package
(`_pprof_proto`): measured against it on one Profile message (benchmarks/bench_protobuf.py,
RESULTS.md "pprof wire codec"), this pure-Python codec took 10.2x the package's time to
decode and 7.6x to encode, so pprof moved onto the package (issue 25). Encoding builds
bytes directly; decoding walks fields lazily over a memoryview, so nested messages are
sliced, never copied.

Wire types: 0 varint, 1 fixed 64-bit, 2 length-delimited, 5 fixed 32-bit. int64 values
are two's complement in 10 bytes when negative, as the spec says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..errors import ErrorAt, TraceFormatError

VARINT, I64, LEN, I32 = 0, 1, 2, 5
_MASK64 = (1 << 64) - 1


class WireError(ValueError):
    """Malformed protobuf: `offset` is the byte where decoding failed."""

    def __init__(self, offset: int, problem: str) -> None:
        super().__init__(problem)
        self.offset = offset
        self.problem = problem


# ---- encoding ----------------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= _MASK64  # negative int64 -> two's complement, 10 bytes
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def key(field: int, wire: int) -> bytes:
    return varint((field << 3) | wire)


def uint_field(field: int, n: int) -> bytes:
    """A varint field; proto3 omits zero values."""
    return key(field, VARINT) + varint(n) if n else b""


def bytes_field(field: int, payload: bytes) -> bytes:
    return key(field, LEN) + varint(len(payload)) + payload


def packed(field: int, values: Iterable[int]) -> bytes:
    body = b"".join(varint(v) for v in values)
    return bytes_field(field, body) if body else b""


# ---- decoding ----------------------------------------------------------------------------


def read_varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise WireError(start, "truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & _MASK64, pos
        shift += 7
        if shift >= 70:
            raise WireError(start, "varint longer than 10 bytes")


def signed(n: int) -> int:
    """An int64 decoded as unsigned back to its sign."""
    return n - (1 << 64) if n >= 1 << 63 else n


def fields(
    buf: memoryview, start: int = 0, end: int | None = None, stop: int | None = None
) -> Iterator[tuple]:
    """Yield (field, wire type, value, offset): value is an int, or (start, end) for LEN.

    `stop`: read no tag at or after this offset (sniffers look at a file's head only; a
    LEN field that starts before it is yielded, its bytes unread)."""
    pos = start
    end = len(buf) if end is None else end
    limit = end if stop is None else min(end, stop)
    while pos < limit:
        at = pos
        tag, pos = read_varint(buf, pos, end)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise WireError(at, "field number 0")
        if wire == VARINT:
            value, pos = read_varint(buf, pos, end)
        elif wire == LEN:
            n, pos = read_varint(buf, pos, end)
            if pos + n > end:
                raise WireError(at, f"field {field} is {n} bytes long but runs past its end")
            value = (pos, pos + n)
            pos += n
        elif wire == I64:
            if pos + 8 > end:
                raise WireError(at, "truncated 64-bit field")
            value = int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire == I32:
            if pos + 4 > end:
                raise WireError(at, "truncated 32-bit field")
            value = int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise WireError(at, f"field {field} has wire type {wire}, which is not supported")
        yield field, wire, value, at


def repeated_ints(buf: memoryview, wire: int, value, out: list[int]) -> None:
    """Append a repeated integer field's values: packed (LEN) or one varint."""
    if wire == VARINT:
        out.append(value)
        return
    if wire != LEN:
        raise WireError(0, "expected a varint or packed varints")
    pos, end = value
    if end - pos >= 32:
        out.extend(packed_varints(buf, pos, end).tolist())
        return
    while pos < end:
        v, pos = read_varint(buf, pos, end)
        out.append(v)


def packed_varints(buf: memoryview, start: int, end: int) -> np.ndarray:
    """Decode a run of packed varints at once (uint64): a byte below 0x80 ends a value."""
    b = np.frombuffer(buf[start:end], np.uint8)
    last = np.flatnonzero(b < 0x80)
    if not len(last) or last[-1] != len(b) - 1:
        raise WireError(start, "truncated packed varints")
    first = np.concatenate(([0], last[:-1] + 1))
    if int((last - first).max()) >= 10:
        raise WireError(start, "varint longer than 10 bytes")
    # Each byte's 7 bits shifted by 7 x its place in its value; uint64 wraps like int64.
    place = np.arange(len(b)) - np.repeat(first, last - first + 1)
    parts = (b & 0x7F).astype(np.uint64) << (place.astype(np.uint64) * np.uint64(7))
    return np.add.reduceat(parts, first)


# ---- where a message breaks --------------------------------------------------------------


def where_it_breaks(
    data: bytes,
    source: str,
    kinds: dict[int, tuple[str, Callable[[bytes], object]]],
    *,
    singular: Iterable[int] = (),
    hint: str = "",
) -> TraceFormatError:
    """The error for a message the `protobuf` package refused (it says only "malformed"):
    the top-level field whose bytes break, or whose embedded message does not parse.
    `kinds` maps a top-level field number to its name and its message's parser
    (`Cls.FromString`); a repeated field is named with its index (`sample[3]`), one in
    `singular` without. `hint` ends each message (e.g. "; is the file complete?")."""
    from google.protobuf.message import DecodeError

    err = ErrorAt(source)
    singular = frozenset(singular)
    buf = memoryview(data)
    seen: dict[int, int] = {}
    try:
        for field, wire, value, at in fields(buf):
            i = seen[field] = seen.get(field, -1) + 1
            if field in kinds and wire == LEN:
                name, parse = kinds[field]
                try:
                    parse(bytes(buf[value[0] : value[1]]))
                except DecodeError as e:
                    where = name if field in singular else f"{name}[{i}]"
                    return err(where, f"malformed protobuf in the field at byte {at} ({e}){hint}")
    except WireError as e:
        return err("(top level)", f"malformed protobuf at byte {e.offset} ({e.problem}){hint}")
    return err("(top level)", "malformed protobuf (a field of the wrong wire type)")
