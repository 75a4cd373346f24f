"""The segment file format: append-only records, each with a checksummed header and body.

A record is a fixed 40-byte header followed by the upload id (UTF-8), its metadata (JSON) and
the ProfilerTrace JSON compressed with zstd. The header carries its own CRC-32 (so a scan can
trust the lengths without reading bodies) and a CRC-32 of id + meta + body (so a read can
trust the bytes). A segment ends, once its writer closes it, with a trailer: a header with
the trailer magic and no body. A segment without a trailer either has a live writer or was
left by a writer that died; in the second case its tail may be torn, and `tail_state`
finds where the last whole record ends.

Nothing here knows about HTTP or about processes; `store.py` decides who writes where.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from typing import NamedTuple

import zstandard

RECORD_MAGIC = b"JSR1"
TRAILER_MAGIC = b"JSE1"
VERSION = 1
CODEC_NONE = 0
CODEC_ZSTD = 1
CODEC_GZIP = 2  # a client's gzip body kept as received, when nothing in it had to change

# magic, version, codec, id_len, meta_len, body_len, seq, received_at, body_crc
_HEAD = struct.Struct("<4sBBHIIQdI")
_CRC = struct.Struct("<I")
HEADER_SIZE = _HEAD.size + _CRC.size  # 40
MAX_ID_BYTES = 1024
MAX_META_BYTES = 1 << 20
MAX_BODY_BYTES = (1 << 32) - 1

# Level 1: about 4x smaller than the JSON and ~3x faster to write than gzip -6; ingest is
# CPU-bound on parsing, so the store must not add a slow codec on top.
_ZSTD_LEVEL = 1


class SegmentError(Exception):
    """A record failed its checksum or does not parse (not a torn tail: real damage)."""


class RecordHeader(NamedTuple):
    offset: int  # of the header in the segment
    seq: int  # ordinal of the record in its segment, from 0
    upload_id: str
    received_at: float  # epoch ms
    id_len: int
    meta_len: int
    body_len: int
    codec: int
    body_crc: int

    @property
    def end(self) -> int:
        return self.offset + HEADER_SIZE + self.id_len + self.meta_len + self.body_len


class Trailer(NamedTuple):
    offset: int
    count: int  # record numbers used in the segment (the last record's number + 1)
    min_at: float | None = None  # receivedAt range of its records (None: an old trailer)
    max_at: float | None = None
    end: int = 0  # offset just past the trailer
    # Records present when a prune rewrote the segment without some (their numbers are
    # then gaps, so `count` says more than are there); None: as written, no gaps.
    records: int | None = None

    @property
    def size(self) -> int:
        return self.end - self.offset


class Damage(NamedTuple):
    """Bytes of a segment that are not a whole, valid record (see `scan`)."""

    offset: int
    end: int
    tail: bool  # runs to the end of what was scanned: maybe a write in progress, maybe torn


def compress(data: bytes) -> bytes:
    # ZstdCompressor objects are not thread-safe; one per thread via a thread-local would
    # be cleaner, but a fresh one is cheap next to the compression itself.
    return zstandard.ZstdCompressor(level=_ZSTD_LEVEL).compress(data)


def decompress(data: bytes, codec: int) -> bytes:
    if codec == CODEC_NONE:
        return data
    if codec == CODEC_ZSTD:
        return zstandard.ZstdDecompressor().decompress(data)
    if codec == CODEC_GZIP:
        return zlib.decompress(data, 31)
    raise SegmentError(f"unknown codec {codec}")


class Record:
    """An encoded record but for its number, which the writer assigns under its lock."""

    __slots__ = ("codec", "received_at", "body_crc", "id_b", "meta", "body")

    def __init__(
        self, upload_id: str, meta_json: bytes, body: bytes, codec: int, received_at: float
    ) -> None:
        self.id_b = upload_id.encode()
        if not 0 < len(self.id_b) <= MAX_ID_BYTES:
            raise ValueError(f"upload id must be 1 to {MAX_ID_BYTES} bytes of UTF-8")
        if len(meta_json) > MAX_META_BYTES:
            raise ValueError(f"metadata over {MAX_META_BYTES} bytes")
        if len(body) > MAX_BODY_BYTES:
            raise ValueError("trace too large for one record")
        self.codec = codec
        self.received_at = received_at
        self.meta = meta_json
        self.body = body
        self.body_crc = zlib.crc32(body, zlib.crc32(meta_json, zlib.crc32(self.id_b)))

    @property
    def size(self) -> int:
        return HEADER_SIZE + len(self.id_b) + len(self.meta) + len(self.body)

    def parts(self, seq: int) -> list[bytes]:
        """The record's bytes as pieces for one writev (no copy of the body)."""
        head = _HEAD.pack(
            RECORD_MAGIC,
            VERSION,
            self.codec,
            len(self.id_b),
            len(self.meta),
            len(self.body),
            seq,
            self.received_at,
            self.body_crc,
        )
        return [head + _CRC.pack(zlib.crc32(head)), self.id_b, self.meta, self.body]


