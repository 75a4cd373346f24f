"""A worker's wait for jsprof at its start: the frame it waits in, taken out of its profile
(`_v8slices.join_slices(..., splice=PAUSE_WRAPPER)`: its samples dropped, its children
hung from its parent, every other sample keeping its timestamp)."""

from __future__ import annotations

# Node runs a worker that waits for a debugger inside this inspector builtin: the worker's
# samples while jsprof attaches fall on it (self time), and it wraps the worker's script.
# The main thread has no such frame (its wait is in jsprof's preload, dropped likewise).
PAUSE_WRAPPER = "callAndPauseOnStart"
