"""`Track.meta`: the facts about a track that engines write, formats carry and the CLI
reads. One spelling, camelCase (the trace file's JSON spelling); `normalise` turns the
snake_case keys older files and engines used into it, so no reader needs both. The table
of keys, who writes them and what they mean is docs/formats.md ("The trace file").

Stdlib only: `record.py` reads the exit keys before numpy is loaded.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict


class TrackMeta(TypedDict, total=False):
    """Every key a track's meta may hold (all optional). Other keys a file carries are
    kept as they are, but no jsprof code writes or reads them."""

    # what ran and how it ended (record, every engine)
    script: str
    args: list[str]
    target: str  # Chromium: the page or URL asked for
    url: str  # Chromium: the thread's document or worker script
    kind: str  # Chromium: page, worker, iframe ...
    workerName: str  # Chromium: a worker's own name, given by the page (new Worker(url, {name}))
    endpoint: str  # Chromium attach: the DevTools endpoint
    chromium: str  # Chromium: the browser's product/version
    exit: str  # ok, error, interrupted, duration, killed ...
    exitCode: int  # Node's status (negative: killed by a signal)
    signal: str  # the signal that ended the run (killed) or jsprof (interrupted)
    error: str
    errorName: str
    errorMessage: str
    errorWhere: str  # Node: file:line:column of a script that did not compile
    errors: list[str]
    # processes and threads
    nodePid: int
    pid: int
    tid: int
    # record --engine node -- COMMAND: the command (first track), each process (its first)
    command: list[str]
    argv: list[str]  # the process's process.argv
    ppid: int
    processExit: str  # ok, error, killed, interrupted, duration, outlived
    processExitCode: int
    processError: str
    # what could not be profiled
    partial: Any
    lost: Any
    mainLost: bool
    childProcesses: str
    lostWindowMs: list[float]
    # Node: the samples of Node's wait for jsprof after the program's 'exit', dropped
    exitWaitDropped: dict[str, float]  # {"samples": n, "ms": how much shorter}
    # Chromium: the idle samples of jsprof's wait for the --until load rule's quiet, dropped
    quietWaitDropped: dict[str, float]  # {"samples": n, "ms": how much shorter}
    # QuickJS's sampler
    clock: str  # "cpu": a sample per interval of the runtime's CPU time; "wall" (or absent)
    samples: int
    idleSamples: int
    deferredSamples: int
    nativeReturnSamples: int
    gcSamples: int
    droppedTicks: int
    stallDroppedTicks: int
    offCpuDroppedTicks: int
    truncatedStacks: int
    captureLatencyMs: dict[str, float]
    bufferFull: bool
    quickjsVersion: str
    # V8 engines
    medianIntervalMs: float
    # a track whose capped weights are stored where its samples have no times to cap again
    # (pprof read back): what the gap cap did to the recording (gaps, lostMs, capMs,
    # intervalMs: trace.stored_capping)
    gapCapping: dict[str, float]
    # Chromium: the page's timeline (long frames and interactions held as the track's spans)
    # Chromium: the page's performance.measure entries (name, startTime, duration ms)
    measures: list[dict[str, Any]]
    # Chromium: why --until js:EXPR never ended the recording (it hung or always threw)
    untilProblem: str
    timelineDropped: dict[str, int]  # entries over the client's per-take limits
    timelineRefused: list[str]  # batches that failed the timeline check, why
    # jsprof serve: an upload's client timeline (GET /v1/traces/{id}), read by analysis/busy.py
    timeline: dict[str, Any]
    # instrument
    instrumented: bool
    spansDropped: int
    openCalls: int
    # a merged profile (`jsprof fleet`): one weighted sample per (stack, marker), no times
    aggregated: bool
    # format readers
    cpuprofileStartTime: float
    synthesizedSamples: int
    sourceFormat: str


KEYS: frozenset[str] = frozenset(TrackMeta.__annotations__)

# The keys read across modules, by name (a typo is then a NameError, not a silent None).
EXIT = "exit"
EXIT_CODE = "exitCode"
SIGNAL = "signal"
ERROR = "error"
CAPTURE_LATENCY_MS = "captureLatencyMs"
CLOCK = "clock"
# What a sampler's ticks follow: wall-clock time (every engine; a track without the key) or
# the profiled thread's CPU time (QuickJS, `record --clock cpu`: each sample weighs the CPU
# ms since the one before it, so machine load and waiting add none).
WALL, CPU = "wall", "cpu"
CLOCKS = (WALL, CPU)
# A track whose samples are aggregates (`jsprof fleet`'s merge: one sample per stack and
# marker, standing for `sampleCounts` samples and weighing their summed time): its sample
# times are all 0 and mean nothing, so no view draws a time axis for it and no filter
# slices it by time; a writer whose format keeps time only as timestamps lays the samples
# out one after another, each as long as its weight (`trace.laid_out`).
AGGREGATED = "aggregated"
BUFFER_FULL = "bufferFull"
# The format a track was read from, where it bears on what its numbers mean: "folded"
# (formats/folded.py) holds sample counts only, laid out 1 ms a sample on reading.
SOURCE_FORMAT = "sourceFormat"
FOLDED = "folded"
# The gap cap's lost time of a recording whose weights a track stores (trace.stored_capping):
# formats without sample times (pprof) carry it, a selection of samples drops it.
GAP_CAPPING = "gapCapping"
EXIT_WAIT_DROPPED = "exitWaitDropped"
QUIET_WAIT_DROPPED = "quietWaitDropped"
# The profiled program's command lines: a script's `args`, a command's `command` and each
# of its processes' `argv` may hold anything (a token, a password). They stay in the local
# recording and are never sent: `jsprof upload` leaves them out and the collector drops them.
COMMAND_LINES = frozenset({"args", "command", "argv"})

_UPPER = re.compile(r"_([a-z])")


def is_aggregated(meta: dict[str, Any]) -> bool:
    """Whether a track's samples are aggregates with no time axis (`AGGREGATED`)."""
    return meta.get(AGGREGATED) is True


def clock_of(meta: dict[str, Any]) -> str:
    """The clock a track's samples followed: "cpu" or "wall" (also for a track that does
    not say: every other engine and format samples wall time)."""
    return CPU if meta.get(CLOCK) == CPU else WALL


def camel(key: str) -> str:
    """`exit_code` -> `exitCode`; a camelCase key is returned as it is."""
    return _UPPER.sub(lambda m: m.group(1).upper(), key)


def normalise(meta: dict[str, Any]) -> dict[str, Any]:
    """Meta as read from a file, with the snake_case spellings of known keys renamed to
    camelCase (the camelCase value wins when a file has both)."""
    out: dict[str, Any] = {}
    for k, v in meta.items():
        c = camel(k) if "_" in k else k
        if c != k and c in KEYS:
            if c not in meta:
                out[c] = v
        else:
            out[k] = v
    return out


# What report, diff and flame say of a recording read from folded stacks: the file holds
# sample counts only, which reading lays out 1 ms apart, so its "ms" are not times.
COUNTS_NOTE = ("read from folded stacks, which keep sample counts, not times: each ms "
               "shown is one sample")


def counts_only(meta: Any) -> bool:
    """The track's times are sample counts (read from folded stacks: 1 ms a sample), not
    times: every place showing its ms says so."""
    return meta.get(SOURCE_FORMAT) == FOLDED
