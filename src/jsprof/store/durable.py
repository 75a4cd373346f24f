"""Making a folder's entries durable: a file created, renamed or removed there is only on
disk after a crash once the folder itself is fsync'd (every writer in store/ does this
after its rename)."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(path: str | os.PathLike[str] | Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
