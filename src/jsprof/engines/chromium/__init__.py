"""V8 in headless Chromium, driven over the DevTools protocol on `--remote-debugging-pipe`.

Files: browser.py (the browser process and its tabs), page.py (one tab: its threads,
console, network), thread.py (one page/worker/iframe thread: profiler, slices, time
origin, idleness, its Track), helper.py (jsprof's helper in the page, and removing its
frames), console.py (console output as the console shows it), endings.py (the rules that
end a recording), record.py, run.py, attach.py, runtime.py (the RuntimeProfiler
contract), serve.py (the loopback page server), cli.py (the default output name and the
notes after a recording's summary; the command itself is jsprof/cli.py's).

- `record_chromium(target, ...)`: open a URL, a local .html page or a .js/.mjs script
  (served from loopback) and profile it: the page's main thread is the `main` track,
  each dedicated worker and out-of-process iframe its own track named by its URL.
- `run_chromium(path, ...)`: run a page or script with the browser's *native* `Profiler`
  (served with `Document-Policy: js-profiling`); console to stdout/stderr.
- `attach_cdp(endpoint, ...)`: profile a tab of a browser the user already runs.
- `ChromiumRuntime` + `ChromiumProfiler`: one page behind the RuntimeProfiler contract.

How it is done (measured on Chromium 156, see docs/engines.md):
- The browser is started with no port at all (the pipe), a fresh profile folder, in its
  own process group, with a parent-death signal: it never outlives jsprof.
- Profiling starts on the blank tab before navigation (its reply waited for); V8's
  inspector keeps the profiler state of a session and restores it (interval included) in
  the document the navigation lands in, before the page's first script. Workers and
  iframes are auto-attached paused (`waitForDebuggerOnStart`), get `setSamplingInterval`
  then `start`, then run.
- Timestamps: V8 profiles count microseconds of the monotonic clock Chromium's
  `performance.timeOrigin` is derived from; each track is made relative to its own
  context's time origin (page or worker), so they line up with `performance.now()`.
- Nothing lost: while recording, each thread's profile is also taken in one-second slices
  (nested `console.profile` titles on the same sampler); a crashed page, an ended worker
  or a browser killed from outside leave those. Ctrl-C stops every profiler cleanly.
- Our helper (js/chromium_page.js) and the expressions we evaluate carry the source URL
  `INTERNAL_URL`; their frames are removed from the profiles before conversion.
"""

from __future__ import annotations

from .. import lazy_attributes

# Lazy: `jsprof record --engine chromium` imports only what it runs.
_WHERE = {
    "ENGINE": "thread",
    "MIN_INTERVAL_US": "thread",
    "interval_us": "thread",
    "effective_interval": "thread",
    "Browser": "browser",
    "find_chromium": "browser",
    "HEADLESS_FLAGS": "browser",
    "INTERNAL_URL": "helper",
    "strip_internal": "helper",
    "format_console": "console",
    "format_remote": "console",
    "exception_text": "console",
    "PageSession": "page",
    "parse_until": "endings",
    "record_chromium": "record",
    "resolve_target": "record",
    "run_chromium": "run",
    "attach_cdp": "attach",
    "ChromiumRuntime": "runtime",
    "ChromiumProfiler": "runtime",
}
__all__ = sorted(_WHERE)

__getattr__ = lazy_attributes(__name__, _WHERE)
