"""V8 through Node.js: the inspector protocol (CDP) drives V8's own CPU profiler.

Files: process.py (the Node process), isolate.py (one isolate's CDP session, clock,
profiler and slices), record.py, attach.py, runtime.py (the RuntimeProfiler contract),
preload.py (the `Profiler` global for `jsprof run`). Shared with the Chromium engine:
engines/_v8session.py, _v8slices.py (joining slices), _v8runtime.py, _process.py.

- `record_node(script, ...)`: run a script under `node --inspect-brk=127.0.0.1:0` (its own
  process group, random port, loopback only), profile the main thread and every worker
  thread (the inspector's NodeWorker domain), return a Recording with a track per thread.
- `attach_node(pid, ...)`: profile a running Node process (SIGUSR1 opens its inspector on
  127.0.0.1:9229), then close that inspector again.
- `NodeRuntime` + `NodeProfiler`: a long-lived Node process whose V8 profiler implements
  the RuntimeProfiler contract (engines/base.py).
- `run_node(script, ...)`: run a script with the spec's `Profiler` global (js/node_profiler.js).

V8's profile comes back as a CDP Profile and is converted by formats/_v8profile.py: the one
place that knows CDP's units. Times are made relative to each thread's own
`performance.timeOrigin`, through the monotonic clock that V8's timestamps and
`process.hrtime` share.

How each ending is caught (measured, see docs/engines.md):
- main thread: with --inspect-brk Node waits for the debugger to disconnect after the
  script ends, throws or calls process.exit(), so Profiler.stop still works then;
- a worker thread does not wait: a `process.on('exit')` hook holding a `debugger`
  statement pauses it at its end, we stop its profiler, then resume it;
- Ctrl-C: jsprof gets SIGINT (Node is in another process group), stops every profiler,
  then ends Node;
- Node killed from outside: nothing was delivered; the error says so.
"""

from __future__ import annotations

from .. import lazy_attributes

# Lazy: `jsprof record --engine node` starts Node before it imports numpy and the formats.
_WHERE = {
    "ENGINE": "process",
    "NodeProcess": "process",
    "find_node": "process",
    "interval_us": "process",
    "effective_interval": "process",
    "MIN_INTERVAL_US": "process",
    "record_node": "record",
    "attach_node": "attach",
    "INSPECTOR_PORT": "attach",
    "NodeRuntime": "runtime",
    "NodeProfiler": "runtime",
    "run_node": "preload",
    "preload_path": "preload",
}
__all__ = sorted(_WHERE)

__getattr__ = lazy_attributes(__name__, _WHERE)
