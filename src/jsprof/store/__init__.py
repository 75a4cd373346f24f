"""The collector's store: raw uploads in append-only segment files (knows nothing of HTTP).

`Store(path)` is the whole interface for the collector (`append`, `get`) and for readers such
as the Parquet compactor (`iter_uploads` with a resumable `Cursor`). Layout and guarantees:
docs/store.md.
"""

from typing import Any

from .cursor import Cursor
from .errors import RawRemoved, StoreError, StoreFullError, StoreIOError, StoreUnavailable
from .objects import is_url
from .store import CheckReport, Finding, PruneResult, Store


def open_store(path: str) -> Any:
    """The store a collector writes: a directory (`Store`), or `s3://bucket/prefix`
    (`objstore.ObjectSegmentStore`: one segment object per flush)."""
    if is_url(path):
        from .objstore import ObjectSegmentStore

        return ObjectSegmentStore(path)
    return Store(path)

__all__ = [
    "CheckReport",
    "Cursor",
    "Finding",
    "PruneResult",
    "RawRemoved",
    "Store",
    "StoreError",
    "StoreFullError",
    "StoreIOError",
    "StoreUnavailable",
    "is_url",
    "open_store",
]
