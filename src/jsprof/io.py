"""Reading and writing trace files: paths or `-`, gzip both ways, atomic writes, size limits."""

from __future__ import annotations

import errno
import os
import stat
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from .errors import JsprofError, TraceFormatError, UsageError
from .formats import read_any, writer_for, writer_name

# The trace model (numpy) only where a trace is read or written: `record` checks its -o
# (check_output, free_name) before numpy is imported (start-up).
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from .recorded import LightRecording
    from .trace import ProfilerTrace, Recording

MAX_INPUT_BYTES = 8 << 30  # after decompression: a limit against gzip bombs and runaway files
_GZIP_MAGIC = b"\x1f\x8b"

PathOrFile = str | os.PathLike | BinaryIO


def _read_limited(f: BinaryIO, source: str) -> bytes:
    data = f.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise TraceFormatError(f"{source}: larger than the {MAX_INPUT_BYTES} byte input limit")
    return data


def _gunzip(data: bytes, source: str) -> bytes:
    d = zlib.decompressobj(wbits=31)
    try:
        out = d.decompress(data, MAX_INPUT_BYTES + 1)
    except zlib.error as e:
        raise TraceFormatError(f"{source}: corrupt gzip data ({e})") from None
    if len(out) > MAX_INPUT_BYTES:
        raise TraceFormatError(
            f"{source}: decompresses to more than the {MAX_INPUT_BYTES} byte input limit"
        )
    if not d.eof:
        raise TraceFormatError(
            f"{source}: truncated gzip data (the file ends inside the compressed stream); "
            "was it copied whole?"
        )
    return out


def read_input(src: PathOrFile) -> tuple[bytes, str]:
    """The bytes of a trace input (decompressed) and a name for messages."""
    if hasattr(src, "read"):
        source = getattr(src, "name", "<file>")
        data = _read_limited(src, str(source))  # type: ignore[arg-type]
    elif str(src) == "-":
        source = "<stdin>"
        data = _read_limited(sys.stdin.buffer, source)
    else:
        source = str(src)
        try:
            with open(src, "rb") as f:
                data = _read_limited(f, source)
        except FileNotFoundError:
            raise JsprofError(f"{source}: no such file") from None
        except IsADirectoryError:
            raise JsprofError(f"{source}: is a directory, not a trace file") from None
        except PermissionError:
            raise JsprofError(f"{source}: permission denied") from None
        except OSError as e:
            # A socket (ENXIO), a device that will not read, an I/O error: one line too.
            raise JsprofError(
                f"{source}: cannot read it ({e.strerror or e}); give a trace file"
            ) from None
    if data[:2] == _GZIP_MAGIC:
        data = _gunzip(data, str(source))
    # Look at the head first: strip() of a whole big file would copy it.
    if not data[:4096].strip() and not data.strip():
        raise TraceFormatError(f"{source}: empty file; expected a trace")
    return data, str(source)


def load(src: PathOrFile) -> Recording:
    """Load any trace format jsprof reads (sniffed from content) as a validated Recording."""
    data, source = read_input(src)
    return read_any(data, source)


def _umask() -> int:
    """The process umask, read without setting it (os.umask would race other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _existing_kind(path: Path) -> str | None:
    """None (missing), "file", "dir" or "special" (a device, FIFO or socket)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as e:
        raise JsprofError(f"{path}: cannot write there ({e.strerror})") from None
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "special"


