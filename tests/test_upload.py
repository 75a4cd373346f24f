"""`jsprof upload` and jsprof's own files at the collector (issue 33): recordings made by
real engines (QuickJS embedded, Node with a worker: two tracks), a V8 .cpuprofile and a
pprof file (weights, no sample times) go into a real `jsprof serve` on loopback; the
collector takes jsprof's own JSON posted as it is; a file that cannot go is one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import orjson
import pytest

import jsprof
from serve_util import JSPROF, Collector

DATA = Path(__file__).parent / "data"
KEY = "k1-secret-looking-ingest-key"


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A QuickJS recording and a Node one (main thread and a worker), made for real."""
    d = tmp_path_factory.mktemp("recordings")
    out = {}
    for engine, script, name in (("quickjs", DATA / "quickjs" / "hot.js", "q.json"),
                                 ("node", DATA / "nodejs" / "worker.js", "n.json")):
        r = subprocess.run([str(JSPROF), "record", "--engine", engine, "-o", str(d / name),
                            str(script)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        out[engine] = d / name
    out["cpuprofile"] = DATA / "node" / "bench.cpuprofile"
    out["pprof"] = DATA / "pprof" / "datadog-pprof-node20.pb.gz"
    return out


@pytest.fixture
def collector(tmp_path: Path):
    col = Collector(tmp_path / "store", "--app", f"shop:{KEY}")
    yield col
    col.stop()


def _upload(col: Collector, key_file: Path, *files: Path, extra: tuple = ()
            ) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(JSPROF), "upload", *map(str, files), "--url", col.url, "--app", "shop",
         "--key-file", str(key_file), *extra],
        capture_output=True, text=True, timeout=300,
    )


def _stored(col: Collector, upload_id: str) -> dict:
    status, data = col.get(upload_id)
    assert status == 200, (status, data)
    return orjson.loads(data)


