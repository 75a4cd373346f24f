"""Tables an older jsprof compacted are rebuilt from the raw uploads by the next compaction,
not refused. Format 4 put stack-less samples inside long animation frames on their
attributed stacks where format 3 kept them `(idle)`: the raw uploads are the record, so the
compactor starts the tables anew under this jsprof's reading (the old parts stay for the
grace a reader of the old manifest may need, then go). Tables of a newer format are never
touched."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from fleet_util import upload
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.store.tables.manifest import MANIFEST, CompactError, read_manifest, tables_dir
from jsprof.store.tables.merge import GRACE_S, merge_parts
from jsprof.trace import TraceBuilder

URL = "https://shop.example/app.js"


def _busy_upload(store: Store, uid: str, release: str, at: float) -> None:
    """A page whose click handler ran 100 ms in a long frame, 60 of them without a stack
    (Chromium's Profiler in built-ins), then idle."""
    b = TraceBuilder()
    onbuy = b.stack_id([b.frame_id("onBuy", b.resource_id(URL), 3, 10)])
    for i in range(40):
        t = 100.0 + 5.0 * i  # 100..295 ms
        on_stack = i < 8 or 20 <= i < 28
        b.add_sample(t, onbuy if on_stack else None)
    frames = [{
        "start": 95.0, "duration": 110.0, "renderStart": 200.0,
        "scripts": [{"invoker": "BUTTON#buy.onclick", "sourceURL": URL,
                     "sourceFunctionName": "onBuy", "start": 98.0, "duration": 100.0}],
    }]
    upload(store, uid, b.build(), app="shop", release=release, receivedAt=at,
           sampleInterval=5.0, timeline={"longFrames": frames})


def _top(store: Store) -> dict[str, tuple[float, float]]:
    with api.session(store, tail_limit=0) as s:
        rows = api.top(s, Filters(app="shop"), None)["rows"]
    return {r["name"]: (round(r["selfMs"], 6), round(r["totalMs"], 6)) for r in rows}


def _on_disk(tdir: Path) -> set[str]:
    return {str(p.relative_to(tdir)) for p in tdir.rglob("*.parquet")}


def test_older_tables_are_rebuilt_from_the_raw_uploads(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    for i, rel in enumerate(("1.0", "1.1", "1.1")):
        _busy_upload(store, f"u{i}", rel, 1.7e12 + i)
    compact(store)
    want = _top(store)
    assert "(stack not captured)" in want and want["onBuy"][1] > want["onBuy"][0], want
    tdir = tables_dir(store.path)
    man_path = tdir / MANIFEST
    # Tables as an older jsprof left them: its manifest says format 3, its parts are there.
    doc = orjson.loads(man_path.read_bytes())
    doc["formatVersion"] = 3
    man_path.write_bytes(orjson.dumps(doc))
    old_files = _on_disk(tdir)
    assert old_files
    # A reader that does not compact (the collector's queries) says what will happen.
    with pytest.raises(CompactError, match="the next compaction rebuilds them"):
        read_manifest(store.path)
    # The next compaction rebuilds them: every upload again, this jsprof's reading.
    stats = compact(store)
    assert stats.uploads == 3
    man = read_manifest(store.path)
    assert man["rebuiltFrom"] == 3 and man["nextPart"] > doc["nextPart"]
    assert _top(store) == want
    # The old parts are obsolete (kept for a reader of the old manifest), then removed.
    assert {o["path"] for o in man["obsolete"]} == old_files
    merge_parts(store.path)
    assert old_files <= _on_disk(tdir)
    import time

    merge_parts(store.path, now=time.time() + GRACE_S + 1)
    assert not (old_files & _on_disk(tdir))
    assert _top(store) == want
    # Compacted again: nothing to add.
    assert compact(store).uploads == 0 and _top(store) == want


def test_newer_tables_are_refused_and_left_alone(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    _busy_upload(store, "u0", "1.0", 1.7e12)
    compact(store)
    man_path = tables_dir(store.path) / MANIFEST
    doc = orjson.loads(man_path.read_bytes())
    doc["formatVersion"] = 99
    man_path.write_bytes(orjson.dumps(doc))
    before = man_path.read_bytes()
    files = _on_disk(tables_dir(store.path))
    with pytest.raises(CompactError, match="remove .* to rebuild them"):
        compact(store)
    assert man_path.read_bytes() == before and _on_disk(tables_dir(store.path)) == files
