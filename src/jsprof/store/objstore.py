"""The field store on an object store (`--store s3://bucket/prefix`), after Grafana
Pyroscope v2: stateless collectors, one immutable segment object per flush, a compactor
that holds a lease made of the store's own conditional writes, queries that only read.

Keys under the store's prefix (docs/store.md, "On object storage"):

    segments/t<time>-<writer>-<n>-t<first>-<last>-<count>.seg
                                        one flush of one collector: <count> records in
                                        the segment format (segment.py) received in
                                        [first, last] ms, its put begun at <time> ms (the
                                        bucket's clock: names sort by time, readers list
                                        the recent ones), sealed by its trailer; created
                                        with If-None-Match, never rewritten
    tables/_manifest.json               the tables' commit (the metadata index): replaced
                                        only with If-Match on the etag its writer read
    tables/....<run token>.parquet      the Parquet parts it lists (tables/ layout), each
                                        created once by the run that made it
    leases/compactor.json               who compacts (`Lease`): taken with If-None-Match,
                                        or If-Match on a lapsed or released one

The tables code (`tables/`) runs unchanged on a local *mirror*: a directory laid out as a
local store (segments/, tables/) that holds the objects a run needs. The compactor pulls
the committed manifest and its parts and the segments past its cursor, compacts and merges
there, pushes the new parts under names of its own, then commits the manifest with
If-Match: a compactor whose lease lapsed (paused, partitioned) loses that commit, lists
nothing and has replaced or deleted nothing another wrote. A query pulls the
same into its own mirror and reads it; it writes nothing to the bucket.

An upload is acknowledged once the segment object holding it is stored. A collector killed
mid-flush leaves that object whole or absent (a put is atomic); a client's retry of an
upload whose object did land stores it twice, so the compactor keeps each upload id once
(`Deduped`).
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from . import segment as seg
from .cursor import put_time
from .errors import ObjectStoreError, StoreError, StoreUnavailable
from .objects import ObjectStore, open_objects

log = logging.getLogger("jsprof.store")

SEGMENTS = "segments/"
MANIFEST_KEY = "tables/_manifest.json"
LEASE_KEY = "leases/compactor.json"
PRUNED_KEY = "pruned.json"  # retention marks (objprune.py), as a local store's pruned.json
REPORT_KEY = "compactor.json"  # the compactor's run report (RunReport), as a local store's
LEASE_S = 30.0  # a lease not renewed for this long is free
FLUSH_MAX_BYTES = 32 << 20  # one segment object holds at most this much (a flush is cut)
# Tests: called with ("before", n) and ("after", n) around segment object n's put, in the
# flushing thread (tests/test_store_s3.py blocks there and kills the collector).
_flush_hook: Any = None
# A segment object's name begins with the time its put began, by the bucket's clock
# (`ObjectStore.clock`), so names sort by time and a reader lists only the recent ones
# (`listing_floor`): t<ms, 13 digits>-<host>-<pid>-<hex>-<n>-t<first ms>-<last ms>-<count>.seg
_SEG_NAME = re.compile(r"^t([0-9]{13})-[A-Za-z0-9_.]+-[0-9]+-[0-9a-f]{6}-[0-9]{6,}"
                       r"-t([0-9]+)-([0-9]+)-([0-9]+)\.seg$")
# A jsprof before issue 34's listing named them by its writer's start (which does not sort
# by time): <writer start s>-<host>-<pid>-<hex>-<n>[-t<first ms>-<last ms>]-<count>.seg.
# They all sort before the new names ("1..." < "t..."); read as before, listed in full.
_OLD_SEG_NAME = re.compile(r"^([0-9]{10})-[A-Za-z0-9_.]+-[0-9]+-[0-9a-f]{6}-[0-9]{6,}"
                           r"(?:-t([0-9]+)-([0-9]+))?-([0-9]+)\.seg$")
NEW_SEGMENTS = SEGMENTS + "t"  # where the time-sorted names are
# A collector acknowledges a segment object only if its put returned within PUT_MAX_S of
# the time in its name (its own monotonic clock): an acknowledged object is listed within
# PUT_MAX_S (plus the bucket clock's error, about a second) of its name's time. Readers
# list from LIST_MARGIN_S before the newest name they have read, which covers that.
PUT_MAX_S = 120.0
LIST_MARGIN_S = 300.0
# `GET /v1/traces/{id}` of a compacted upload lists the segment objects put within this of
# its receivedAt (the collector's clock at ingest; the names: the bucket's, by which that
# collector's clock is off by what NTP leaves, and the put waits a flush or two)
GET_WINDOW_S = 3600.0


def segment_match(name: str) -> re.Match | None:
    return _SEG_NAME.match(name) or _OLD_SEG_NAME.match(name)


def segment_count(name: str) -> int | None:
    """Records in the segment object `name` (its name says so: a reader skips a segment it
    has read to its end without fetching it), or None for a name not ours."""
    m = segment_match(name)
    return int(m.group(4)) if m else None


def segment_time(name: str) -> int | None:
    """When the put of segment object `name` began (epoch ms, the bucket's clock), or
    None for a name of an older jsprof (or not ours)."""
    m = _SEG_NAME.match(name)
    return int(m.group(1)) if m else None


def segment_put_time(name: str) -> int | None:
    """Where segment object `name` sorts among the time-sorted names (epoch ms): its put's
    time, or for an older jsprof's name its writer's start, which a prune's copy of it is
    named by (objprune._rewritten_key); None for a name not ours."""
    return put_time(name) if segment_match(name) else None


def segment_first(name: str) -> float | None:
    """The oldest receivedAt (epoch ms) segment object `name` holds, by its name (an older
    jsprof's name without a range: its writer's start)."""
    m = segment_match(name)
    if m is None:
        return None
    if m.group(2) is not None:
        return float(m.group(2))
    return float(m.group(1)) * 1000 if len(m.group(1)) == 10 else None


def segment_may_hold(name: str, received_at: float | None) -> bool:
    """Whether segment object `name` may hold an upload received at `received_at` (epoch
    ms): within the range its name gives, or (a name without one) written by a writer
    started before then; any of ours when the time is unknown."""
    m = segment_match(name)
    if m is None:
        return False
    if received_at is None:
        return True
    if m.group(2) is not None:
        return int(m.group(2)) <= received_at <= int(m.group(3))
    return int(m.group(1)) * 1000 <= received_at + 1000


def listing_floor(positions: dict[str, int]) -> str | None:
    """The key after which a reader at cursor `positions` lists the time-sorted segment
    objects (ListObjectsV2's StartAfter), or None (from the first): the oldest it has not
    read to its end, else LIST_MARGIN_S before the newest it has read. Every name before it
    was read to its end, or is of a put that took longer than PUT_MAX_S, which no
    collector acknowledged. So a listing costs the objects of the last minutes and those
    not read yet, not every one the bucket keeps; the names it no longer lists leave the
    cursor (`_cursor_trim`), which stays as small."""
    times = [(t, n) for n in positions if (t := segment_time(n)) is not None]
    if not times:
        return None
    floor = max(t for t, _ in times) - int(LIST_MARGIN_S * 1000)
    for t, n in times:
        if t < floor and positions[n] < (segment_count(n) or 0):
            floor = t
    return f"{NEW_SEGMENTS}{max(floor, 0):013d}"


def list_segments(objects: ObjectStore, positions: dict[str, int]) -> list[tuple[str, float]]:
    """[(key, seconds since written)] of the segment objects a reader at `positions` may
    not have read to their end: an older jsprof's (all of them: their names do not sort by
    time; a store written only by this jsprof has none, for a one-key look) and the
    time-sorted ones from `listing_floor`."""
    return (objects.aged(SEGMENTS, end_before=NEW_SEGMENTS)
            + objects.aged(NEW_SEGMENTS, start_after=listing_floor(positions)))


# ---- the collectors' side --------------------------------------------------------------------


class _Slot:
    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = False
        self.error: BaseException | None = None


class ObjectSegmentStore:
    """What a collector worker writes to: `append` returns once the segment object holding
    the upload is stored (group commit: the appends waiting while one put runs go together
    into the next object). Stateless: nothing is read at start, nothing kept but the
    writer's name and segment number."""

    def __init__(self, url: str, objects: ObjectStore | None = None) -> None:
        self.objects = objects if objects is not None else open_objects(url)
        self.url = self.path = self.objects.url
        host = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40] or "host"
        self.prefix = f"{host}-{os.getpid()}-{secrets.token_hex(3)}"
        self.n = 0
        self._cond = threading.Condition()
        self._queue: list[tuple[seg.Record, _Slot]] = []
        self._flushing = False
        self.flushes = 0

    def append(self, upload_id: str, meta: dict, trace_json: bytes | None, *,
               gzipped: bytes | None = None) -> bool:
        """Store an upload; True once it is in a stored segment object. A repeated id is
        stored again (the compactor keeps one), so this never answers False.
        Raises StoreUnavailable (an ObjectStoreError) when the put failed: nothing of this
        upload is acknowledged."""
        received = meta.get("receivedAt")
        if type(received) not in (int, float):
            received = time.time() * 1000.0
        record = seg.make_record(upload_id, orjson.dumps(meta), trace_json, float(received),
                                 gzipped)
        slot = _Slot()
        with self._cond:
            self._queue.append((record, slot))
            while not slot.done:
                if self._flushing:
                    self._cond.wait()
                    continue
                self._flushing = True
                batch, size = [], 0
                while self._queue and (not batch or size < FLUSH_MAX_BYTES):
                    batch.append(self._queue.pop(0))
                    size += batch[-1][0].size
                n = self.n
                self.n += 1  # a key is never used twice, whatever its put's outcome
                self._cond.release()
                error: BaseException | None = None
                try:
                    self._put(n, [r for r, _ in batch])
                except BaseException as e:  # noqa: BLE001 - handed to every waiter
                    error = e
                finally:
                    self._cond.acquire()
                    self._flushing = False
                    for _, s in batch:
                        s.done, s.error = True, error
                    self._cond.notify_all()
        if slot.error is not None:
            if isinstance(slot.error, StoreUnavailable):
                raise StoreUnavailable(str(slot.error)) from None
            raise slot.error
        return True

    def _put(self, n: int, records: list[seg.Record]) -> None:
        parts: list[bytes] = []
        lo, hi = seg.NO_RANGE
        for i, r in enumerate(records):
            parts.extend(r.parts(i))
            lo, hi = min(lo, r.received_at), max(hi, r.received_at)
        parts.append(seg.encode_trailer(len(records), (lo, hi)))
        # The put's start by the bucket's clock first (names sort by time: readers list
        # the recent ones), the receivedAt range after (GET /v1/traces/{id} fetches only
        # the segments whose range holds the upload's time, which the tables give).
        began = time.monotonic()
        at = math.floor(self.objects.clock() * 1000)
        key = (f"{SEGMENTS}t{at:013d}-{self.prefix}-{n:06d}-t{math.floor(lo)}-"
               f"{math.ceil(hi)}-{len(records)}.seg")
        if _flush_hook is not None:
            _flush_hook("before", n)
        data = b"".join(parts)
        # False: the key exists (412), or a conditional write to it is under way (409), and
        # only this writer makes its keys: its own earlier attempt (botocore retries a put
        # whose reply it missed). Acknowledged only once that object is seen stored whole:
        # an attempt still in flight may yet fail.
        if not self.objects.put_new(key, data):
            got = self.objects.get(key)
            if got is None or got[0] != data:
                raise ObjectStoreError(f"{self.objects.url}: cannot create {key}: a write "
                                       "to it is still under way")
        took = time.monotonic() - began
        if took > PUT_MAX_S:
            # readers may have listed past its name's time already (`listing_floor`)
            raise StoreUnavailable(f"{self.objects.url}: storing {key} took {took:.0f} s "
                                   f"(over {PUT_MAX_S:.0f} s): not acknowledged; retry")
        if _flush_hook is not None:
            _flush_hook("after", n)
        self.flushes += 1

    # What the collector app asks of any store.
    def recover(self) -> int:
        return 0

    def rotate(self) -> None:
        pass

    def close(self) -> None:
        pass

    def get(self, upload_id: str) -> tuple[dict, bytes] | None:
        """(meta, trace_json) of a stored upload (`GET /v1/traces/{id}`), or None."""
        return find_upload(self.objects, upload_id)

    def __contains__(self, upload_id: str) -> bool:
        return False

    def pruned_before(self) -> dict[str, float]:
        return {}


    def probe(self) -> None:
        """One read of the bucket (the lease's key): StoreUnavailable when the endpoint,
        the bucket or the credentials do not do."""
        self.objects.get(LEASE_KEY)

    def health(self) -> dict[str, Any]:
        """What operators read of a store on an object store (`/readyz`, `/v1/status`,
        `/metrics`): one listing of the bucket and the manifest. Raises StoreUnavailable
        when the bucket does not answer."""
        return object_health(self.objects)


