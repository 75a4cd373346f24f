"""Sniffing is cheap (issue 15): telling a file's format reads only its first few KB.

Each file kind is a 200 MB buffer whose first `HEAD` bytes are a real file's first bytes
(written by jsprof from a real `node --cpu-prof` profile) and whose rest is mapped with no
access at all (mprotect PROT_NONE): a sniffer that reads, copies or parses past the head
kills the process with SIGSEGV. The detection runs in a child process, so such a crash
fails the test with the format's name instead of taking pytest down.
"""

from __future__ import annotations

import gzip
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jsprof
from jsprof.formats import FORMATS, READERS

DATA = Path(__file__).parent / "data"
HEAD = 8192  # bytes a sniffer may look at (two pages)
SIZE = 200 * 2**20

# The child: for each (path, expected) argument pair, map SIZE bytes, copy the file's
# first HEAD bytes in, revoke access to the rest, and sniff it as `load` does.
CHILD = r"""
import ctypes, mmap, sys
from jsprof.formats import detect

HEAD, SIZE = int(sys.argv[1]), int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

def guarded(path):
    with open(path, "rb") as f:
        head = f.read(HEAD)
    assert len(head) == HEAD, f"{path}: shorter than {HEAD} bytes"
    mm = mmap.mmap(-1, SIZE)
    mm[:HEAD] = head
    addr = ctypes.addressof((ctypes.c_char * SIZE).from_buffer(mm))
    if libc.mprotect(addr + HEAD, SIZE - HEAD, 0) != 0:
        raise OSError(ctypes.get_errno(), "mprotect")
    return mm

args = sys.argv[3:]
if args[0] == "--touch":  # the control: reading past the head must crash
    print(len(bytes(guarded(args[1]))), flush=True)
    sys.exit(0)
for path, expected in zip(args[::2], args[1::2]):
    print("sniffing", expected, flush=True)
    fmt = detect(guarded(path), path)
    got = fmt.name if fmt else None
    assert got == expected, f"{path}: sniffed as {got}, expected {expected}"
    print("ok", expected, flush=True)
"""


@pytest.fixture(scope="module")
def big_files(tmp_path_factory) -> dict[str, Path]:
    """One real file per readable format, each longer than HEAD."""
    d = tmp_path_factory.mktemp("sniff")
    rec = jsprof.load(DATA / "node" / "bench.cpuprofile")
    # A line per sample, so pprof (which merges equal stacks) also makes a long file.
    t = rec.tracks[0].trace
    t.sample_line = (np.arange(t.num_samples) % 5000 + 1).astype(np.int32)
    out = {}
    for fmt in READERS:
        data = FORMATS[fmt.name].write(rec)  # type: ignore[misc]
        if data[:2] == b"\x1f\x8b":  # sniffing sees what `load` un-gzipped
            data = gzip.decompress(data)
        assert len(data) > HEAD, (fmt.name, len(data))
        path = d / f"big.{fmt.name}"
        path.write_bytes(data)
        out[fmt.name] = path
    # Real files from other producers, where they are long enough.
    out["jsprof (Chromium)"] = DATA / "chromium" / "trace-basic.json"
    out["cpuprofile (node --cpu-prof)"] = DATA / "node" / "bench.cpuprofile"
    return out


def _child(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(HEAD), str(SIZE), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_sniffing_reads_only_the_first_few_kb_of_every_format(big_files):
    pairs = [x for name, p in big_files.items() for x in (str(p), name.split(" ")[0])]
    assert {name.split(" ")[0] for name in big_files} == {f.name for f in READERS}
    r = _child(*pairs)
    last = r.stdout.strip().splitlines()[-1:] or ["(nothing)"]
    assert r.returncode == 0, (
        f"exit {r.returncode} while {last[0]!r}: a sniffer read past the first {HEAD} bytes"
        f"\n{r.stderr[-2000:]}"
    )
    assert r.stdout.count("ok ") == len(big_files)


def test_the_guard_catches_a_read_past_the_head(big_files):
    r = _child("--touch", str(big_files["jsprof"]))
    # SIGSEGV on Linux; macOS may raise SIGBUS for a page without access.
    crashed = {-signal.SIGSEGV, -signal.SIGBUS}
    assert r.returncode in crashed, (r.returncode, r.stdout, r.stderr[-500:])
