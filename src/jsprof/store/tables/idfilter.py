"""A Bloom filter of an uploads part's ids, kept in the part's Parquet footer (key
`jsprof.ids`), so that `GET /v1/traces/{id}` on a bucket (objstore.find_upload) opens the
id column only of the parts that may hold the id: an id the store never held reads no
part's ids (min/max statistics say nothing of random ids), and its cost no longer grows
with the ids stored.

Written with every uploads part (compaction, merge, a prune's rewrite); a lookup reads a
part's filter from its footer once per process (`may_hold`, cached by path, size and
mtime: parts are immutable) and then tests each id against memory. ID_BITS bits an id,
ID_HASHES probes: ~0.3 % false positives, 1.5 bytes an upload in the footer. A part
without a filter (written by an older jsprof) may hold any id: it is read, as before.

The hash is this module's (FNV-1a over the id's UTF-8 bytes, then splitmix64's
finalizer), computed over a whole column in numpy, so a filter reads the same whatever
the library versions that wrote and read it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

KEY = b"jsprof.ids"
_MAGIC = b"JI1"
ID_BITS = 12
ID_HASHES = 8
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def _hashes(ids: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two 32-bit hashes (h1, odd h2) of each string of `ids` (a pyarrow array or a list)."""
    import pyarrow as pa

    arr = ids if isinstance(ids, pa.Array) else pa.array(ids, pa.string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    arr = arr.cast(pa.large_string())
    n = len(arr)
    _validity, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64)[arr.offset:arr.offset + n + 1]
    data = (np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None
            else np.zeros(0, np.uint8))
    starts, lens = offsets[:-1], np.diff(offsets)
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(int(lens.max()) if n else 0):
            live = np.nonzero(lens > j)[0]
            h[live] = (h[live] ^ data[starts[live] + j].astype(np.uint64)) * _FNV_PRIME
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h & np.uint64(0xFFFFFFFF), (h >> np.uint64(32)) | np.uint64(1)


class Builder:
    """A filter for `rows` ids, added a column at a time (a merge streams its parts)."""

    def __init__(self, rows: int) -> None:
        self.m = max(64, -(-rows * ID_BITS // 64) * 64)  # bits, a multiple of 64
        self.bits = np.zeros(self.m // 8, dtype=np.uint8)

    def add(self, ids: Any) -> None:
        h1, h2 = _hashes(ids)
        if not len(h1):
            return
        k = np.arange(ID_HASHES, dtype=np.uint64)
        pos = ((h1[:, None] + k[None, :] * h2[:, None]) % np.uint64(self.m)).ravel()
        np.bitwise_or.at(self.bits, pos >> np.uint64(3),
                         np.left_shift(1, pos & np.uint64(7)).astype(np.uint8))

    def encode(self) -> bytes:
        return (_MAGIC + bytes([ID_HASHES]) + self.m.to_bytes(4, "little")
                + self.bits.tobytes())


def put(writer: Any, blob: bytes) -> None:
    """Keep filter `blob` in the footer of the part `writer` (a pyarrow ParquetWriter,
    before it closes) writes: in the Parquet file's key-value metadata only, not in the
    Arrow schema it also stores (which would hold it twice, base64'd). A pyarrow before
    17 cannot: its parts have no filter, and lookups read them as before."""
    add = getattr(writer, "add_key_value_metadata", None)
    if add is not None:
        add({KEY: blob})


def encode(ids: Any) -> bytes:
    """The filter of `ids` (a whole part's), as kept in its footer."""
    b = Builder(len(ids))
    b.add(ids)
    return b.encode()


def id_hash(upload_id: str) -> tuple[int, int]:
    """The hashes of one id, computed once for the filters of every part it is tested on."""
    h1, h2 = _hashes([upload_id])
    return int(h1[0]), int(h2[0])


def holds(blob: bytes, h: tuple[int, int]) -> bool:
    """Whether the filter `blob` may hold the id of hashes `h` (True for one it cannot
    read)."""
    if len(blob) < 8 or blob[:3] != _MAGIC:
        return True
    k, m = blob[3], int.from_bytes(blob[4:8], "little")
    if m <= 0 or len(blob) < 8 + m // 8:
        return True
    h1, h2 = h
    for i in range(k):
        p = (h1 + i * h2) % m
        if not blob[8 + (p >> 3)] >> (p & 7) & 1:
            return False
    return True


# Filters read by this process: path -> (size, mtime_ns, filter or None: the part has
# none). Bounded by their bytes (oldest first out): one read again is a footer read.
_cache: dict[str, tuple[int, int, bytes | None]] = {}
_cached_bytes = 0
CACHE_MAX_BYTES = 64 << 20
_lock = threading.Lock()


def part_filter(path: Path) -> bytes | None:
    """The filter in part file `path`'s footer (None: it has none), read once per
    process while the file is the same (size and mtime)."""
    global _cached_bytes
    import pyarrow.parquet as pq

    key = str(path)
    st = os.stat(path)
    with _lock:
        got = _cache.get(key)
    if got is not None and got[:2] == (st.st_size, st.st_mtime_ns):
        return got[2]
    meta = pq.read_metadata(path).metadata or {}
    blob = meta.get(KEY)
    with _lock:
        old = _cache.pop(key, None)
        if old is not None and old[2] is not None:
            _cached_bytes -= len(old[2])
        size = len(blob) if blob is not None else 0
        while _cache and _cached_bytes + size > CACHE_MAX_BYTES:
            gone = _cache.pop(next(iter(_cache)))
            _cached_bytes -= len(gone[2]) if gone[2] is not None else 0
        _cache[key] = (st.st_size, st.st_mtime_ns, blob)
        _cached_bytes += size
    return blob


def may_hold(path: Path, h: tuple[int, int]) -> bool:
    """Whether uploads part `path` may hold the id of hashes `h` (`id_hash`), by its
    filter (True: no filter, or one that does not exclude it)."""
    blob = part_filter(path)
    return True if blob is None else holds(blob, h)