class ManifestDamaged(StoreError):
    """The bucket's committed manifest is not a JSON object: operators' reads report it
    (`serve check` as damage, `/metrics` and `/v1/status` as no tables) instead of failing
    with a traceback; only a compaction run replaces it."""


def bucket_manifest(objects: ObjectStore) -> dict[str, Any]:
    """The committed manifest as its reader needs it ({} when none was ever committed).
    Raises ManifestDamaged, one line naming the object, when it does not parse."""
    got = objects.get(MANIFEST_KEY)
    if got is None:
        return {}
    try:
        doc = orjson.loads(got[0])
    except orjson.JSONDecodeError as e:
        raise ManifestDamaged(f"{MANIFEST_KEY}: not a readable compaction manifest ({e})"
                              ) from None
    if type(doc) is not dict:
        raise ManifestDamaged(f"{MANIFEST_KEY}: not a readable compaction manifest (a JSON "
                              f"{type(doc).__name__}, not an object)")
    return doc


def object_health(objects: ObjectStore) -> dict[str, Any]:
    """Uploads in segment objects past the committed cursor (`pending`), what the tables
    hold (`compacted`, `parts`), and the bytes and objects under each top-level folder.
    A damaged manifest counts as no tables (as a local store's unreadable one does) and is
    named in `manifestProblem`.

    What a scrape of `/metrics` or `/v1/status` costs: the manifest and the report (two
    gets) and the segment objects a compaction run would list (`list_segments`: those of
    the last minutes and those not read yet), whatever the bucket has kept. The folders'
    figures are the compactor's (`BucketUse`, in its report: as of `foldersAt`, when its
    last whole walk of the bucket began; empty until one ended)."""
    problem = None
    try:
        man = bucket_manifest(objects)
    except ManifestDamaged as e:
        man, problem = {}, str(e)
    positions: dict[str, int] = {}
    if man.get("hasCursor") and man.get("cursorKind") == "Cursor":
        positions = orjson.loads(man["cursor"])
    pending = 0
    oldest: float | None = None  # epoch ms: the oldest receivedAt a pending segment holds
    # below the floor: read to its end, left the cursor (`listing_floor`)
    for key, _age in list_segments(objects, positions):
        name = key[len(SEGMENTS):]
        count = segment_count(name)
        if count is not None and count > positions.get(name, 0):
            pending += count - positions.get(name, 0)
            first = segment_first(name)
            if first is not None and (oldest is None or first < oldest):
                oldest = first
    parts = len(man.get("uploads", [])) + sum(
        len(v) for r in man.get("releases", {}).values() for v in r["parts"].values())
    report = read_report(objects)
    use = report.get("bucketUse") if isinstance(report.get("bucketUse"), dict) else {}
    return {"pending": pending, "oldestPending": oldest, "report": report,
            "compacted": compacted_rows(man), "parts": parts, "manifestProblem": problem,
            "folders": use.get("folders") or {}, "foldersAt": use.get("at")}