def make_record(
    upload_id: str,
    meta_json: bytes,
    trace_json: bytes | None,
    received_at: float,
    gzipped: bytes | None = None,
) -> Record:
    """A record for an upload; the body is compressed here, outside any lock.

    `gzipped`, when given, is a gzip stream that inflates to the trace JSON (the client's
    own upload): stored as is instead of compressing again.
    """
    if gzipped is not None:
        return Record(upload_id, meta_json, gzipped, CODEC_GZIP, received_at)
    assert trace_json is not None
    return Record(upload_id, meta_json, compress(trace_json), CODEC_ZSTD, received_at)


def encode_record(
    seq: int, upload_id: str, meta_json: bytes, trace_json: bytes, received_at: float
) -> bytes:
    """One whole record as bytes (tests and tools; the writer uses `make_record`)."""
    return b"".join(make_record(upload_id, meta_json, trace_json, received_at).parts(seq))


_RANGE = struct.Struct("<dd")
NO_RANGE = (float("inf"), float("-inf"))


def encode_trailer(count: int, time_range: tuple[float, float] = NO_RANGE,
                   records: int | None = None) -> bytes:
    """The trailer: the record count, then (as its 16-byte payload) the records' receivedAt
    range, so prune can skip or drop a whole segment without reading its headers.
    `records`: how many are left after a prune rewrite (kept in the header's body-length
    field, 0 in a trailer as written; a reader before this field ignores it)."""
    payload = _RANGE.pack(*time_range)
    head = _HEAD.pack(
        TRAILER_MAGIC, VERSION, CODEC_NONE, 0, len(payload), records or 0, count, 0.0,
        zlib.crc32(payload),
    )
    return head + _CRC.pack(zlib.crc32(head)) + payload


def _parse_header(buf: bytes, offset: int) -> RecordHeader | Trailer | None:
    """The header at the start of `buf`, or None when it is incomplete or fails its CRC."""
    if len(buf) < HEADER_SIZE:
        return None
    head = buf[: _HEAD.size]
    (crc,) = _CRC.unpack_from(buf, _HEAD.size)
    if zlib.crc32(head) != crc:
        return None
    magic, version, codec, id_len, meta_len, body_len, seq, received_at, body_crc = _HEAD.unpack(
        head
    )
    if version != VERSION:
        return None
    if magic == TRAILER_MAGIC:
        if meta_len == 0:  # written before trailers carried a time range
            return Trailer(offset, seq, None, None, offset + HEADER_SIZE)
        payload = buf[HEADER_SIZE : HEADER_SIZE + meta_len]
        if meta_len != _RANGE.size or len(payload) < meta_len or zlib.crc32(payload) != body_crc:
            return None
        lo, hi = _RANGE.unpack(payload)
        return Trailer(offset, seq, lo, hi, offset + HEADER_SIZE + meta_len, body_len or None)
    if magic != RECORD_MAGIC:
        return None
    id_b = buf[HEADER_SIZE : HEADER_SIZE + id_len]
    if len(id_b) < id_len:
        return None
    try:
        upload_id = id_b.decode()
    except UnicodeDecodeError:
        return None
    return RecordHeader(
        offset, seq, upload_id, received_at, id_len, meta_len, body_len, codec, body_crc
    )


def scan(
    fd: int, start: int = 0, end: int | None = None
) -> Iterator[RecordHeader | Trailer | Damage]:
    """Headers of the records in [start, end) of a segment, in order, and what is damaged.

    Bytes that are not a whole record with a valid header are reported as one `Damage`,
    and the scan resyncs on the next valid header (record or trailer magic whose header CRC
    holds), so one flipped bit costs one record, never the rest of the segment. A `Damage`
    with `tail=True` runs to `end`: in a live segment that is a write in progress, in a dead
    one maybe a torn write (`tail_state` decides). Bodies are not read (see `read_record`).
    """
    if end is None:
        end = os.fstat(fd).st_size
    pos = start
    while pos < end:
        buf = os.pread(fd, HEADER_SIZE + MAX_ID_BYTES, pos)
        h = _parse_header(buf, pos)
        if h is not None and h.end <= end:
            yield h
            if isinstance(h, Trailer):
                return
            pos = h.end
            continue
        if h is not None:  # a valid header whose record is not all there (yet)
            yield Damage(pos, end, True)
            return
        nxt = resync(fd, pos + 1, end)
        yield Damage(pos, end if nxt is None else nxt, nxt is None)
        if nxt is None:
            return
        pos = nxt


