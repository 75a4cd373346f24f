"""What the CLI prints about a recording, a checked trace file and a JavaScript error.

Everything here goes to stderr except the titles used by tables on stdout: while
recording, stdout belongs to the profiled program.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

from ..meta import (
    BUFFER_FULL,
    CAPTURE_LATENCY_MS,
    CPU,
    EXIT_WAIT_DROPPED,
    QUIET_WAIT_DROPPED,
    clock_of,
)
from ..words import plural, printable, printable_lines

# rich is imported by the functions that print with it: `jsprof record` imports this
# module (StatusLine) before it starts Node, and rich only later, in another thread.
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from rich.console import Console

    from ..analysis.sampling import Achieved
    from ..errors import JSError
    from ..recorded import LightRecording
    from ..trace import Recording

# Piped output (CI logs, files) must not wrap at rich's 80-column default, nor titles.
PIPED_WIDTH = 10_000


def _raise_broken_pipe() -> None:
    raise BrokenPipeError


def pipe_errors_raise(console: Console) -> Console:
    """`console` raising BrokenPipeError when its reader went away (`| head`), as print()
    does: rich would exit with status 1, and record/run/instrument exit with the script's."""
    console.on_broken_pipe = _raise_broken_pipe  # type: ignore[method-assign]
    return console


def stdout_console() -> Console:
    from rich.console import Console

    return pipe_errors_raise(
        Console(highlight=False, width=None if sys.stdout.isatty() else PIPED_WIDTH)
    )


def stderr_console() -> Console:
    from rich.console import Console

    return pipe_errors_raise(
        Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else PIPED_WIDTH)
    )


def trace_title(rec: Recording, track: str | None = None) -> str:
    """`main · quickjs · 1 ms interval; worker 1 · ...`: the tracks a table covers (with
    `· CPU time` for a track sampled on the CPU clock)."""
    tracks = [rec.track(track)] if track else rec.tracks
    parts = []
    for t in tracks:
        bits = [printable(t.name)]
        if t.engine:
            bits.append(printable(t.engine))
        if t.sample_interval:
            bits.append(f"{t.sample_interval:g} ms interval")
        if clock_of(t.meta) == CPU:
            bits.append("CPU time")
        parts.append(" · ".join(bits))
    return "; ".join(parts)


def validate_lines(rec: Recording, source: str) -> list[str]:
    """`jsprof validate`'s report: one OK line per track, with its counts."""
    from ..analysis.sampling import backward_steps

    out = []
    for t in rec.tracks:
        tr = t.trace
        back = backward_steps(tr)
        note = ""
        if back:
            note = f"; note: {back} timestamps go backwards (kept in order, counted as 0 ms)"
        out.append(
            f"OK {source} track {t.name!r}: {plural(len(tr.resources), 'resource')}, "
            f"{plural(len(tr.frames), 'frame')}, {plural(tr.num_stacks, 'stack')}, "
            f"{plural(tr.num_samples, 'sample')}{note}"
        )
    return out


def print_js_error(e: JSError) -> None:
    """The profiled program's uncaught error: its class, message and JS stack, once."""
    msg = str(e)
    # Node's text already starts with its own "TypeError: ..."; don't prefix it again.
    head = msg if re.match(r"^[A-Za-z_$][\w$]*: ", msg) else f"{e.name}: {msg}"
    print(f"jsprof: uncaught JavaScript exception: {printable_lines(head)}", file=sys.stderr)
    stack = (e.js_stack or "").rstrip()
    if stack:
        print(printable_lines(stack), file=sys.stderr)
    if e.hint:
        print(f"jsprof: hint: {e.hint}", file=sys.stderr)


def _ms(x: float) -> str:
    return f"{x:.3g}" if x < 10 else f"{x:.0f}"


def achieved_text(got: Achieved | None) -> str:
    """`achieved 1 ms`: the median gap between samples; with the mean too when the gaps
    vary, and a plain statement when the sampler fell behind (a median alone would hide
    that most of the time sat in long gaps). Empty with fewer than two distinct times."""
    if got is None:
        return ""
    if got.steady:
        return f"achieved {_ms(got.median)} ms"
    text = f"achieved {_ms(got.median)} ms median, {_ms(got.mean)} ms mean"
    if got.fell_behind:
        from ..analysis.sampling import BEHIND_GAP

        text += (
            f"; {got.behind * 100:.0f} % of the time in gaps > {BEHIND_GAP}x the interval: "
            "the sampler fell behind"
        )
    return text


