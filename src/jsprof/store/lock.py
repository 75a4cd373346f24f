"""The tables' one lock: compaction, merging and pruning write `tables/` under it.

Its own module so that the raw store's prune (jsprof.store.store), which rewrites
segments whose places the tables' damage list names, holds the same lock without reaching
into the compactor."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK = "_compact.lock"


class TablesLock:
    """An exclusive flock on `<tables>/_compact.lock`, held for one run that writes the
    tables. `wait=False`: only if it is free now (`held` says whether it was)."""

    def __init__(self, tdir: Path, wait: bool = True) -> None:
        tdir.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(tdir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        self.wait = wait
        self.held = False

    def __enter__(self) -> TablesLock:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
            self.held = True
        except BlockingIOError:
            pass
        return self

    def __exit__(self, *exc: object) -> None:
        if self.held:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