def check_output(path: str | os.PathLike) -> None:
    """Fail now, with one line, if `path` cannot be written: before a long run or a parse,
    not after. A missing file in a writable directory, a regular file or a device is fine."""
    p = Path(path)
    kind = _existing_kind(p)
    if kind == "dir":
        raise UsageError(f"{p}: is a directory; give a file name for the output")
    if kind == "special":
        return
    directory = p.parent
    if not directory.is_dir():
        raise UsageError(f"{p}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"{p}: cannot write in {directory} (permission denied)")


def _write_in_place(path: Path, data: bytes | Callable[[BinaryIO], None]) -> None:
    # A device (/dev/null, /dev/stdout) or a FIFO: a rename would replace it with a file.
    try:
        with open(path, "wb") as f:
            _put(f, data)
    except OSError as e:
        raise JsprofError(f"{path}: cannot write ({e.strerror})") from None


def _put(f: BinaryIO, data: bytes | Callable[[BinaryIO], None]) -> None:
    if callable(data):
        data(f)
    else:
        f.write(data)


def _mkstemp(directory: Path, name: str) -> tuple[int, str]:
    """A new file `directory/.NAME.RANDOM.tmp` opened for writing, as tempfile.mkstemp
    makes it (O_EXCL, so never a file or symlink that is there; mode 0600), without
    importing tempfile: its import (random, weakref) was ~2 ms of CPU of every `record`
    (issue 32). Raises what os.open raises (the caller words it)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue  # 48 random bits: another writer's name
    raise FileExistsError(errno.EEXIST, "no free temporary file name", str(directory))


def atomic_write(path: str | os.PathLike, data: bytes | Callable[[BinaryIO], None]) -> None:
    """Write via a temp file in the same directory and rename, so a failure leaves no half
    file. A symlink is followed (its target is replaced, the link stays); an existing
    device or FIFO is written in place; a directory is refused. `data` is the bytes, or a
    function that writes them to the open file."""
    path = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    kind = _existing_kind(path)
    if kind == "dir":
        raise JsprofError(f"{path}: is a directory; give a file name for the output")
    if kind == "special":
        _write_in_place(path, data)
        return
    directory = path.parent
    try:
        fd, tmp = _mkstemp(directory, path.name)
    except FileNotFoundError:
        if directory.is_dir():  # e.g. /proc: there, but no new files
            raise JsprofError(f"{path}: cannot create a file in {directory}") from None
        raise JsprofError(f"{path}: directory {directory} does not exist") from None
    except NotADirectoryError:
        raise JsprofError(f"{path}: {directory} is not a directory") from None
    except PermissionError:
        raise JsprofError(f"{path}: cannot write in {directory} (permission denied)") from None
    except OSError as e:
        raise JsprofError(f"{path}: cannot write in {directory} ({e.strerror})") from None
    try:
        # mkstemp makes the file 0600; give it the mode a plain open() would have.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            _put(f, data)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError):
            if e.errno == errno.EISDIR:  # made a directory meanwhile
                raise JsprofError(f"{path}: is a directory; give a file name") from None
            raise JsprofError(f"{path}: cannot write ({e.strerror})") from None
        raise


def free_name(stem: str, suffix: str) -> str:
    """`stem + suffix` if nothing is there, else the first free `stem.N + suffix` (N = 1,
    2, ...): default output names never overwrite an earlier recording."""
    candidate = stem + suffix
    i = 0
    while os.path.lexists(candidate):
        i += 1
        candidate = f"{stem}.{i}{suffix}"
    return candidate


def save(
    obj: Recording | ProfilerTrace | LightRecording, dest: str | os.PathLike,
    format: str | None = None,
) -> None:
    """Write a Recording (or one ProfilerTrace, or a recorded.LightRecording) to `dest`; `-`
    is stdout; `.gz` compresses."""
    from .recorded import LightRecording

    dest_s = str(dest)
    if isinstance(obj, LightRecording):
        if writer_name(dest_s, format) == "jsprof":
            # the jsprof writer without the model (numpy): `record --engine node`'s file
            from .formats import _jsprof_write

            _save_as(obj, dest_s, _jsprof_write.dumps, _jsprof_write.write_file)
            return
        obj = obj.recording()
    from .trace import Recording

    rec = obj if isinstance(obj, Recording) else Recording.of(obj)
    fmt = writer_for(dest_s, format)
    if fmt.name != "jsprof":
        # A merged profile has no time axis (meta `aggregated`; jsprof's own format says
        # so); a format that keeps time as timestamps needs its samples laid out.
        from .trace import laid_out

        rec = laid_out(rec)
    _save_as(rec, dest_s, fmt.write, getattr(fmt, "write_file", None))  # type: ignore[arg-type]


def _save_as(
    rec: Any, dest_s: str, write: Callable[[Any], bytes],
    write_file: Callable[[Any, BinaryIO], None] | None,
) -> None:
    if write_file is not None and dest_s != "-" and not dest_s.lower().endswith(".gz"):
        # Written as it is made (a big jsprof file needs no buffer of its size).
        atomic_write(dest_s, lambda f: write_file(rec, f))
        return
    data = write(rec)
    # A format that is gzipped by definition (pprof) must not be compressed twice.
    if dest_s.lower().endswith(".gz") and data[:2] != _GZIP_MAGIC:
        import gzip  # here: ~1 ms of every record's start-up otherwise (issue 32)

        data = gzip.compress(data, compresslevel=6, mtime=0)
    if dest_s == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        atomic_write(dest_s, data)