def rich_console_needed() -> bool:
    """Whether the summary needs rich: a terminal (bold, colour, its width), or rich's
    environment switches that colour or size piped output too."""
    import os

    if sys.stderr.isatty():
        return True
    return any(
        os.environ.get(v)
        for v in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
    )


class _Plain:
    """The summary as rich prints it to a pipe (no styles, 10,000 columns) without importing
    rich's console (~40 ms of `jsprof record`'s start-up). Text passed through `escape` is
    kept apart from the few tags the summary uses; if rich would change a line (an `:emoji:`
    code, a tab, a line too wide), the summary goes through rich after all."""

    TAGS = ("[bold]", "[/bold]", "[bold red]", "[/bold red]", "[dim]", "[/dim]")
    OPEN = "\x00"  # printable() never lets a control character through; paths have no NUL

    @classmethod
    def escape(cls, text: str) -> str:
        return text.replace("[", cls.OPEN)

    @classmethod
    def text(cls, line: str) -> str | None:
        """`line` as rich would print it to a pipe, or None if only rich can tell."""
        from rich._emoji_replace import _emoji_replace

        for tag in cls.TAGS:
            line = line.replace(tag, "")
        line = line.replace(cls.OPEN, "[")
        if 2 * len(line) >= PIPED_WIDTH or not line.isprintable() or _emoji_replace(line) != line:
            return None
        return line


def _rich_escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def print_recording_summary(
    rec: Recording | LightRecording, out: str | None, top: int = 5,
    mapped: Recording | None = None,
) -> None:
    """Per track: samples, span, requested and achieved interval, capture latency and a
    full buffer; where the trace went; then, last, the `top` functions by self time
    (pyinstrument style), from `mapped` when given (the recording through the scripts'
    source maps)."""
    if not rich_console_needed():
        texts = [
            _Plain.text(line) for line in _summary_lines(rec, out, top, _Plain.escape, mapped)
        ]
        if all(t is not None for t in texts):
            sys.stderr.write("".join(f"{t}\n" for t in texts))
            sys.stderr.flush()
            return
    c = stderr_console()
    for line in _summary_lines(rec, out, top, _rich_escape, mapped):
        c.print(line)


