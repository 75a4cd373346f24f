"""An engine's process dies with jsprof (`engines/_process.dies_with_jsprof`, Linux's
PR_SET_PDEATHSIG), and the forked child imports nothing on its way to exec: an import
there cost the child ~4 ms of CPU per start (issue 32: counted as Node's) and can
deadlock on a lock another of jsprof's threads held at the fork."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Run in a fresh interpreter: the test process may have imported ctypes already, and the
# question is what the child imports that its parent had not.
CHECK = r"""
import os, subprocess, sys
from jsprof.engines._process import dies_with_jsprof

r, w = os.pipe()
fn = dies_with_jsprof()  # in the parent, as the engines call it: just before the spawn
before = set(sys.modules)

def child():
    fn()
    new = sorted(set(sys.modules) - before - {"__main__"})
    os.write(w, " ".join(new).encode() + b"\n")

# The child reads back its parent-death signal (PR_GET_PDEATHSIG = 2).
reader = (
    "import ctypes\n"
    "v = ctypes.c_int(-1)\n"
    "ctypes.CDLL(None, use_errno=True).prctl(2, ctypes.byref(v))\n"
    "print(v.value)\n"
)
p = subprocess.run([sys.executable, "-c", reader], preexec_fn=child, capture_output=True,
                   text=True, timeout=60)
os.close(w)
with os.fdopen(r) as f:
    imported_in_child = f.read().strip()
print(repr(imported_in_child))
print(p.stdout.strip())
"""


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_the_engines_child_gets_sigkill_on_jsprofs_death_and_imports_nothing() -> None:
    p = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    imported, pdeathsig = p.stdout.splitlines()
    assert imported == "''", f"the forked child imported {imported}"
    assert pdeathsig == "9"  # SIGKILL