def test_recordings_of_every_engine_upload(recordings, collector, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    files = [recordings[k] for k in ("quickjs", "node", "cpuprofile", "pprof")]
    r = _upload(collector, key_file, *files, extra=("--release", "1.0", "--env", "ci"))
    assert r.returncode == 0, r.stderr
    assert KEY not in r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(files), r.stdout  # one line a file
    for path, line in zip(files, lines, strict=True):
        rec = jsprof.load(path)
        ids = line.rsplit(": ", 1)[1].split()
        tracks = [t for t in rec.tracks if t.trace.num_samples]
        assert len(ids) == len(tracks), (path, line)
        page_loads = set()
        for track, upload_id in zip(tracks, ids, strict=True):
            doc = _stored(collector, upload_id)
            meta = doc["jsprof"]["meta"]
            assert (meta["app"], meta["release"], meta["env"]) == ("shop", "1.0", "ci")
            assert meta["track"] == track.name and meta["source"] == path.name
            assert doc["jsprof"]["track"] == track.name  # read back as the track it was
            assert "args" not in meta  # the profiled script's command line stays home
            page_loads.add(meta["pageLoad"])
            t = track.trace
            assert len(doc["samples"]) == t.num_samples
            names = [f["name"] for f in doc["frames"]]
            assert sorted(names) == sorted(f.name for f in t.frames)
            times = np.array([s["timestamp"] for s in doc["samples"]])
            if t.sample_weight is None:
                assert meta.get("engine") == track.engine
                assert np.array_equal(times, t.sample_time)
                if track.time_origin is not None:
                    assert meta["timeOrigin"] == track.time_origin
            else:
                # pprof has weights, not times: the stored gaps are the file's weights.
                assert np.allclose(np.diff(times), t.sample_weight[:-1])
        assert len(page_loads) == 1  # the tracks of one recording: one page load
    assert "work" in {f["name"] for f in _stored(collector, lines[0].split()[-1])["frames"]}
    # The worker's track is its own upload.
    assert len(lines[1].rsplit(": ", 1)[1].split()) == 2, lines[1]
    # Uploading the same files again stores nothing twice: the same ids, answered 202.
    again = _upload(collector, key_file, *files, extra=("--release", "1.0", "--env", "ci"))
    assert again.returncode == 0 and again.stdout == r.stdout, again.stderr
    assert len(list(_all_ids(collector))) == sum(len(ln.rsplit(": ", 1)[1].split())
                                                 for ln in lines)


def _all_ids(col: Collector) -> list[str]:
    from jsprof.store import Store

    with Store(col_store(col)) as s:
        return [upload_id for _, upload_id, _, _ in s.iter_uploads()]


def col_store(col: Collector) -> Path:
    args = col.proc.args
    return Path(args[args.index("--store") + 1])


def test_a_refused_file_is_one_line(recordings, collector, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    bad = tmp_path / "notes.txt"
    bad.write_text("these are not samples\n")
    r = _upload(collector, key_file, bad, recordings["quickjs"])
    assert r.returncode == 2, r
    err = r.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith(f"jsprof: error: {bad}:"), r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stdout.splitlines()) == 1  # the good file went
    # A wrong key: each file refused in one line, the key nowhere in the output.
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-key")
    r = _upload(collector, wrong, recordings["quickjs"], recordings["cpuprofile"])
    assert r.returncode == 2 and r.stdout == ""
    err = r.stderr.splitlines()
    assert len(err) == 2 and all("refused by the collector (401)" in e for e in err), err
    assert "not-the-key" not in r.stderr
    # A key file that is missing: one line, before any upload.
    r = _upload(collector, tmp_path / "missing", recordings["quickjs"])
    assert r.returncode == 2 and r.stderr.strip().endswith("missing: no such file"), r.stderr


def test_the_collector_takes_jsprof_files(recordings, collector) -> None:
    # jsprof's own JSON posted as it is (the `jsprof` key), as `jsprof record` wrote it.
    data = recordings["quickjs"].read_bytes()
    ext = orjson.loads(data)["jsprof"]
    status, body = collector.post(data, query=f"app=shop&key={KEY}&release=raw")
    assert status == 202, body
    doc = _stored(collector, body["id"])
    meta = doc["jsprof"]["meta"]
    assert meta["engine"] == "quickjs" and meta["timeOrigin"] == ext["timeOrigin"]
    assert meta["sampleInterval"] == ext["sampleInterval"] and meta["track"] == "main"
    assert meta["clock"] == ext["meta"]["clock"] and "args" not in meta
    assert doc["jsprof"]["engine"] == "quickjs" and doc["jsprof"]["track"] == "main"
    assert len(doc["samples"]) == len(orjson.loads(data)["samples"])
    # What the store cannot take is one line naming the field: two tracks in one upload.
    status, body = collector.post(recordings["node"].read_bytes(),
                                  query=f"app=shop&key={KEY}")
    assert status == 400 and body["error"].startswith("body.jsprof.tracks: a recording of 2"), body
    # A merged profile (per-sample counts) is not one recording.
    merged = orjson.loads(data)
    merged["jsprof"]["sampleCounts"] = [1] * len(merged["samples"])
    status, body = collector.post(orjson.dumps(merged), query=f"app=shop&key={KEY}")
    assert status == 400 and "body.jsprof.sampleCounts: a merged profile" in body["error"]


def test_a_chromium_recordings_windows_go_as_its_timeline(collector, tmp_path: Path) -> None:
    # `record --engine chromium` of a page clicked for real keeps its long animation frames
    # and interactions as spans; uploaded, they are the upload's timeline (what the client
    # sends), so the fleet's --during and vitals see them.
    from browser_util import engine_browser
    from test_chromium_spans import PAGE, record_with_clicks

    page = tmp_path / "clicks.html"
    page.write_text(PAGE)
    with engine_browser() as b:
        rec = record_with_clicks(b, page)
    out = tmp_path / "clicks.jsprof.json"
    jsprof.save(rec, out)
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    r = _upload(collector, key_file, out)
    assert r.returncode == 0, r.stderr
    ids = r.stdout.rsplit(": ", 1)[1].split()
    timelines = [_stored(collector, i)["jsprof"]["meta"].get("timeline") for i in ids]
    got = [t for t in timelines if t]
    assert len(got) == 1, timelines  # the page's track
    t = got[0]
    assert t["longFrames"] and t["interactions"], t
    slow = max(t["interactions"], key=lambda e: e["duration"])
    assert slow["duration"] >= 400 and slow["type"] in ("click", "pointerup", "pointerdown")
    scripts = [s for f in t["longFrames"] for s in f["scripts"]]
    assert any(s.get("sourceFunctionName") == "slowClickHandlerForJsprof" for s in scripts)
