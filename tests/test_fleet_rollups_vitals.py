"""`fleet vitals` from the rollups (issue 34): over whole UTC days it reads rollup_vitals (per
release, route, env and day: how many values in each bucket of a log scale), not every
upload's timeline, and answers what the per-upload timelines answer: on stores of page
loads resampled from the real Chromium traces, sent in 1 to 3 chunks whose timelines
repeat an interaction at a longer duration and update LCP and CLS, compacted in batches
that cut page loads apart, merged, with a tail not compacted yet, and with the
per-upload tables gone.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fleet_util import DAY, T0, resampled_page_load, split_trace, upload
from jsprof.fleet import api, vitals
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.store.tables.compact import compact
from jsprof.store.tables.merge import merge_parts
from jsprof.store.tables.rollup import ALPHA

FILTERS = [
    Filters(app="shop"),
    Filters(app="shop", release="1.10.0"),
    Filters(app="shop", route="/c*"),
    Filters(app="shop", env="prod"),
    Filters(app="shop", since=T0 + DAY, until=T0 + 3 * DAY),
]
TYPES = ("click", "keydown", "pointerup")
ELEMENTS = ("img.hero", "h1#title", None)


def _timelines(rng: np.random.Generator, chunks: int) -> list[dict]:
    """One page load's timeline in `chunks` chunks, as the client sends it: each chunk its
    own long frames and interactions, an interaction that was still running when a chunk
    went reported again in the next one, longer (one id), and the load's LCP and CLS as
    known so far (LCP may change until the first input, CLS only grows)."""
    out, ids, lcp, cls = [], 0, float(rng.uniform(300, 3000)), 0.0
    # what the client left out so far (its counts only grow; most page loads none)
    lost = {"interactions": 0, "longFrames": 0}
    grows = rng.random() < 0.4
    el = ELEMENTS[int(rng.integers(0, 3))]
    carry = None
    pending = None  # the piece a chunk counted as unsampled as its page was hidden
    for c in range(chunks):
        inter = []
        if carry is not None:
            inter.append(dict(carry, duration=carry["duration"] + float(rng.uniform(5, 80))))
        for _ in range(int(rng.integers(0, 4))):
            ids += 1
            start = float(rng.uniform(0, 20000))
            d = float(rng.lognormal(4.5, 0.8))
            ps = start + float(rng.uniform(0, 30))
            inter.append({"id": ids, "type": TYPES[int(rng.integers(0, 3))], "start": start,
                          "duration": d, "processingStart": ps,
                          "processingEnd": ps + d * float(rng.uniform(0.2, 0.8)),
                          "target": "button#buy"})
        carry = inter[-1] if inter and rng.random() < 0.5 else None
        frames = [{"start": float(rng.uniform(0, 20000)), "duration": 50 + b,
                   "blockingDuration": None if rng.random() < 0.1 else b}
                  for b in rng.lognormal(3.5, 1.0, int(rng.integers(0, 5))).tolist()]
        cls += float(rng.choice([0.0, rng.uniform(0, 0.1)]))
        if rng.random() < 0.5:
            lcp += float(rng.uniform(0, 500))
        load = {"lcp": lcp, "lcpElement": el, "cls": round(cls, 6)}
        if c == 0 and rng.random() < 0.2:
            load = {"lcp": None}
        t = {"interactions": inter, "longFrames": frames, "load": load}
        if grows:
            lost = {k: v + int(rng.integers(0, 4)) for k, v in lost.items()}
            t["dropped"] = dict(lost)
        # The running piece as the page was hidden or left (`timeline.unsampled`): counted
        # unsampled in one chunk; the next chunk, when there is one, brought its samples
        # (ms 0: the page lived on); the last chunk's stays counted.
        if pending is not None:
            t["unsampled"] = dict(pending, ms=0.0, longFrames=0, interactions=0)
            pending = None
        elif rng.random() < 0.4:
            pending = t["unsampled"] = {
                "piece": c + 1, "start": float(rng.uniform(0, 20000)),
                "ms": float(rng.uniform(1, 5000)), "longFrames": int(rng.integers(0, 3)),
                "interactions": int(rng.integers(0, 2))}
        out.append(t)
    return out


def _fill(path: Path, n: int = 60, seed: int = 11) -> Path:
    """`n` page loads over 4 days, 1 to 3 chunks each, three releases, routes /cart,
    /checkout, /home and none, envs prod, dev and none; every 7th without a page-load id
    (each upload its own page load)."""
    rels = ["1.9.0", "1.10.0", "1.11.0"]
    routes = ["/cart", "/checkout", "/home", None]
    st = Store(path)
    rng = np.random.default_rng(seed)
    for i in range(n):
        day, k = i % 4, 1 + i % 3
        tr = resampled_page_load(rng, repeat=2)
        tls = _timelines(rng, k)
        for j, (piece, t) in enumerate(zip(split_trace(tr, k) if k > 1 else [tr], tls,
                                           strict=True)):
            meta = {"app": "shop", "release": rels[i % 3], "route": routes[i % 4],
                    "env": ["prod", "dev", None][i % 3], "timeline": t,
                    "receivedAt": T0 + day * DAY + 3600e3 + i * 60e3 + j * 1000}
            if i % 7:
                meta["pageLoad"] = f"load-{i}"
            upload(st, f"u{i:02d}.{j}", piece, **{k: v for k, v in meta.items()
                                                    if v is not None})
    st.close()
    return path


def _per_upload(s: api.Session, f: Filters, monkeypatch: pytest.MonkeyPatch) -> dict:
    with monkeypatch.context() as m:
        m.setattr(vitals, "rolled", lambda *a: None)
        return api.vitals(s, f)


def _check(store: Path, monkeypatch: pytest.MonkeyPatch, filters: list[Filters] = FILTERS
           ) -> None:
    st = api.open_store(store)
    with api.session(st) as s:
        for f in filters:
            got = vitals.rolled(s.engine, s.snap, f)
            assert got is not None, f
            assert {**got, **api.notes(s)} == _per_upload(s, f, monkeypatch), f
            assert got["rows"] and all(r["pageLoads"] for r in got["rows"])
    st.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fill(tmp_path_factory.mktemp("vitals") / "store")


def test_vitals_from_rollups_equal_vitals_from_every_timeline(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st, batch=4)  # batches that cut page loads apart: -1s for their earlier chunks
    st.close()
    _check(copy, monkeypatch)
    st = api.open_store(copy)
    with api.session(st) as s:
        doc = api.vitals(s, Filters(app="shop"))
        # 60 page loads, and each further chunk of those without an id is one of its own
        assert sum(r["pageLoads"] for r in doc["rows"]) == 60 + sum(
            i % 3 for i in range(60) if not i % 7)
        assert any(r["interactionTypes"] for r in doc["rows"])
    st.close()
    merge_parts(copy, now=T0 / 1000 + 30 * 86400, fanout=2)
    _check(copy, monkeypatch)


def test_uploads_not_compacted_yet_add_to_their_page_loads(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tail (read by the query, not compacted) holding later chunks of page loads whose
    first chunks are committed: each page load still counts once, its values from all
    its chunks."""
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    rng = np.random.default_rng(12)
    for i in (1, 2, 5):  # release 1.10.0, 1.11.0, 1.11.0; /checkout, /home, /checkout
        t = _timelines(rng, 2)[1]
        t["interactions"].append({"id": 1, "type": "click", "start": 10.0, "duration": 900.0,
                                  "processingStart": 20.0, "processingEnd": 700.0})
        upload(st, f"late{i}", resampled_page_load(rng), app="shop",
               release=["1.9.0", "1.10.0", "1.11.0"][i % 3],
               route=["/cart", "/checkout", "/home", None][i % 4],
               receivedAt=T0 + (i % 4) * DAY + 7200e3, pageLoad=f"load-{i}", timeline=t,
               **({"env": ["prod", "dev"][i % 3]} if i % 3 < 2 else {}))
    st.close()
    # Only a query that reads the tail's rollup_vitals looks for its page loads' earlier
    # chunks (the uploads' page-load column of their days): `top` does not
    from jsprof.store.tables import vitals as rv

    rv._index.clear()
    st = api.open_store(copy)
    with api.session(st) as s:
        assert api.top(s, Filters(app="shop"), 5)["traces"] > 0
        assert not rv._index
        assert api.vitals(s, Filters(app="shop"))["rows"]
        assert len(rv._index) == 3  # (1.10.0, day 1), (1.11.0, day 2), (1.11.0, day 1)
    st.close()
    _check(copy, monkeypatch)


