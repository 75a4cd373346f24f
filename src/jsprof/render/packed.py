"""Packed number columns for the viewer page: what a deep recursion repeats costs a few
bytes, not a few bytes per frame.

A column is delta-coded (each value minus the one before), the deltas zigzag'd to
non-negative integers and run-length coded, then written as LEB128 varints in base64:

    token = zigzag(delta) * 2 + (1 if a run follows else 0) [, run length]

A 30,000-deep recursion's frames are runs (depth +1, the same name, x 0, node +1...): its
columns shrink to bytes where raw int32/float64 columns in base64 cost 5-11 bytes a frame.
Milliseconds are packed as whole nanoseconds (1e-6 ms, the precision the page's model has
always been rounded to). The page unpacks them synchronously (flame.js `unpack`): no
asynchronous step before the first view.
"""

from __future__ import annotations

import base64

import numpy as np

NS = 1_000_000  # units per ms of a packed ms column


def _varints(v: np.ndarray) -> bytes:
    """LEB128 of non-negative integers (uint64), vectorised."""
    v = v.astype(np.uint64)
    if not len(v):
        return b""
    nbytes = np.ones(len(v), np.int64)
    rest = v >> np.uint64(7)
    while rest.any():
        more = rest > 0
        nbytes += more
        rest = rest >> np.uint64(7)
    width = int(nbytes.max())
    out = np.zeros((len(v), width), np.uint8)
    cur = v.copy()
    for k in range(width):
        out[:, k] = (cur & np.uint64(0x7F)).astype(np.uint8)
        cur = cur >> np.uint64(7)
    cont = np.arange(width)[None, :] < (nbytes[:, None] - 1)
    out[cont] |= 0x80
    keep = np.arange(width)[None, :] < nbytes[:, None]
    return out[keep].tobytes()


def pack_ints(a: np.ndarray, kind: str = "i") -> str:
    """An integer column (|values| < 2**62) packed as above: "~i<count>~<base64>" (kind
    "m": whole nanoseconds of ms values, which pack_ms writes)."""
    a = np.asarray(a, np.int64)
    head = f"~{kind}{len(a)}~"
    if not len(a):
        return head
    d = np.diff(a, prepend=0)
    z = ((d << 1) ^ (d >> 63)).astype(np.uint64)  # zigzag
    # Runs of one delta: a token with the run bit, then the run's length.
    start = np.r_[True, z[1:] != z[:-1]]
    first = np.nonzero(start)[0]
    length = np.diff(np.r_[first, len(z)])
    tok = (z[first] << np.uint64(1)) | (length > 1).astype(np.uint64)
    runs = length > 1
    # Interleave: each token, and after a run's token its length.
    per = 1 + runs.astype(np.int64)
    pos = np.cumsum(per) - per
    out = np.zeros(int(per.sum()), np.uint64)
    out[pos] = tok
    out[pos[runs] + 1] = length[runs].astype(np.uint64)
    return head + base64.b64encode(_varints(out)).decode("ascii")


def quantize_ms(a: np.ndarray) -> np.ndarray:
    """Milliseconds as the page reads them back from a packed column (to the same double:
    a whole number of ns divided by 1e6), for words the page and Python both print."""
    return np.rint(np.asarray(a, np.float64) * NS) / NS


def pack_ms(a: np.ndarray) -> str:
    """A column of milliseconds packed as whole nanoseconds."""
    return pack_ints(np.rint(np.asarray(a, np.float64) * NS).astype(np.int64), "m")


def unpack(s: str) -> np.ndarray:
    """A packed column's values (int64, or float64 ms for kind "m"): the page's decoder
    (flame.js `unpack`) in Python, for tests and tools."""
    kind, rest = s[1], s[2:]
    n_s, b64 = rest.split("~", 1)
    raw = base64.b64decode(b64)
    vals: list[int] = []
    v = shift = 0
    for b in raw:
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            vals.append(v)
            v = shift = 0
    out: list[int] = []
    acc = k = 0
    while k < len(vals):
        tok = vals[k]
        k += 1
        z = tok >> 1
        d = (z >> 1) ^ -(z & 1)
        run = 1
        if tok & 1:
            run = vals[k]
            k += 1
        for _ in range(run):
            acc += d
            out.append(acc)
    assert len(out) == int(n_s)
    a = np.array(out, np.int64)
    return a / NS if kind == "m" else a
