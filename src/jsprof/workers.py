"""`jsprof record --workers N`: N copies of a script on N QuickJS runtimes, N threads.

Each copy sees `jsprof.worker = {index, count}`. The runtimes register with one
ProfilerManager, which records them together into one Recording (a track per runtime),
the way an application embedding several runtimes would use it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from .errors import JSError, UsageError
from .manager import ProfilerManager
from .trace import Recording


def record_workers(
    path: str | os.PathLike[str],
    count: int,
    sample_interval: float = 1.0,
    max_buffer_size: int | None = None,
    args: Sequence[str] = (),
    clock: str = "wall",
) -> Recording:
    """Run `count` copies at once; errors in copies are collected, not fatal to the others.

    The first JSError (if any) is re-raised after recording, carrying `.recording`. Ctrl-C
    interrupts every copy and keeps the samples taken so far.
    """
    from .engines.quickjs import QuickJS, QuickJSProfiler

    p = os.fspath(path)
    if count < 1:
        raise UsageError(f"--workers must be at least 1, got {count}")
    if not os.path.isfile(p):
        raise UsageError(f"{p}: no such file; give the path of a .js or .mjs script")
    manager = ProfilerManager()
    registered = threading.Barrier(count + 1)
    # Register in index order, so tracks come out as worker 0, 1, 2, ...
    turn = [threading.Event() for _ in range(count + 1)]
    turn[0].set()
    go = threading.Event()
    runtimes: list = [None] * count
    errors: list[BaseException | None] = [None] * count

    def worker(i: int) -> None:
        try:
            rt = QuickJS(args=[p, *args])
            rt.eval(
                "globalThis.jsprof = Object.assign(globalThis.jsprof ?? {}, "
                f"{{worker: Object.freeze({{index: {i}, count: {count}}})}});",
                "<jsprof worker setup>",
            )
            rt.set_script_window(True)  # each track holds its copy's run, not the waits
            runtimes[i] = rt
            profiler = QuickJSProfiler(rt, max_buffer_size, clock)
            turn[i].wait()
            manager.add(profiler, name=f"worker {i}")
        except BaseException as e:  # reported after the barrier, never lost
            errors[i] = e
        turn[i + 1].set()
        registered.wait()
        go.wait()
        if errors[i] is None:
            try:
                runtimes[i].eval_file(p)
            except (JSError, KeyboardInterrupt) as e:
                errors[i] = e

    threads = [
        threading.Thread(target=worker, args=(i,), name=f"js-worker-{i}", daemon=True)
        for i in range(count)
    ]
    for t in threads:
        t.start()
    registered.wait()
    manager.setup(sample_interval)
    manager.begin()
    interrupted = False
    try:
        go.set()
        for t in threads:
            while t.is_alive():
                t.join(0.1)
    except KeyboardInterrupt:
        interrupted = True
        for rt in runtimes:
            if rt is not None:
                rt.interrupt()
        for t in threads:
            t.join()
    rec = manager.end()
    first = next((e for e in errors if isinstance(e, JSError)), None)
    if interrupted or first is not None:
        err: BaseException = KeyboardInterrupt() if interrupted else first  # type: ignore[assignment]
        err.recording = rec  # type: ignore[attr-defined]
        raise err
    other = next((e for e in errors if e is not None), None)
    if other is not None:
        raise other
    return rec