def _summary_lines(
    rec: Recording | LightRecording,
    out: str | None,
    top: int,
    escape: Callable[[str], str],
    mapped: Recording | None = None,
) -> Iterator[str]:
    """The summary's lines in rich markup, user text through `escape`. A
    recorded.LightRecording (`record --engine node`) is summarised from its own columns, with
    the same numbers (recorded.py)."""
    from ..recorded import LightRecording

    light = isinstance(rec, LightRecording)
    if light:
        from ..recorded import track_sampling
    else:
        from ..analysis.sampling import track_sampling  # type: ignore[assignment]

    for t in rec.tracks:
        tr = t.trace
        s = track_sampling(t)  # type: ignore[arg-type]
        # The time the samples stand for, as `report` counts it (not last minus first),
        # and what the gap cap left out of it, said as `report` says it.
        lost = ""
        if s.lost_ms > 0:
            from .rows import lost_note

            lost = escape(lost_note(s.lost_ms, [s.capping] if s.capping is not None else []))
        interval = ""
        if t.sample_interval:
            interval = f", interval {t.sample_interval:g} ms"
            achieved = achieved_text(s.achieved)
            if achieved:  # what the samples show, not only what was asked
                interval += f" ({achieved})"
        if s.wall_ms is not None:
            interval = f" of CPU time{interval}, in {s.wall_ms:.1f} ms of wall-clock time"
        # on the CPU clock a tick's due time is an estimate: no latency to tell
        lat = {} if s.cpu else t.meta.get(CAPTURE_LATENCY_MS) or {}
        latency = (
            f", capture latency p50 {lat['p50'] * 1000:.0f} µs / p99 {lat['p99'] * 1000:.0f} µs"
            if lat.get("p50") is not None and lat.get("p99") is not None
            else ""
        )
        n = plural(s.samples, "sample")
        yield (
            f"[bold]{escape(printable(t.name))}[/bold]: {n} over {s.span_ms:.1f} ms{lost}"
            f"{interval}{latency}"
        )
        waited = t.meta.get(EXIT_WAIT_DROPPED)
        if isinstance(waited, dict) and waited.get("samples"):
            yield (
                f"[dim]  dropped {plural(int(waited['samples']), 'sample')} "
                f"({float(waited.get('ms') or 0):.1f} ms) after the program ended: Node "
                "waiting for jsprof to take the profile, not the program's time[/dim]"
            )
        quiet = t.meta.get(QUIET_WAIT_DROPPED)
        if isinstance(quiet, dict) and quiet.get("samples"):
            yield (
                f"[dim]  dropped {plural(int(quiet['samples']), 'sample')} "
                f"({float(quiet.get('ms') or 0):.1f} ms) after the page went quiet: jsprof "
                "waiting for it to stay so (--until load), not the page's time[/dim]"
            )
        if t.meta.get(BUFFER_FULL):
            name = escape(printable(t.name))
            yield (
                f"[bold red]WARNING: the sample buffer of {name} filled up after "
                f"{plural(tr.num_samples, 'sample')}; later samples were dropped. Raise "
                "--max-buffer-size or the --interval.[/bold red]"
            )
    if out:
        maps = "" if mapped is None else " --sourcemap"
        yield (f"wrote {escape(out)}; see it with: jsprof report {escape(out)}{maps}")
    if top and rec.num_samples:
        from .rows import short_location

        if light and mapped is None:
            from ..recorded import top_rows

            rows = top_rows(rec, top)  # type: ignore[arg-type]
        else:
            from ..analysis.profile import summarize
            from .rows import summary_rows

            shown = rec if mapped is None else mapped
            rows = summary_rows(summarize(shown, top_self=top), top)  # type: ignore[arg-type]
        rows = [r for r in rows if r.get("self_ms", 0) > 0]
        rows = sorted(rows, key=lambda r: -r["self_ms"])[:top]
        if rows:
            # the file keeps what was recorded; `report --sourcemap` shows it mapped
            how = "" if mapped is None else ", through the scripts' source maps"
            yield (f"top {len(rows)} by self time{how}:")
            for r in rows:
                where = f"  {printable(short_location(r['location']))}" if r["location"] else ""
                yield (
                    f"  {r['self_pct']:5.1f}%  {r['self_ms']:9.1f} ms  "
                    f"{escape(printable(r['name']))}[dim]{escape(where)}[/dim]"
                )


class StatusLine:
    """py-spy's live line on stderr while recording: elapsed time, samples so far, tracks.

    Only when stderr is a terminal (nothing in logs or pipes); `poll` is the engine's cheap
    way to count (None: the engine has none yet, and only the time is shown). Used as a
    context manager around the recording; the line is erased at the end.
    """

    def __init__(self, poll: object = None, every: float = 0.25) -> None:
        import threading

        self.poll = poll  # a callable -> (samples, tracks), or None
        self.every = every
        self.enabled = sys.stderr.isatty()
        self._most = 0  # engines may regroup what they hold at the end: never count down
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jsprof-status", daemon=True)

    def text(self, elapsed: float) -> str:
        parts = [f"jsprof: recording {elapsed:.1f} s"]
        got = None
        if callable(self.poll):
            try:
                got = self.poll()
            except Exception:  # a status line must never break a recording
                got = None
        if got is not None:
            samples, tracks = got
            self._most = max(self._most, int(samples))
            parts += [plural(self._most, "sample"), plural(int(tracks), "track")]
        return " · ".join(parts)

    def _run(self) -> None:
        import time

        t0 = time.monotonic()
        while not self._done.wait(self.every):
            sys.stderr.write("\r\x1b[K" + self.text(time.monotonic() - t0))
            sys.stderr.flush()

    def __enter__(self) -> StatusLine:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._done.set()
            self._thread.join()
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
