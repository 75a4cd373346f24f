"""The collector's store: raw uploads in append-only segment files (knows nothing of HTTP).

`Store(path)` is the whole interface for the collector (`append`, `get`) and for readers such
as the Parquet compactor (`iter_uploads` with a resumable `Cursor`). Layout and guarantees:
docs/store.md.
"""

from .store import Cursor, PruneResult, Store, StoreError

__all__ = ["Cursor", "PruneResult", "Store", "StoreError"]