class BucketUse:
    """The bytes and objects under each top-level folder of the bucket, for `/metrics` and
    `/v1/status`, walked by the compactor in steps of at most `step` keys a run (one or a
    few ListObjectsV2 pages, resumed after the last key listed) so that neither a run nor
    a scrape pays for the bucket's history: a bucket of N objects is walked in N / `step`
    runs, and the figures are those of the last whole walk (`at`: when it began, by the
    bucket's clock). The walk is this process's: a new holder of the lease starts its own
    (the report keeps the last figures meanwhile)."""

    STEP = 5000  # keys a run lists: 5 pages (a few hundred ms); 1 M objects in ~17 min at 5 s

    def __init__(self, objects: ObjectStore, step: int = STEP) -> None:
        self.objects, self.step = objects, step
        self._after: str | None = None
        self._folders: dict[str, list[int]] = {}
        self._at: float | None = None

    def walk(self) -> dict[str, Any] | None:
        """One step; the figures ({"at", "folders": {top: {"bytes", "objects"}}}) when it
        ended a walk, else None."""
        if self._after is None:
            self._at = self.objects.clock()
            self._folders = {}
        got = self.objects.list("", start_after=self._after, max_keys=self.step)
        for key, size in got:
            f = self._folders.setdefault(key.split("/", 1)[0], [0, 0])
            f[0] += size
            f[1] += 1
        if len(got) >= self.step:
            self._after = got[-1][0]
            return None
        self._after = None
        return {"at": self._at, "folders": {k: {"bytes": v[0], "objects": v[1]}
                                            for k, v in sorted(self._folders.items())}}


def read_report(objects: ObjectStore) -> dict[str, Any]:
    """The compactor's run report in the bucket (an empty dict: never written)."""
    got = objects.get(REPORT_KEY)
    try:
        doc = orjson.loads(got[0]) if got is not None else {}
    except orjson.JSONDecodeError:
        return {}
    return doc if type(doc) is dict else {}


class RunReport:
    """The compactor's run report in the bucket (`compactor.json`: `runsTotal`,
    `failuresTotal`, `consecutiveFailures`, `lastRunAt`, `lastSuccessAt`, `lastFailureAt`,
    `lastError`, Unix seconds; `health.with_run`), written by the lease holder after each
    of its runs: replaced with If-Match on the etag it wrote last (one put per run), read
    again when another holder wrote it since."""

    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects
        self.doc: dict[str, Any] | None = None
        self.etag: str | None = None

    def record(self, error: str | None, now: float | None = None,
               use: dict[str, Any] | None = None) -> dict[str, Any]:
        """The report with one more run (`health.with_run`) and, when a walk of the bucket
        ended (`BucketUse.walk`), its figures as `bucketUse`."""
        from .health import with_run

        now = time.time() if now is None else now
        doc: dict[str, Any] = {}
        for _ in range(3):
            if self.doc is None:
                got = self.objects.get(REPORT_KEY)
                self.etag = got[1] if got is not None else None
                try:
                    self.doc = orjson.loads(got[0]) if got is not None else {}
                except orjson.JSONDecodeError:
                    self.doc = {}
                if type(self.doc) is not dict:
                    self.doc = {}
            doc = with_run(self.doc, error, now)
            doc["owner"] = socket.gethostname()
            if use is not None:
                doc["bucketUse"] = use
            data = orjson.dumps(doc)
            if self.etag is not None:
                etag = self.objects.put_if(REPORT_KEY, data, self.etag)
            elif self.objects.put_new(REPORT_KEY, data):
                got = self.objects.get(REPORT_KEY)
                etag = got[1] if got is not None and got[0] == data else None
            else:
                etag = None
            if etag is not None:
                self.doc, self.etag = doc, etag
                return doc
            self.doc = None  # another holder wrote it since: read it again
        return doc


def compacted_rows(man: dict) -> int:
    """Uploads the tables of manifest `man` hold (a prune removes some: not `nextUk`)."""
    try:
        return sum(int(e["rows"]) for e in man.get("uploads", []) if isinstance(e, dict))
    except (KeyError, TypeError, ValueError):
        return 0