def test_vitals_read_no_per_upload_table(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the per-upload tables' parts gone (uploads, weights, upload_frames, samples),
    vitals over whole days still answer, the same; a window inside a day, which reads
    them, says in one line that a part is missing."""
    from jsprof.errors import JsprofError

    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st, batch=7)
    st.close()
    st = api.open_store(copy)
    with api.session(st) as s:
        want = {f: api.vitals(s, f) for f in FILTERS}
    st.close()
    for kind in ("uploads", "weights", "upload_frames", "samples"):
        shutil.rmtree(copy / "tables" / kind)
    st = api.open_store(copy)
    with api.session(st) as s:
        for f in FILTERS:
            assert api.vitals(s, f) == want[f], f
        with pytest.raises(JsprofError) as e:
            api.vitals(s, replace(FILTERS[0], until=T0 + 12 * 3600e3))
        assert "\n" not in str(e.value) and "part" in str(e.value)
    st.close()


def test_percentiles_are_of_bucket_middles_within_alpha(
        store: Path, tmp_path: Path) -> None:
    """The p75s are numpy's of the values each kept as its bucket's middle: within ALPHA
    (1 %) of the p75 of the exact values."""
    from jsprof.timeline import inp, page_loads

    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st)
    st.close()
    st = api.open_store(copy)
    with api.session(st) as s:
        doc = api.vitals(s, Filters(app="shop", release="1.10.0", route="/checkout"))
    st.close()
    (row,) = doc["rows"]
    # the same page loads' exact values, from the timelines as written
    rng = np.random.default_rng(11)
    inps, blocking = [], []
    for i in range(60):
        k = 1 + i % 3
        resampled_page_load(rng, repeat=2)
        tls = _timelines(rng, k)
        if i % 3 == 1 and i % 4 == 1:
            keys = [(f"load-{i}" if i % 7 else f"{i}.{j}", t) for j, t in enumerate(tls)]
            for pl in page_loads(keys).values():
                v = inp([e["duration"] for e in pl.interactions])
                if v is not None:
                    inps.append(v)
                blocking += [f["blockingDuration"] for f in pl.long_frames
                             if f["blockingDuration"] is not None]
    assert row["inpPageLoads"] == len(inps) > 0
    assert row["inpP75Ms"] == pytest.approx(np.percentile(inps, 75), rel=ALPHA)
    assert row["longFrameBlockingP75Ms"] == pytest.approx(np.percentile(blocking, 75),
                                                          rel=ALPHA)


def test_dask_gives_the_rolled_vitals_duckdb_gives(dask_client: object, store: Path,
                                                   tmp_path: Path) -> None:
    from jsprof.fleet.engine import DaskEngine, DuckEngine

    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st, batch=9)
    st.close()
    st = api.open_store(copy)
    with api.session(st, DuckEngine()) as sd, api.session(st, DaskEngine(client=dask_client)) as sk:
        for f in FILTERS[:4]:
            got = vitals.rolled(sk.engine, sk.snap, f)
            assert got is not None and got == vitals.rolled(sd.engine, sd.snap, f), f
    st.close()


def test_format_8_tables_get_their_vitals_rolled_up(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables of format 8 (rollups without rollup_vitals) read every timeline until the
    next compaction rebuilds their rollups from the per-upload tables (each day's page
    loads whole, in one go); then the rollups answer, the same."""
    import orjson

    from jsprof.store.tables.manifest import FORMAT_VERSION, read_manifest

    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st, batch=5)
    st.close()
    mp = copy / "tables" / "_manifest.json"
    man = orjson.loads(mp.read_bytes())
    for entry in man["releases"].values():  # as format 8 wrote them
        entry["parts"].pop("rollup_vitals")
    man["formatVersion"] = 8
    mp.write_bytes(orjson.dumps(man))
    f = Filters(app="shop")
    st = api.open_store(copy)
    with api.session(st) as s:
        assert vitals.rolled(s.engine, s.snap, f) is None  # read per upload meanwhile
        before = api.vitals(s, f)
    st.close()
    st = Store(copy)
    compact(st)
    st.close()
    assert read_manifest(copy)["formatVersion"] == FORMAT_VERSION == 12
    st = api.open_store(copy)
    with api.session(st) as s:
        assert {**vitals.rolled(s.engine, s.snap, f), **api.notes(s)} == before
    st.close()
    _check(copy, monkeypatch)


