"""`jsprof record --engine chromium`, `record --cdp` and `run --engine chromium`: the
command-line side (output name, saving, exit codes), kept out of cli.py so that `jsprof
--help` imports nothing of the engine."""

from __future__ import annotations

import argparse
import os
import re
import sys
import urllib.parse
from typing import TYPE_CHECKING

from ...errors import UsageError
from ...words import printable
from ..registry import engine_spec

if TYPE_CHECKING:
    from ...trace import Recording


def default_stem(target: str) -> str:
    """The default output's stem, in the current directory and naming the engine (as for
    every engine, jsprof/outputs.py): `app.js`/`page.html` -> `app.chromium`, a URL ->
    `<host>-<last path part>.chromium`."""
    if "://" not in target:
        return os.path.splitext(os.path.basename(target))[0] + ".chromium"
    u = urllib.parse.urlparse(target)
    last = os.path.splitext(os.path.basename(u.path.rstrip("/")))[0]
    stem = "-".join(p for p in (u.hostname or "page", last) if p)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem) + ".chromium"


def cmd_record(args: argparse.Namespace) -> int:
    from ...outputs import recording_output, save_recording
    from ...record import exit_status
    from ...render.summary import print_recording_summary
    from .record import record_chromium

    engine_spec("chromium").check_max_buffer_size(getattr(args, "max_buffer_size", None))
    if getattr(args, "workers", None) is not None:
        raise UsageError("--workers runs QuickJS runtimes; use --engine quickjs")
    if args.cdp:
        if args.script:
            raise UsageError("give either --cdp ENDPOINT or a target to open, not both")
        if args.until is not None:
            raise UsageError("--until goes with a target that jsprof opens, not --cdp")
        out = recording_output(args.output, "cdp.chromium")  # checked before attaching
        rec = engine_spec("chromium").attach(
            args.cdp,
            target=args.target,
            duration=args.duration,
            sample_interval=args.interval,
            allow_remote=args.allow_remote,
        )
    else:
        if not args.script:
            raise UsageError("give the URL, .html, .js or .mjs file to record")
        if args.args:
            raise UsageError(f"{args.script}: a page takes no arguments ({' '.join(args.args)!r})")
        if args.target is not None or args.allow_remote:
            raise UsageError("--target and --allow-remote go with --cdp ENDPOINT")
        out = recording_output(args.output, default_stem(args.script))  # before the run
        rec = record_chromium(
            args.script,
            sample_interval=args.interval,
            until=args.until,
            duration=args.duration,
        )
    out = save_recording(rec, out)
    notes, status = _notes(rec, exit_status(rec))
    try:
        print_recording_summary(rec, out)
        for note in notes:
            print(note, file=sys.stderr)
    except BrokenPipeError:
        # The reader went away (`2>&1 | head`): the status stays the page's.
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
    return status


def _notes(rec: Recording, interrupted_status: int) -> tuple[list[str], int]:
    """The warnings after the summary, and the exit status they come with."""
    meta = rec.tracks[0].meta
    notes = [f"jsprof: warning: {printable(lost)}" for lost in meta.get("lost", ())]
    notes += [
        f"jsprof: warning: {printable(t.name)}: {printable(t.meta['partial'])}" for t in rec.tracks
        if t.meta.get("partial")
    ]
    how = meta.get("exit")
    if how == "interrupted":
        notes.append("jsprof: interrupted; the samples taken so far were kept")
        return notes, interrupted_status  # 130 for Ctrl-C, 143 for SIGTERM
    if how in ("crashed", "browser-exited"):
        what = "the page crashed" if how == "crashed" else "Chromium exited unexpectedly"
        notes.append(f"jsprof: {what}; the samples taken so far were kept")
        return notes, 1
    if meta.get("errors"):
        n = len(meta["errors"])
        notes.append(
            f"jsprof: the page had {n} uncaught error(s) (printed above); the trace was kept"
        )
        return notes, 1
    return notes, 0


def cmd_run(args: argparse.Namespace) -> int:
    return engine_spec("chromium").run(
        args.script,
        args.args,
        allow_profiling=not args.no_profiling,
        until=getattr(args, "until", None),
        duration=getattr(args, "duration", None),
    )