def find_upload(objects: ObjectStore, upload_id: str) -> tuple[dict, bytes] | None:
    """(meta, trace_json) of the upload `upload_id` as it was stored, or None: not in the
    tail (the segment objects past the committed cursor, in this machine's query mirror),
    not in the tables. A compacted upload's record is read from the segment objects whose
    receivedAt range (in their names) holds the time the tables give it, among those its
    uploads part came from (the part's `segments`: its first and last segment names, which
    sort by the put's time): a listing of those put within GET_WINDOW_S of that time, then
    (a collector's clock that far off the bucket's) of the part's whole range, and a fetch
    or two; never a listing of the bucket's history. RawRemoved when the tables hold it
    and no segment object does any more (raw retention, a lifecycle rule)."""
    import pyarrow.parquet as pq

    from .errors import RawRemoved
    from .tables.idfilter import id_hash, may_hold
    from .tables.manifest import part_path, read_manifest

    with query_lock(objects.url):
        root = query_mirror(objects.url, objects)
        found = _scan_segments(root / "segments", upload_id)
        if found is not None:
            return found
        at: float | None = None
        app: str | None = None
        held = False
        span: list | None = None
        tdir = root / "tables"
        h = id_hash(upload_id)
        for e in reversed(read_manifest(root)["uploads"]):
            if not may_hold(tdir / part_path(e), h):
                continue  # its ids' filter says not (an unknown id: as a rule every part)
            t = pq.read_table(tdir / part_path(e), columns=["id", "received_at", "app"],
                              filters=[("id", "==", upload_id)])
            if t.num_rows:
                held, at = True, t.column("received_at")[0].as_py()
                app = t.column("app")[0].as_py()
                span = e.get("segments") if isinstance(e, dict) else None
                break
    if not held:
        return None
    # First the segment objects put within GET_WINDOW_S of its receivedAt (an hour or two
    # of them), then the rest of its part's range: names sort by the put's time.
    lo = hi = None
    if at is not None:
        lo, hi = (max(0, math.floor(at - GET_WINDOW_S * 1000)),
                  math.ceil(at + GET_WINDOW_S * 1000))
    listings: list[Callable[[], list[str]]] = []
    if isinstance(span, list) and len(span) == 2 and all(isinstance(n, str) for n in span):
        # An older jsprof's names (not time-sorted, all before the new ones) are listed
        # whole when the range begins among them, with every new name up to its end: a
        # new collector's put before an old one's start, and a prune's copies of old
        # names, named by their writers' start (segment_put_time: the range's last too).
        old = segment_time(span[0]) is None
        first, last = segment_time(span[0]) or 0, segment_put_time(span[1])
        listings.append(lambda: _names(
            objects, None if last is None else max(first, lo or 0),
            None if last is None else min(last, last if hi is None else hi), old))
        if last is not None:
            listings.append(lambda: _names(objects, first, last, False))
    else:
        # A part compacted before parts named their segments: the hour around it, then
        # (its collector's clock that far off the bucket's) every name, as before.
        if lo is not None and hi is not None:
            listings.append(lambda: _names(objects, lo, hi, old=True))
        listings.append(lambda: [k[len(SEGMENTS):] for k, _ in objects.list(SEGMENTS)])
    found = _fetch_listed(objects, listings, upload_id, at)
    if found is not None:
        return found
    if _pruned_since(objects, app, at):
        return None  # a prune cut it while we looked: gone, as a query counts it
    raise RawRemoved(f"{upload_id!r}: compacted, and no segment object holds its raw record "
                     "any more (raw retention, or a lifecycle rule on segments/); the query "
                     "tables still count it")


# A lookup lists again when a segment object it listed was gone when fetched, at most this
# often: a prune writes such an object anew (put first, then the old one deleted)
RELISTS = 3


def _fetch_listed(objects: ObjectStore, listings: list[Callable[[], list[str]]],
                  upload_id: str, at: float | None) -> tuple[dict, bytes] | None:
    """The upload's record from the names of each listing in turn (those not fetched
    yet). A name listed and gone when fetched is a prune's rewrite (or a deletion) since
    the listing: the copy, put before the original was deleted and named where it sorted,
    is in a listing made after, so the last listing is made again (up to RELISTS times)."""
    tried: set[str] = set()
    queue = list(listings)
    again = 0
    while queue:
        listing = queue.pop(0)
        names = [n for n in listing() if n not in tried]
        found, vanished = _fetch_holding(objects, names, upload_id, at)
        if found is not None:
            return found
        tried.update(names)
        if vanished and not queue and again < RELISTS:
            again += 1
            queue.append(listing)
    return None


def _pruned_since(objects: ObjectStore, app: str | None, at: float | None) -> bool:
    """Whether the bucket's retention marks, read now, cut an upload of `app` received at
    `at` (a prune writes its mark before it removes anything)."""
    got = objects.get(PRUNED_KEY)
    if got is None or at is None:
        return False
    try:
        marks = orjson.loads(got[0])
    except orjson.JSONDecodeError:
        return False
    if type(marks) is not dict:
        return False
    cuts = [v for k, v in marks.items() if k in ("*", app) and type(v) in (int, float)]
    return bool(cuts) and at < max(cuts)


def _names(objects: ObjectStore, lo: int | None, hi: int | None, old: bool) -> list[str]:
    """The names of the segment objects put from `lo` to `hi` (epoch ms, the bucket's
    clock; None: none of them), and with `old` an older jsprof's (not time-sorted)."""
    keys = objects.list(SEGMENTS, end_before=NEW_SEGMENTS) if old else []
    if lo is not None and hi is not None and lo <= hi:
        keys += objects.list(NEW_SEGMENTS, start_after=f"{NEW_SEGMENTS}{lo:013d}",
                             end_before=f"{NEW_SEGMENTS}{hi + 1:013d}")
    return [k[len(SEGMENTS):] for k, _ in keys]


def _fetch_holding(objects: ObjectStore, names: list[str], upload_id: str,
                   at: float | None) -> tuple[tuple[dict, bytes] | None, bool]:
    """The upload's record from the first of the segment objects `names` whose receivedAt
    range (in its name) holds `at` and that holds it, or None; and whether one of those
    fetched was gone (removed since listed)."""
    import tempfile

    vanished = False
    with tempfile.TemporaryDirectory(prefix="jsprof-get-") as tmp:
        for name in names:
            if not segment_may_hold(name, at):
                continue
            got = objects.get(SEGMENTS + name)
            if got is None:
                vanished = True  # removed since listed
                continue
            path = Path(tmp, name)
            path.write_bytes(got[0])
            found = _scan_segments(Path(tmp), upload_id, [name])
            path.unlink()
            if found is not None:
                return found, vanished
    return None, vanished