def test_vitals_say_what_the_clients_left_out(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`leftOut` per row (the clients' `timeline.dropped`: per page load its largest count,
    summed), the same from the rollups (batches that cut page loads apart, merged) as from
    the timelines; one line under the text table; and the days whose rollup parts were
    written before the counts were are named, not counted as none."""
    import subprocess

    import orjson

    from jsprof.store.tables.manifest import read_manifest, tables_dir, write_manifest
    from serve_util import JSPROF

    want = {"interactions": 0, "longFrames": 0}
    per_load: dict[str, dict] = {}
    pieces: dict[str, dict[int, dict]] = {}  # per page load, per piece: its smallest report
    with Store(store) as st:
        for _, uid, meta, _ in st.iter_uploads():
            d = (meta.get("timeline") or {}).get("dropped") or {}
            key = meta.get("pageLoad") or uid
            m = per_load.setdefault(key, {"interactions": 0, "longFrames": 0})
            for k in m:
                m[k] = max(m[k], d.get(k, 0))
            u = (meta.get("timeline") or {}).get("unsampled")
            if u:
                old = pieces.setdefault(key, {}).get(u["piece"])
                if old is None or u["ms"] < old["ms"]:
                    pieces[key][u["piece"]] = u
    for m in per_load.values():
        for k in want:
            want[k] += m[k]
    assert want["longFrames"] > 0 and want["interactions"] > 0
    # The pieces whose samples never came: a page load counts once, its ms summed (whole)
    ended = [[u for u in ps.values() if u["ms"] > 0] for ps in pieces.values()]
    ended = [us for us in ended if us]
    want["unsampledPageLoads"] = len(ended)
    want["unsampledMs"] = sum(round(sum(u["ms"] for u in us)) for us in ended)
    want["unsampledLongFrames"] = sum(u["longFrames"] for us in ended for u in us)
    want["unsampledInteractions"] = sum(u["interactions"] for us in ended for u in us)
    # some pieces came later (ms 0 after a count), some never did
    assert 0 < len(ended) < len(pieces), (len(ended), len(pieces))
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    st = Store(copy)
    compact(st, batch=4)
    st.close()
    merge_parts(copy, now=T0 / 1000 + 30 * 86400, fanout=2)
    _check(copy, monkeypatch)
    sto = api.open_store(copy)
    with api.session(sto) as s:
        doc = api.vitals(s, Filters(app="shop"))
        assert vitals.rolled(s.engine, s.snap, Filters(app="shop")) is not None
    sto.close()
    assert {k: sum(r["leftOut"][k] for r in doc["rows"]) for k in want} == want
    assert "leftOutUncountedDays" not in doc
    args = [str(JSPROF), "fleet", "vitals", "--store", str(copy), "--app", "shop"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (f"not in these p75s: {want['interactions']} interactions, "
            f"{want['longFrames']} long frames") in " ".join(r.stdout.split()), r.stdout
    assert (f"{want['unsampledPageLoads']} page loads ended with "
            f"{want['unsampledMs'] / 1000:.1f} s unsampled") in " ".join(r.stdout.split())
    # Parts an older jsprof wrote (no count of what was left out): those days are named
    man = read_manifest(copy)
    days = set()
    for rel in man["releases"].values():
        for e in rel["parts"]["rollup_vitals"]:
            if e.get("day") in ("2026-11-26", "2026-11-27"):
                e.pop("leftOut", None)
                days.add(e["day"])
    write_manifest(tables_dir(copy), man)
    r = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=120)
    assert orjson.loads(r.stdout)["leftOutUncountedDays"] == sorted(days) == [
        "2026-11-26", "2026-11-27"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert "not counted on 2 days compacted before they were (2026-11-26 to 2026-11-27)" in (
        " ".join(r.stdout.split())), r.stdout
