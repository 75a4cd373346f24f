"""The store's errors: raised by the raw store, its cursor and its readers."""

from __future__ import annotations

import errno


class StoreError(Exception):
    """The store cannot be used as asked (bad path, unsupported URL, damaged record)."""


def about_store(store: object, e: Exception) -> str:
    """`--store STORE: what went wrong`, naming the store once: an object store's errors
    begin with its URL already (`s3://bucket/prefix: cannot read ...`)."""
    text = str(e)
    return f"--store {text}" if text.startswith("s3://") else f"--store {store}: {text}"


class RawRemoved(StoreError):
    """The upload was stored and compacted, and its raw record removed since by the raw
    retention (`--keep-raw`): the query tables hold it, its trace as uploaded is gone."""


class StoreUnavailable(StoreError):
    """This upload was not stored, and nothing of it was acknowledged; the same request can
    succeed later (a collector answers 503 with Retry-After). `condition` names the cause
    in a few words, for one log line per condition."""

    condition = "store unavailable"
    disk_full = False  # what serve/app.py's 503 rule looks for


class StoreFullError(StoreUnavailable):
    """No space (or quota) left on the store's disk: nothing of this upload was written.
    Appends work again by themselves once space returns."""

    condition = "disk full"
    disk_full = True


class StoreIOError(StoreUnavailable):
    """The disk reported an error while writing or syncing: this upload is not stored."""

    condition = "disk I/O error"


class ObjectStoreError(StoreUnavailable):
    """The object store (S3) refused or failed a request: this upload is not stored."""

    condition = "object store unavailable"


def unavailable(e: OSError, what: str) -> StoreUnavailable:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFullError(f"{what}: no space left on the store's disk; nothing was stored")
    return StoreIOError(f"{what}: {e.strerror or e}; nothing was stored")
