"""The object store under a shared field store: whole objects put once, read, listed.

What the store needs of object storage (S3 and what speaks its API) is small, and a local
directory can give it too, so the code above (`objstore.py`: the collectors' segment
objects, the compactor's lease and commits) is one code path for both:

- `get(key)` -> (bytes, etag) or None;
- `put(key, data)`: replace (only for objects no reader trusts yet: unlisted parts);
- `put_new(key, data)`: create only when absent (S3 `If-None-Match: *`), False when it is
  there: a segment object is never rewritten, a lease is taken by one process;
- `put_if(key, data, etag)`: replace only when unchanged since read (S3 `If-Match`), None
  when another writer got there first: the manifest's commit and the lease's renewal;
- `list(prefix, start_after=, end_before=, max_keys=)` -> [(key, size)], sorted, the keys
  past `start_after` and before `end_before` when given (S3: ListObjectsV2's `StartAfter`,
  and no page fetched past `end_before`: a listing costs what it returns), the first
  `max_keys` of them when given (a walk of the bucket in steps); `delete(key)`;
- `aged(prefix, start_after=, end_before=)` -> [(key, seconds since it was last
  written)], by the store's own clock (S3: the listing's `LastModified` against its
  reply's `Date`), so no two machines' wall clocks are compared;
- `clock()` -> the store's own clock (epoch seconds): S3, this machine's clock set by the
  `Date` of the bucket's last reply (segment objects are named by it, so that their
  names sort by one clock whatever the collectors' own say).

An etag is opaque: equal etags mean the same object version. `open_objects(url)` gives
`LocalObjects` for a directory and `S3Objects` (`s3.py`, the `s3` extra) for `s3://`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from .durable import fsync_dir
from .errors import StoreError


class ObjectStore(Protocol):
    url: str

    def get(self, key: str) -> tuple[bytes, str] | None: ...

    def put(self, key: str, data: bytes) -> str: ...

    def put_new(self, key: str, data: bytes) -> bool: ...

    def put_if(self, key: str, data: bytes, etag: str) -> str | None: ...

    def list(self, prefix: str, start_after: str | None = None,
             end_before: str | None = None, max_keys: int | None = None
             ) -> list[tuple[str, int]]: ...

    def delete(self, key: str) -> None: ...

    def aged(self, prefix: str, start_after: str | None = None,
             end_before: str | None = None) -> list[tuple[str, float]]: ...

    def clock(self) -> float: ...


def is_url(store: str | os.PathLike) -> bool:
    return os.fspath(store).startswith("s3://")


def open_objects(store: str | os.PathLike) -> ObjectStore:
    """The object store a `--store` names: `s3://bucket/prefix`, else a local directory."""
    text = os.fspath(store)
    if text.startswith("s3://"):
        from .s3 import S3Objects

        return S3Objects(text)
    if "://" in text:
        raise StoreError(f"{text}: a store is a directory or s3://bucket/prefix")
    return LocalObjects(text)


def _within(key: str, start_after: str | None, end_before: str | None) -> bool:
    return (start_after is None or key > start_after) and (end_before is None
                                                          or key < end_before)


def _etag(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


class LocalObjects:
    """Objects as files under a directory: written to a temporary name, fsync'd, then
    linked (put_new: `link` fails when the name exists) or renamed into place; put_if holds
    a flock on the key's lock file while it compares and renames."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.url = os.fspath(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"{root}: cannot create the store directory: {e.strerror}") from None

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in key.split("/"):
            raise StoreError(f"{key!r}: not an object key")
        return self.root / key

    def get(self, key: str) -> tuple[bytes, str] | None:
        try:
            data = self._path(key).read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None
        return data, _etag(data)

    def _tmp(self, path: Path, data: bytes) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def put(self, key: str, data: bytes) -> str:
        path = self._path(key)
        os.replace(self._tmp(path, data), path)
        fsync_dir(path.parent)
        return _etag(data)

    def put_new(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        tmp = self._tmp(path, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        fsync_dir(path.parent)
        return True

    def put_if(self, key: str, data: bytes, etag: str) -> str | None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            got = self.get(key)
            if got is None or got[1] != etag:
                return None
            return self.put(key, data)
        finally:
            os.close(fd)

    def list(self, prefix: str, start_after: str | None = None,
             end_before: str | None = None, max_keys: int | None = None
             ) -> list[tuple[str, int]]:
        got = sorted(kv for kv in self._walk(prefix) if _within(kv[0], start_after,
                                                                  end_before))
        return got if max_keys is None else got[:max_keys]

    def clock(self) -> float:
        return time.time()

    def _walk(self, prefix: str) -> Iterator[tuple[str, int]]:
        base = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                if name.startswith("."):
                    continue
                full = Path(dirpath, name)
                key = full.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    yield key, full.stat().st_size

    def aged(self, prefix: str, start_after: str | None = None,
             end_before: str | None = None) -> list[tuple[str, float]]:
        now = time.time()
        out = []
        for key, _size in self._walk(prefix):
            if not _within(key, start_after, end_before):
                continue
            try:
                out.append((key, now - (self.root / key).stat().st_mtime))
            except FileNotFoundError:
                pass
        return sorted(out)

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink()
        except FileNotFoundError:
            pass
