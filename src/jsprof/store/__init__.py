"""The collector's store: raw uploads in append-only segment files (knows nothing of HTTP).

`Store(path)` is the whole interface for the collector (`append`, `get`) and for readers such
as the Parquet compactor (`iter_uploads` with a resumable `Cursor`). Layout and guarantees:
docs/store.md.
"""

from .cursor import Cursor
from .errors import RawRemoved, StoreError, StoreFullError, StoreIOError, StoreUnavailable
from .store import CheckReport, Finding, PruneResult, Store

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
]
