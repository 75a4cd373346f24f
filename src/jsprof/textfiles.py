"""Small text files the user names on the command line: lists (apps) and secrets (tokens,
ingest keys). One reader for all of them, so each says its mistakes the same way: the
option and the path, what is wrong, no traceback.

Stdlib only: `jsprof serve`'s argument parsing imports it before anything heavy.
"""

from __future__ import annotations

from pathlib import Path

from .errors import UsageError

# A list of apps or a token is small: a larger file (or /dev/zero) is not one.
MAX_TEXT_FILE_BYTES = 1 << 20


def read_text_file(path: str | Path, what: str) -> str:
    """The text of `path`, given by option `what` (its name starts each error)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_TEXT_FILE_BYTES + 1)
        if len(data) > MAX_TEXT_FILE_BYTES:
            raise UsageError(f"{what} {p}: over {MAX_TEXT_FILE_BYTES} bytes; not a text file")
        return data.decode()
    except FileNotFoundError:
        raise UsageError(f"{what} {p}: no such file") from None
    except PermissionError:
        raise UsageError(f"{what} {p}: permission denied") from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise UsageError(f"{what} {p}: not a text file") from None
    except OSError as e:  # a socket (ENXIO), an I/O error
        raise UsageError(f"{what} {p}: cannot read it ({e.strerror or e})") from None


def read_secret_file(path: str | Path, what: str, secret: str = "token") -> str:
    """A token or key kept in a file: its first line, whitespace stripped. `secret` names
    it in the message for an empty file ("put the {secret} on its first line")."""
    p = Path(path)
    lines = read_text_file(p, what).strip().splitlines()
    token = lines[0].strip() if lines else ""
    if not token:
        raise UsageError(f"{what} {p}: empty; put the {secret} on its first line")
    return token
