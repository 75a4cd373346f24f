"""Several runtimes, one recording: four QuickJS runtimes on four threads and a Node process.

One runtime is created while the recording runs and one is destroyed before it ends; all
five land in one Perfetto trace (open it at ui.perfetto.dev) with a track per runtime.

    .venv/bin/python examples/workers.py [OUT.pftrace]
"""

from __future__ import annotations

import sys
import threading

from jsprof.engines.node import NodeRuntime
from jsprof.engines.quickjs import QuickJS, QuickJSProfiler
from jsprof.manager import ProfilerManager

WORK = """
function spin(ms) { const end = performance.now() + ms; let x = 0;
  while (performance.now() < end) x++; return x; }
function %s() { return spin(%d); }
%s();
"""
# Node's task spins on its own CPU time (process.cpuUsage), not the wall clock: on a busy
# machine 200 wall ms can pass with Node hardly running and hardly sampled.
NODE_WORK = """
function spin(ms) { const t0 = process.cpuUsage(); let x = 0;
  for (;;) { for (let i = 0; i < 1000; i++) x++;
    const d = process.cpuUsage(t0); if (d.user + d.system >= ms * 1000) return x; } }
function nodeTask() { return spin(200); }
nodeTask();
"""


def main(out: str = "workers.pftrace") -> int:
    manager = ProfilerManager()
    registered = threading.Barrier(4, timeout=60)  # three early runtimes and this thread
    go, finished = threading.Event(), threading.Event()
    done = [threading.Event() for _ in range(4)]

    def quickjs_thread(i: int, late: bool, leaves_early: bool) -> None:
        try:
            rt = QuickJS()
            profiler = QuickJSProfiler(rt)
            if not late:
                manager.add(profiler, name=f"quickjs {i}")
                registered.wait()
            go.wait()
            if late:  # created mid-recording: set up and started at once
                manager.add(profiler, name=f"quickjs {i}")
            name = f"task{i}"
            rt.eval(WORK % (name, 150 + 50 * i, name), f"worker{i}.js")
            if leaves_early:  # destroyed mid-recording: stopped first, its profile kept
                manager.remove(profiler)
        finally:
            done[i].set()  # even on failure, so the recording still ends
        finished.wait()

    specs = [(0, False, False), (1, False, True), (2, True, False), (3, False, False)]
    threads = [
        threading.Thread(target=quickjs_thread, args=s, name=f"js-thread-{s[0]}") for s in specs
    ]
    for t in threads:
        t.start()
    registered.wait()
    try:
        with NodeRuntime() as node:
            manager.add(node.profiler(), name="node")
            with manager.recording(sample_interval=1.0, out=out) as handle:
                go.set()
                node.eval(NODE_WORK)
                for d in done:
                    d.wait(timeout=120)
    finally:
        # also on an error: the QuickJS threads wait for it, and the process would never end
        go.set()
        finished.set()
    for t in threads:
        t.join()
    for track in handle.recording.tracks:
        print(f"{track.name}: {track.trace.num_samples} samples")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
