"""What `jsprof record --engine chromium` and `record --cdp` say about a recording: its
default output name and the notes (with the exit status) after the summary: the spec's
`stem` and `notes` (engines/registry.py). The command itself is cli.py's, the same for
every engine: nothing here imports above engines/."""

from __future__ import annotations

import os
import re
import urllib.parse
from typing import TYPE_CHECKING

from ...words import printable

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


def notes(rec: Recording, interrupted_status: int) -> tuple[list[str], int]:
    """The warnings after the summary, and the exit status they come with."""
    meta = rec.tracks[0].meta
    notes = [f"jsprof: warning: {printable(lost)}" for lost in meta.get("lost", ())]
    notes += [
        f"jsprof: warning: {printable(t.name)}: {printable(t.meta['partial'])}"
        for t in rec.tracks
        if t.meta.get("partial")
    ]
    how = meta.get("exit")
    if meta.get("untilProblem"):
        notes.append(f"jsprof: {printable(meta['untilProblem'])}; the samples were kept")
        return notes, 1
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
            f"jsprof: the page had {n} error(s) (printed above: an uncaught error, or a "
            "script of its own that did not load); the trace was kept"
        )
        return notes, 1
    return notes, 0
