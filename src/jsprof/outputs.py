"""Where `jsprof record` puts a recording, for every engine: the output checked before the
run (a bad -o must not cost one), default names in the current directory that never
replace an earlier recording (as `node --cpu-prof` and py-spy do), and a fallback file
when writing still fails afterwards (a recording is never lost). Notes go to stderr."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from .errors import JsprofError, UsageError

if TYPE_CHECKING:
    from .trace import Recording

SUFFIX = ".jsprof.json"


def recording_output(output: str | None, default_stem: str) -> str:
    """`output` checked (not `-`, not a directory, a known format, its directory
    writable), or by default `default_stem + .jsprof.json`, else the next free
    `default_stem.N.jsprof.json`, saying so."""
    from . import io
    from .formats import writer_name

    if output is None:
        out = io.free_name(default_stem, SUFFIX)
        if out != default_stem + SUFFIX:
            print(f"jsprof: {default_stem}{SUFFIX} exists; writing {out}", file=sys.stderr)
        return out
    if output == "-":
        raise UsageError(
            "-o -: record writes a file (stdout belongs to the program); give -o FILE, "
            "then `jsprof convert FILE -`"
        )
    io.check_output(output)
    writer_name(output, None, option=None)  # the format must be known (record has no --format)
    return output


def save_recording(rec: Recording, out: str) -> str:
    """Save to `out`; if that fails (a full disk, a directory removed meanwhile), save to a
    fallback file in the temp directory and say where. Returns the path written."""
    from . import io

    try:
        io.save(rec, out)
        return out
    except (JsprofError, OSError) as e:
        import tempfile

        stem = os.path.join(tempfile.gettempdir(), "jsprof-" + os.path.basename(out).split(".")[0])
        fallback = io.free_name(stem, SUFFIX)
        io.save(rec, fallback)
        print(
            f"jsprof: could not write {out} ({e}); saved the recording to {fallback}",
            file=sys.stderr,
        )
        return fallback