def _scan_segments(sdir: Path, upload_id: str,
                   names: list[str] | None = None) -> tuple[dict, bytes] | None:
    """The first whole record of `upload_id` in the segment files under `sdir`."""
    from .segment import RecordHeader, SegmentError

    if names is None:
        names = sorted(e.name for e in os.scandir(sdir) if e.name.endswith(".seg"))
    for name in names:
        try:
            fd = os.open(sdir / name, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            for h in seg.scan(fd):
                if isinstance(h, RecordHeader) and h.upload_id == upload_id:
                    try:
                        meta, trace = seg.read_record(fd, h)
                    except SegmentError:
                        continue  # a damaged copy: a retry's may be whole
                    return orjson.loads(meta), trace
        finally:
            os.close(fd)
    return None


# ---- a local mirror of what a run reads --------------------------------------------------------


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jsprof" / "objstore"


def mirror_dir(url: str, role: str) -> Path:
    """This machine's mirror of the store at `url` for `role` (compactor, query)."""
    h = hashlib.sha256(url.encode()).hexdigest()[:16]
    return cache_root() / f"{h}-{role}"


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class Mirror:
    """A local directory shaped as a store, holding the objects a run needs: the committed
    manifest and the parts it lists (immutable: fetched once), and the segment objects
    past a cursor."""

    def __init__(self, objects: ObjectStore, root: Path, sweep: bool = False) -> None:
        self.objects = objects
        self.root = root
        self.sweep = sweep  # a query's mirror: old parts go (the compactor's merge sweeps its own)
        self.tdir = root / "tables"
        (root / "segments").mkdir(parents=True, exist_ok=True)
        self.tdir.mkdir(parents=True, exist_ok=True)
        self._etag_file = root / "manifest.etag"

    @property
    def etag(self) -> str | None:
        try:
            return self._etag_file.read_text() or None
        except FileNotFoundError:
            return None

    def set_etag(self, etag: str | None) -> None:
        _write_atomic(self._etag_file, (etag or "").encode())

    def pull_tables(self) -> bool:
        """The bucket's committed manifest and the parts it lists (not the obsolete ones);
        True when it differs from the one this mirror had."""
        from .tables.manifest import MANIFEST, part_paths

        got = self.objects.get(MANIFEST_KEY)
        if got is None:
            changed = self.etag is not None or (self.tdir / MANIFEST).exists()
            if changed:
                shutil.rmtree(self.tdir, ignore_errors=True)
                self.tdir.mkdir(parents=True)
                self.set_etag(None)
            return changed
        data, etag = got
        if etag == self.etag and (self.tdir / MANIFEST).exists():
            return False
        paths = part_paths(orjson.loads(data))
        for rel in sorted(paths):
            local = self.tdir / rel
            if local.exists():
                continue
            obj = self.objects.get("tables/" + rel)
            if obj is None:
                raise StoreError(f"{self.objects.url}: tables/{rel} is listed by the manifest "
                                 "but missing from the store")
            _write_atomic(local, obj[0])
        _write_atomic(self.tdir / MANIFEST, data)
        self.set_etag(etag)
        if self.sweep:
            self._sweep(paths | {MANIFEST})
        return True

    def _sweep(self, keep: set[str]) -> None:
        """Remove the parts no manifest has listed for a merge's grace, counted from the
        first pull that found them unlisted (a query on this machine that read an older
        manifest still finds its parts): the mirror stays the size of the tables, not of
        their history."""
        from .tables.merge import GRACE_S

        book = self.root / "unlisted.json"
        try:
            since: dict[str, float] = orjson.loads(book.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            since = {}
        now = time.time()
        seen: dict[str, float] = {}
        for dirpath, _dirs, files in os.walk(self.tdir):
            for name in files:
                full = Path(dirpath, name)
                rel = full.relative_to(self.tdir).as_posix()
                if rel in keep or name.startswith("."):
                    continue
                at = since.get(rel, now)
                if now - at > GRACE_S:
                    full.unlink(missing_ok=True)
                else:
                    seen[rel] = at
        _write_atomic(book, orjson.dumps(seen))

    def pull_segments(self, positions: dict[str, int]) -> dict[str, float]:
        """Fetch the segment objects with records past `positions` (segment -> records
        read); drop local copies read to their end. The segment objects listed
        (`list_segments`: an older jsprof's and the recent ones): name -> seconds since
        written (the bucket's clock)."""
        sdir = self.root / "segments"
        remote: dict[str, float] = {}
        for key, age in list_segments(self.objects, positions):
            name = key[len(SEGMENTS):]
            count = segment_count(name)
            if count is None:
                continue
            remote[name] = age
            local = sdir / name
            if positions.get(name, 0) >= count:
                local.unlink(missing_ok=True)
                continue
            if local.exists():
                continue
            obj = self.objects.get(key)
            if obj is None:
                continue  # removed since listed (retention)
            _write_atomic(local, obj[0])
        for e in os.scandir(sdir):
            if e.name.endswith(".seg") and e.name not in remote:
                os.unlink(e.path)
        return remote


class Deduped:
    """An upload source (`tables.compact.UploadSource`) that yields each upload id once:
    `seen` holds the ids already compacted and grows with those read (a compactor's, kept
    between its runs); None: each read starts afresh, every id once within it (a query's
    tail, read once per snapshot)."""

    def __init__(self, store: Any, seen: set[str] | None) -> None:
        self.store = store
        self.seen = seen
        self.dropped = 0
        self.cursor: Any = None  # after the last upload read, kept or dropped

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def __contains__(self, upload_id: str) -> bool:
        return True  # every row a mirror's tables hold was stored (rows without a time ask)

    def iter_uploads(self, after: Any = None, on_damage: Any = None
                     ) -> Iterator[tuple[Any, str, dict, bytes]]:
        seen = self.seen if self.seen is not None else set()
        for cur, upload_id, meta, body in self.store.iter_uploads(after, on_damage=on_damage):
            self.cursor = cur
            if upload_id in seen:
                self.dropped += 1
                continue
            seen.add(upload_id)
            yield cur, upload_id, meta, body


class CompactedIds:
    """The ids of the uploads the committed tables hold, as the compactor's `Deduped` asks
    them (`in`, `add`), in a SQLite file of its mirror (`ids.sqlite`), not in memory: the
    compactor's memory stays flat however many uploads the store has kept. The ids a run
    adds are kept apart (`pending`) until its commit (`commit`); a run that did not commit
    drops them (a new instance). `catch_up(tdir, man)` indexes the uploads rows a manifest
    holds from the `uk` the file has indexed up to (another compactor's commits: read
    from the parts' `uk`-filtered rows, not all of them)."""

    def __init__(self, path: Path) -> None:
        import sqlite3

        # one thread at a time (a run), not always the one that opened it (tests, threads)
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS ids (id TEXT PRIMARY KEY) WITHOUT ROWID")
        self.db.execute("CREATE TABLE IF NOT EXISTS upto (uk INTEGER)")
        self.db.execute("CREATE TABLE IF NOT EXISTS pruned (n INTEGER)")
        self.pending: set[str] = set()

    @property
    def upto(self) -> int:
        row = self.db.execute("SELECT uk FROM upto").fetchone()
        return int(row[0]) if row else 0

    def _set_upto(self, uk: int) -> None:
        self.db.execute("DELETE FROM upto")
        self.db.execute("INSERT INTO upto VALUES (?)", (uk,))

    def __contains__(self, upload_id: str) -> bool:
        if upload_id in self.pending:
            return True
        return self.db.execute("SELECT 1 FROM ids WHERE id = ?", (upload_id,)).fetchone() \
            is not None

    def add(self, upload_id: str) -> None:
        self.pending.add(upload_id)

    def __len__(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM ids").fetchone()[0]) + len(
            self.pending)

    def catch_up(self, tdir: Path, man: dict) -> None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from .tables.manifest import part_path

        next_uk = int(man.get("nextUk", 0))
        prunes = int(man.get("prunes", 0))
        row = self.db.execute("SELECT n FROM pruned").fetchone()
        start = self.upto
        # Tables rebuilt (an older format's), or pruned since this file indexed them (here
        # or on another machine: a prune takes ids out and adds no `uk`): index them anew.
        anew = start > next_uk or (row[0] if row else 0) != prunes
        if not anew and start == next_uk:
            return
        self.db.execute("BEGIN")
        try:
            if anew:
                self.db.execute("DELETE FROM ids")
                self.db.execute("DELETE FROM pruned")
                self.db.execute("INSERT INTO pruned VALUES (?)", (prunes,))
                start = 0
            for e in man.get("uploads", []):
                f = pq.ParquetFile(tdir / part_path(e))
                # row groups wholly below `start` are skipped by their statistics; the
                # rest read in small batches (a flat peak, whatever the part's size)
                groups = [g for g in range(f.metadata.num_row_groups)
                          if not _below(f.metadata.row_group(g), start)]
                for b in f.iter_batches(batch_size=8192, row_groups=groups,
                                        columns=["id", "uk"]):
                    ids = b.column(0).filter(pc.greater_equal(b.column(1), start))
                    self.db.executemany("INSERT OR IGNORE INTO ids VALUES (?)",
                                        ((i,) for i in ids.to_pylist()))
            self._set_upto(next_uk)
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def discard(self, ids: set[str]) -> None:
        """Uploads a prune took out of the committed tables: no longer compacted."""
        self.db.execute("BEGIN")
        self.db.executemany("DELETE FROM ids WHERE id = ?", ((i,) for i in ids))
        self.db.execute("COMMIT")

    def commit(self, next_uk: int) -> None:
        """The run that added `pending` committed the tables up to `next_uk`."""
        self.db.execute("BEGIN")
        self.db.executemany("INSERT OR IGNORE INTO ids VALUES (?)",
                            ((i,) for i in self.pending))
        self._set_upto(next_uk)
        self.db.execute("COMMIT")
        self.pending = set()

    def close(self) -> None:
        self.db.close()


def _below(group: Any, start: int) -> bool:
    """Whether a row group's `uk` statistics say every row of it is below `start`."""
    for c in range(group.num_columns):
        col = group.column(c)
        if col.path_in_schema == "uk":
            st = col.statistics
            return st is not None and st.has_min_max and st.max < start
    return False


# ---- the compactor ---------------------------------------------------------------------------


class Lease:
    """The compactor's lease: `leases/compactor.json`, created with If-None-Match, renewed
    with If-Match on the etag this holder last wrote, taken over with If-Match once lapsed.

    Lapsed is judged without comparing clocks of two machines: the document carries a
    `generation` (+1 per write) and its `duration`, and a contender counts the duration on
    its own monotonic clock from when it first saw that version of the document; a holder
    counts its hold on its own monotonic clock from the start of the write that renewed it,
    which precedes any contender's first sight of it (so the holder's hold ends first, clock
    rates being equal; it uses `HOLD_SHARE` of the duration against drift). Each run
    renews it before its push and its commit (`still_held`). The lease saves work; the
    tables stay whole without it: parts are pushed under names of their own and the
    manifest is replaced with If-Match, so a holder whose lease lapsed loses its commit
    and overwrites nothing. `until` (the writer's wall clock) is written for people and
    for documents without a `duration` (an older jsprof's), judged by it as before."""

    HOLD_SHARE = 0.8

    def __init__(self, objects: ObjectStore, owner: str | None = None,
                 seconds: float = LEASE_S) -> None:
        self.objects = objects
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.seconds = seconds
        self.etag: str | None = None
        self.generation = 0
        self._held_until = 0.0  # monotonic: the end of this holder's hold
        self._seen: tuple[str, float] | None = None  # (etag, monotonic first seen): another's

    def _doc(self, generation: int) -> bytes:
        return orjson.dumps({"owner": self.owner, "generation": generation,
                             "duration": self.seconds, "until": time.time() + self.seconds})

    def held(self) -> bool:
        """Whether this holder's last renewal still holds, by its own monotonic clock."""
        return self.etag is not None and time.monotonic() < self._held_until

    def _took(self, etag: str, generation: int, started: float) -> bool:
        self.etag, self.generation, self._seen = etag, generation, None
        self._held_until = started + self.seconds * self.HOLD_SHARE
        return True

    def acquire(self) -> bool:
        """Take or renew the lease; True while this owner holds it."""
        started = time.monotonic()
        if self.etag is not None:
            etag = self.objects.put_if(LEASE_KEY, self._doc(self.generation + 1), self.etag)
            if etag is not None:
                return self._took(etag, self.generation + 1, started)
            self.etag = None  # lost it (it lapsed, someone took it over)
            self._held_until = 0.0
        got = self.objects.get(LEASE_KEY)
        if got is None:
            if not self.objects.put_new(LEASE_KEY, self._doc(1)):
                return False
            got = self.objects.get(LEASE_KEY)
            if got is None or orjson.loads(got[0]).get("owner") != self.owner:
                return False
            return self._took(got[1], 1, started)
        data, etag = got
        try:
            doc = orjson.loads(data)
            owner = str(doc.get("owner", ""))
            generation = int(doc.get("generation", 0))
            duration = doc.get("duration")
            until = float(doc.get("until", 0))
        except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
            owner, generation, duration, until = "", 0, None, 0.0  # unreadable: nobody's
        if owner and not self._lapsed(etag, duration, until):
            return False
        new = self.objects.put_if(LEASE_KEY, self._doc(generation + 1), etag)
        if new is None:
            return False
        return self._took(new, generation + 1, started)

    def _lapsed(self, etag: str, duration: Any, until: float) -> bool:
        if type(duration) not in (int, float):
            return until <= time.time()  # an older jsprof's document: its wall clock
        now = time.monotonic()
        if self._seen is None or self._seen[0] != etag:
            self._seen = (etag, now)  # renewed (or new to us) since: count from now
        return now - self._seen[1] >= float(duration)

    def release(self) -> None:
        if self.etag is not None:
            self.objects.put_if(LEASE_KEY, orjson.dumps(
                {"owner": "", "generation": self.generation + 1, "duration": 0, "until": 0}),
                self.etag)
            self.etag = None
            self._held_until = 0.0


def _cursor_past(tdir: Path, cursor: Any) -> None:
    """Move the mirror's committed cursor past the uploads `compact` never saw (retries of
    ids compacted already, dropped by `Deduped` after the last one it kept): its cursor
    stops at the last upload kept, so a run that met only retries committed nothing and
    every query's tail held them again (counted twice)."""
    from .lock import TablesLock
    from .tables.manifest import MANIFEST, cursor_in, cursor_out, read_manifest, write_manifest

    if cursor is None or not (tdir / MANIFEST).exists():
        return
    with TablesLock(tdir):
        man = read_manifest(tdir.parent)
        if cursor_in(man) != cursor:
            cursor_out(man, cursor)
            write_manifest(tdir, man)


def _cursor_trim(tdir: Path, remote: set[str]) -> None:
    """Drop from the mirror's cursor the segments the bucket no longer holds (raw retention,
    a lifecycle rule): a name in the cursor was read, and a key is never used again, so
    nothing is read twice; the cursor (and the manifest) stays the size of what the bucket
    keeps, not of its history."""
    from .lock import TablesLock
    from .tables.manifest import MANIFEST, cursor_in, cursor_out, read_manifest, write_manifest

    if not (tdir / MANIFEST).exists():
        return
    with TablesLock(tdir):
        man = read_manifest(tdir.parent)
        cur = cursor_in(man)
        if cur is None or not hasattr(cur, "positions"):
            return
        gone = [n for n in cur.positions if n not in remote]
        if gone:
            for n in gone:
                del cur.positions[n]
            cursor_out(man, cur)
            write_manifest(tdir, man)


class Conflict(StoreError):
    """Another compactor committed the tables since this one read them."""


class ObjectCompactor:
    """One compactor's state for a store on an object store: its mirror, the ids it has
    compacted. `run()` does one compaction (pull, compact, merge, push, commit).

    What it writes never replaces what another wrote: each run pushes its new parts under
    names no other run makes (`<name>.<run token>.parquet`, created with If-None-Match),
    commits the manifest with If-Match on the etag it started from, and deletes only the
    parts the manifest it replaced listed and its successor does not, the parts of its own
    runs that never committed, and strays older than `STRAY_S` on the store's clock. A
    compactor whose lease lapsed mid-run (paused, partitioned) so loses its commit and
    harms nothing the next holder wrote."""

    STRAY_S = 3600.0  # an unlisted part this old (store's clock) is a dead run's
    PUSH_MAX_S = STRAY_S / 2  # a run whose push began longer ago (own clock) commits nothing

    def __init__(self, objects: ObjectStore, root: Path, batch: int = 500,
                 keep_raw: float | None = None) -> None:
        self.objects = objects
        self.mirror = Mirror(objects, root)
        self.batch = batch
        self.keep_raw = keep_raw  # seconds a compacted segment object stays; None: forever
        self.raw_removed = 0  # segment objects the last run deleted
        self.seen: CompactedIds | None = None
        self.orphans: set[str] = set()  # keys this process pushed in runs that did not commit
        self.duplicates = 0  # upload ids met again in the last run (dropped)

    def _reset(self) -> None:
        from .tables.intern import forget
        from .tables.manifest import MANIFEST

        forget(self.mirror.tdir)
        shutil.rmtree(self.mirror.tdir, ignore_errors=True)
        self.mirror.tdir.mkdir(parents=True)
        (self.mirror.root / "manifest.etag").unlink(missing_ok=True)
        assert not (self.mirror.tdir / MANIFEST).exists()
        self._forget_ids()

    def ids_pruned(self, ids: set[str]) -> None:
        """A prune committed tables without the uploads `ids`: out of the index of
        compacted ids (kept on disk between runs), so that one sent again is stored."""
        self._forget_ids()  # what a run added and did not commit goes too
        if ids:
            seen = CompactedIds(self.mirror.root / "ids.sqlite")
            try:
                seen.discard(ids)
            finally:
                seen.close()

    def _forget_ids(self) -> None:
        """Drop what a run added to the ids (committed or not: the file knows)."""
        if self.seen is not None:
            self.seen.close()
        self.seen = None

    def run(self, still_held: Any = None) -> Any:
        """Compact what the collectors stored since the last commit; the CompactStats.
        `still_held()`: asked before the first write to the bucket and before the commit
        (the lease: renewed, or lost)."""
        from .tables.intern import forget

        if self.mirror.pull_tables():
            forget(self.mirror.tdir)  # its interned releases are another writer's now
            self._forget_ids()
        try:
            return self._run(still_held)
        except BaseException:
            # The mirror may now be ahead of the bucket (batches committed here, not
            # there): start the next run from what the bucket holds.
            self._reset()
            raise

    def _run(self, still_held: Any) -> Any:
        from .store import Store
        from .tables.compact import CompactStats, compact
        from .tables.manifest import MANIFEST, cursor_in, listed, read_manifest
        from .tables.merge import merge_parts

        start_etag = self.mirror.etag
        man = read_manifest(self.mirror.root)
        if self.seen is None:
            self.seen = CompactedIds(self.mirror.root / "ids.sqlite")
            self.seen.catch_up(self.mirror.tdir, man)
        cur = cursor_in(man)
        remote = self.mirror.pull_segments(cur.positions if cur is not None else {})
        store = Store(self.mirror.root)
        stats = CompactStats()
        try:
            source = Deduped(store, self.seen)
            stats = compact(source, batch=self.batch)
            self.duplicates = source.dropped
            if source.dropped:
                _cursor_past(self.mirror.tdir, source.cursor)
            _cursor_trim(self.mirror.tdir, set(remote))
            merge_parts(self.mirror.root)
        finally:
            store.close()
        self.raw_removed = self._drop_raw(man, remote)
        new = read_manifest(self.mirror.root)
        if not (self.mirror.tdir / MANIFEST).exists() or (
                start_etag is not None and not stats.batches and listed(new) == listed(man)
                and cursor_in(new) == cur):
            return stats  # nothing new, nothing merged, nothing read
        new = self._commit(man, new, start_etag, still_held)
        self.seen.commit(int(new.get("nextUk", 0)))
        self._sweep(man, new)
        return stats

    def _commit(self, man: dict, new: dict, start_etag: str | None, still_held: Any) -> dict:
        """Push the mirror's new parts and commit its manifest with If-Match on
        `start_etag` (the one `man` was read with); the manifest as committed. Conflict
        when the lease was lost or another writer committed since."""
        from .tables.manifest import MANIFEST

        if still_held is not None and not still_held():
            raise Conflict(f"{self.objects.url}: the compactor's lease was lost; "
                           "its run is dropped")
        began = time.monotonic()
        new = self._push(man, new)
        if time.monotonic() - began > self.PUSH_MAX_S or (
                still_held is not None and not still_held()):
            raise Conflict(f"{self.objects.url}: the compactor's lease was lost while it "
                           "pushed its parts; its run is dropped")
        data = (self.mirror.tdir / MANIFEST).read_bytes()
        etag = (self.objects.put_if(MANIFEST_KEY, data, start_etag) if start_etag
                else self._created(data))
        if etag is None:
            raise Conflict(f"{self.objects.url}: another compactor committed the tables "
                           "meanwhile; this run's work is dropped and done again")
        self.mirror.set_etag(etag)
        return new

    def _drop_raw(self, man: dict, remote: dict[str, float]) -> int:
        """Raw retention (`--keep-raw`): delete the segment objects that the committed
        cursor (`man`, as the bucket holds it: never a run's own, uncommitted) has read to
        their end and that were last written more than `keep_raw` ago by the bucket's
        clock. Their uploads are in the tables; `GET /v1/traces/{id}` answers 410 for them.
        The next commit drops their names from the cursor (`_cursor_trim`). Those this
        run listed (`remote`), and those below the cursor's listing floor (read to their
        end, left out of the listings): listed up to the time `keep_raw` ago, so this
        listing holds what it deletes."""
        from .tables.manifest import cursor_in

        if self.keep_raw is None:
            return 0
        cur = cursor_in(man)
        positions = cur.positions if cur is not None else {}
        n = 0
        for name, age in sorted(remote.items()):
            count = segment_count(name)
            if count is not None and positions.get(name, 0) >= count and age >= self.keep_raw:
                self.objects.delete(SEGMENTS + name)
                n += 1
        floor = listing_floor(positions)
        if floor is not None:
            due = f"{NEW_SEGMENTS}{max(0, int((self.objects.clock() - self.keep_raw) * 1e3)):013d}"
            for key, age in self.objects.aged(NEW_SEGMENTS, end_before=min(floor, due)):
                if key[len(SEGMENTS):] not in remote and age >= self.keep_raw:
                    self.objects.delete(key)
                    n += 1
        return n

    def _created(self, data: bytes) -> str | None:
        if not self.objects.put_new(MANIFEST_KEY, data):
            return None
        got = self.objects.get(MANIFEST_KEY)
        return got[1] if got is not None and got[0] == data else None

    def _push(self, old: dict, new: dict) -> dict:
        """Name the parts `new` lists and `old` (the committed manifest) does not after
        this run (`<name>.<token>.parquet`: the mirror's files, the manifest's entries and
        the interned releases' part lists renamed) and create them in the bucket with
        If-None-Match; the manifest as renamed. A part merged within this run (listed only
        as obsolete) is not pushed."""
        from .tables import intern
        from .tables.manifest import listed, part_paths, write_manifest

        tdir = self.mirror.tdir
        obsolete = {o["path"] for o in new.get("obsolete", [])}
        fresh = sorted(listed(new) - listed(old) - obsolete)
        token = secrets.token_hex(6)
        names = {rel: f"{rel[:-len('.parquet')]}.{token}.parquet" for rel in fresh
                 if rel.endswith(".parquet")}

        def renamed(entries: list) -> list:
            out = []
            for e in entries:
                if isinstance(e, str):
                    out.append(names.get(e, e))
                elif e["path"] in names:
                    out.append(dict(e, path=names[e["path"]]))
                else:
                    out.append(e)
            return out

        new["uploads"] = renamed(new["uploads"])
        for r in new["releases"].values():
            r["parts"] = {kind: renamed(entries) for kind, entries in r["parts"].items()}
        for rel, name in names.items():
            os.replace(tdir / rel, tdir / name)
        write_manifest(tdir, new)
        for (d, _rkey), release in intern._cache.items():
            if d == str(tdir):  # what it was built from, under the names committed
                release.loaded_frames = renamed(release.loaded_frames)
                release.loaded_stacks = renamed(release.loaded_stacks)
        for rel in sorted(part_paths(new) & set(names.values())):
            data = (tdir / rel).read_bytes()
            key = "tables/" + rel
            self.orphans.add(key)  # until the commit lists it
            if not self.objects.put_new(key, data):
                # Only this run makes this name: its own earlier attempt (a retried put)
                got = self.objects.get(key)
                if got is None or got[0] != data:
                    raise ObjectStoreError(f"{self.objects.url}: cannot create {key}: a "
                                           "write to it is still under way")
        return new

    def _sweep(self, old: dict, new: dict) -> None:
        """After a commit: delete the table objects the replaced manifest listed and this
        one does not (merged parts past their grace), this process's parts of runs that
        never committed, and unlisted parts older than STRAY_S (dead compactors' runs);
        never a part another live compactor may be about to commit."""
        from .tables.manifest import listed

        keep = {"tables/" + rel for rel in listed(new)}
        for key in self.orphans & keep:
            self.orphans.discard(key)
        gone = {"tables/" + rel for rel in listed(old)} - keep
        gone |= self.orphans
        for key, age in self.objects.aged("tables/"):
            if key != MANIFEST_KEY and key not in keep and age > self.STRAY_S:
                gone.add(key)
        for key in sorted(gone):
            self.objects.delete(key)
            self.orphans.discard(key)


@contextmanager
def query_lock(url: str) -> Iterator[None]:
    """Held by a query from its mirror's refresh to the end of its tail's read: queries on
    one machine (a collector's query threads, its workers, fleet commands) share the
    mirror, and a refresh drops the segment objects a newer cursor passed, which a query
    that read the older manifest is still counting in its tail."""
    import fcntl

    if url.startswith("s3://"):  # as S3Objects spells it (query_mirror's folder)
        from .s3 import parse_url

        bucket, prefix = parse_url(url)
        url = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
    root = mirror_dir(url, "query")
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # the flock goes with it


def query_mirror(url: str, objects: ObjectStore | None = None) -> Path:
    """A local copy of what a query of the store at `url` reads (manifest, its parts, the
    segments past its cursor), refreshed; reads the bucket only."""
    from .tables.manifest import cursor_in, read_manifest

    objects = objects if objects is not None else open_objects(url)
    m = Mirror(objects, mirror_dir(objects.url, "query"), sweep=True)
    # The retention marks before the manifest (as a local prune writes its mark first):
    # an upload pruned after either read is left out (`Store.pruned_before`).
    marks = objects.get(PRUNED_KEY)
    if marks is not None:
        _write_atomic(m.root / "pruned.json", marks[0])
    m.pull_tables()
    cur = cursor_in(read_manifest(m.root))
    m.pull_segments(cur.positions if cur is not None else {})
    return m.root


class CompactorProcess:
    """A collector's compactor for a store on an object store: `python -m
    jsprof.store.objcompactor URL` in a process of its own (compaction is parse-and-intern
    work: on a thread it would hold the GIL against ingest), restarted when it dies,
    stopped with the collector. It competes for the bucket's lease with the other
    collectors' ones; only the holder compacts."""

    def __init__(self, url: str, interval: float, keep_raw: float | None = None,
                 retention: float | None = None, restart: float = 2.0) -> None:
        self.url = url
        self.interval = interval
        self.keep_raw = keep_raw
        self.retention = retention
        self.restart = restart  # seconds before a process that died is started again
        self._stop = threading.Event()
        self._proc: Any = None
        self._thread = threading.Thread(target=self._run, name="jsprof-objcompactor",
                                        daemon=True)

    @property
    def pid(self) -> int | None:
        p = self._proc
        return p.pid if p is not None and p.poll() is None else None

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        import subprocess
        import sys

        while not self._stop.is_set():
            cmd = [sys.executable, "-m", "jsprof.store.objcompactor", self.url,
                   "--interval", str(self.interval), "--parent", str(os.getpid()),
                   "--keep-raw", "forever" if self.keep_raw is None else str(self.keep_raw)]
            if self.retention:
                cmd += ["--retention", str(self.retention)]
            try:
                self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                              stdout=subprocess.DEVNULL,
                                              start_new_session=True)
            except OSError as e:
                print(f"jsprof serve: cannot start the compactor: {e}", file=sys.stderr,
                      flush=True)
                self._stop.wait(10)
                continue
            while self._proc.poll() is None and not self._stop.wait(0.5):
                pass
            if not self._stop.is_set():
                print(f"jsprof serve: the compactor process exited ({self._proc.returncode}); "
                      "restarting it", file=sys.stderr, flush=True)
                self._stop.wait(self.restart)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        p = self._proc
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
                p.kill()
                p.wait()
        self._thread.join(timeout)


# ---- the compactor process -------------------------------------------------------------------
