"""tools/under_load.py (`make test-load`): its busy loops and its command end with it, whatever
ends it, so the loaded step of CI cannot leave a machine loaded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "under_load.py"

# The command: says its pid and its siblings' (the loops), then waits.
REPORT = """\
import os, sys, time
me, parent = os.getpid(), os.getppid()
sibs = []
for d in os.listdir('/proc'):
    if d.isdigit() and int(d) != me:
        try:
            stat = open(f'/proc/{d}/stat').read()
        except OSError:
            continue
        if int(stat.rsplit(')', 1)[1].split()[1]) == parent:
            sibs.append(d)
print(me, *sibs, flush=True)
time.sleep(float(sys.argv[1]))
sys.exit(int(sys.argv[2]))
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone(pids: list[int], within: float = 10.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _start(*args: str, limit: str = "60") -> tuple[subprocess.Popen, int, list[int]]:
    p = subprocess.Popen([sys.executable, str(TOOL), "--per-cpu", "1", "--limit", limit, "--",
                          sys.executable, "-c", REPORT, *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    me, *loops = map(int, p.stdout.readline().split())
    return p, me, loops


def test_the_commands_status_and_no_loop_left_after_it() -> None:
    p, me, loops = _start("0.2", "3")
    assert len(loops) == os.cpu_count(), loops  # one a CPU, beside the command
    assert all(_alive(pid) for pid in loops)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 3, err
    assert f"{len(loops)} busy loops" in err and "exit 3" in err, err
    assert _gone(loops, within=0.5)


def test_killed_it_takes_its_loops_and_its_command_along() -> None:
    p, me, loops = _start("50", "0")
    p.kill()  # no chance to clean up: the kernel's parent-death signal does it
    p.wait()
    assert _gone([me, *loops]), [pid for pid in (me, *loops) if _alive(pid)]


def test_stopped_it_ends_its_command() -> None:
    p, me, loops = _start("50", "0")
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM
    assert _gone([me, *loops], within=0.5)


def test_a_command_past_the_limit_is_ended_with_timeouts_status() -> None:
    p, me, loops = _start("50", "0", limit="1")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 124 and "still running after 1 s" in err, err
    assert _gone([me, *loops], within=0.5)