def resync(fd: int, pos: int, end: int) -> int | None:
    """Offset of the next valid header (record or trailer) in [pos, end), or None."""
    chunk = 1 << 20
    while pos < end:
        buf = os.pread(fd, min(chunk, end - pos) + 3, pos)
        for magic in _next_magics(buf):
            at = pos + magic
            if at >= end:
                break
            h = _parse_header(os.pread(fd, HEADER_SIZE + MAX_ID_BYTES, at), at)
            if h is not None and h.end <= end:
                return at
        pos += chunk
    return None


def _next_magics(buf: bytes) -> Iterator[int]:
    """Offsets in buf where a record or trailer magic starts, in order."""
    i = 0
    while True:
        a = buf.find(RECORD_MAGIC, i)
        b = buf.find(TRAILER_MAGIC, i)
        hits = [x for x in (a, b) if x >= 0]
        if not hits:
            return
        i = min(hits)
        yield i
        i += 1


def read_record(fd: int, h: RecordHeader) -> tuple[bytes, bytes]:
    """(meta_json, trace_json) of a record, checked against its CRC."""
    n = HEADER_SIZE + h.id_len + h.meta_len + h.body_len
    buf = os.pread(fd, n, h.offset)
    if len(buf) < n:
        raise SegmentError(f"record at offset {h.offset} is cut short")
    start = HEADER_SIZE + h.id_len
    id_b = buf[HEADER_SIZE:start]
    meta = buf[start : start + h.meta_len]
    body = buf[start + h.meta_len :]
    crc = zlib.crc32(body, zlib.crc32(meta, zlib.crc32(id_b)))
    if crc != h.body_crc:
        raise SegmentError(f"record at offset {h.offset} fails its checksum")
    try:
        return meta, decompress(body, h.codec)
    except (zstandard.ZstdError, zlib.error) as e:
        raise SegmentError(f"record at offset {h.offset} does not decompress ({e})") from None


def body_ok(fd: int, h: RecordHeader) -> bool:
    try:
        read_record(fd, h)
    except SegmentError:
        return False
    return True


class TailState(NamedTuple):
    keep: int  # bytes to keep: the rest is a provably torn tail
    count: int  # the next record number
    sealed: bool
    damage: list[Damage]  # damaged ranges that are kept (reported, quarantined, not cut)
    records: list[RecordHeader]
    time_range: tuple[float, float]


def tail_state(fd: int) -> TailState:
    """For a segment whose writer is gone: what to keep, and whether it is sealed.

    Only a *provably torn* tail is marked for cutting: the bytes after the last whole record
    when they are shorter than a header, or start with a valid header whose record runs past
    the end of the file, or are all zeros (blocks allocated but never written). A crash can
    leave nothing else behind (records are appended in order, each fsync'd before its
    acknowledgement). Anything else that does not check out, a damaged record in the middle
    or a whole last record whose body fails its CRC, is kept and reported: it may hold an
    acknowledged upload.
    """
    size = os.fstat(fd).st_size
    keep, count, damage, records = 0, 0, [], []
    lo, hi = NO_RANGE
    for h in scan(fd, 0, size):
        if isinstance(h, Trailer):
            return TailState(h.end, h.count, True, damage, records, (lo, hi))
        if isinstance(h, Damage):
            if h.tail and _torn(fd, h.offset, size):
                break
            damage.append(h)
            keep = h.end
            continue
        records.append(h)
        keep, count = h.end, h.seq + 1
        lo, hi = min(lo, h.received_at), max(hi, h.received_at)
    return TailState(keep, count, False, damage, records, (lo, hi))


def _torn(fd: int, offset: int, size: int) -> bool:
    if size - offset < HEADER_SIZE:
        return True
    buf = os.pread(fd, HEADER_SIZE, offset)
    (crc,) = _CRC.unpack_from(buf, _HEAD.size)
    if zlib.crc32(buf[: _HEAD.size]) == crc:
        # A valid header (record or trailer): torn when what it announces is not all there.
        _, _, _, id_len, meta_len, body_len, *_ = _HEAD.unpack_from(buf)
        return offset + HEADER_SIZE + id_len + meta_len + body_len > size
    pos = offset
    while pos < size:
        chunk = os.pread(fd, min(1 << 20, size - pos), pos)
        if chunk.count(0) != len(chunk):
            return False
        pos += len(chunk)
    return True


def trailer_at_end(fd: int) -> Trailer | None:
    """The trailer of a sealed segment, read from its last bytes (no scan), else None."""
    size = os.fstat(fd).st_size
    for n in (HEADER_SIZE + _RANGE.size, HEADER_SIZE):
        if size >= n:
            h = _parse_header(os.pread(fd, n, size - n), size - n)
            if isinstance(h, Trailer) and h.end == size:
                return h
    return None
