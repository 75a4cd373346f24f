"""A .jsprof.json's page windows (long frames, their script entries, interactions) are
computed with by `report --during` and the viewer's Time view: a file whose window args
have the wrong types (any program may write one) is refused in one line naming the field,
exit 2, never a traceback."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from jsprof import io
from jsprof import timeline as tl
from jsprof.trace import Recording, TraceBuilder, Track


def _recording() -> Recording:
    """fib sampled 0-400 ms, with the timeline a page reports (checked, as the Chromium
    engine keeps it) as its spans: a click (90 ms, 270 ms long; handlers 100-350 ms), a
    long frame."""
    b = TraceBuilder()
    sid = b.stack_id([b.frame_id("fib", b.resource_id("file:///app.js"), 1, 1)])
    for i in range(400):
        b.add_sample(float(i), sid)
    timeline = tl.check({
        "longFrames": [{
            "start": 95.0, "duration": 260.0, "blockingDuration": 200.0, "renderStart": 350.0,
            "styleAndLayoutStart": 351.0,
            "scripts": [{"invoker": "BUTTON#buy.onclick", "invokerType": "event-listener",
                         "sourceURL": "file:///app.js", "sourceFunctionName": "fib",
                         "sourceCharPosition": 12, "start": 100.0, "duration": 250.0,
                         "forcedStyleAndLayoutDuration": 0}],
        }],
        "interactions": [{"id": 7, "type": "click", "start": 90.0, "duration": 270.0,
                          "processingStart": 100.0, "processingEnd": 350.0,
                          "target": "button#buy"}],
    })
    rec = Recording.of(b.build(), sample_interval=1.0)
    track = rec.tracks[0]
    return Recording([Track(**{**track.__dict__, "spans": tl.to_spans(timeline)})])


def _report(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jsprof.cli", "report", str(path), *args],
        capture_output=True, text=True, timeout=120,
    )


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("spans") / "page.jsprof.json"
    io.save(_recording(), path)
    return path, orjson.loads(path.read_bytes())


def test_a_good_file_keeps_its_windows(good: tuple[Path, dict]) -> None:
    path, _ = good
    p = _report(path, "--during", "interaction", "--json")
    assert p.returncode == 0, p.stderr
    # the click's window: from 90 ms, its duration (270) past its handlers' end (350)
    assert orjson.loads(p.stdout)["total_ms"] == pytest.approx(270.0, abs=1.0)


@pytest.mark.parametrize(("kind", "key", "value", "says"), [
    ("interaction", "duration", "270", "duration: expected a number of ms"),
    ("interaction", "processingEnd", 1e300, "processingEnd: expected a number of ms"),
    ("interaction", "processingEnd", True, "processingEnd: expected a number of ms"),
    ("interaction", "id", -1, "id: expected a whole number"),
    ("interaction", "target", 5, "target: expected a string or null"),
    ("long-frame", "blockingDuration", "200", "blockingDuration: expected a number of ms"),
    ("long-frame", "blockingDuration", -5, "blockingDuration: expected a number of ms"),
    ("script", "sourceFunctionName", 3, "sourceFunctionName: expected a string or null"),
    ("script", "sourceURL", "x" * 5000, "sourceURL: 5000 characters, over the limit"),
])
def test_bad_window_args_are_refused_naming_the_field(
    good: tuple[Path, dict], tmp_path: Path, kind: str, key: str, value: object, says: str
) -> None:
    _, doc = good
    doc = copy.deepcopy(doc)
    spans = doc["jsprof"]["spans"]
    i = spans["kind"].index(kind)
    spans["args"][i][key] = value
    bad = tmp_path / "bad.jsprof.json"
    bad.write_bytes(orjson.dumps(doc))
    p = _report(bad, "--during", "interaction" if kind == "interaction" else "long-frame")
    assert p.returncode == 2, (p.stdout, p.stderr)
    err = p.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert f"jsprof.spans.args[{i}].{says}" in err, err


@pytest.mark.parametrize("ext", [".chrome.json", ".pftrace"])
def test_other_formats_windows_are_checked_too(tmp_path: Path, ext: str) -> None:
    """Chrome trace and Perfetto carry the windows too (their args, debug annotations):
    read back with a string where a number of ms goes, one line, exit 2."""
    rec = _recording()
    sp = rec.tracks[0].spans
    i = int(sp.of_kind("interaction")[0])
    good = tmp_path / f"good{ext}"
    io.save(rec, good)
    p = _report(good, "--during", "interaction", "--json")
    assert p.returncode == 0 and orjson.loads(p.stdout)["total_ms"] == pytest.approx(270, abs=1)
    sp.args[i]["duration"] = "270"  # as another program might write it
    bad = tmp_path / f"bad{ext}"
    io.save(rec, bad)
    p = _report(bad, "--during", "interaction")
    err = p.stderr.strip()
    assert p.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "duration: expected a number of ms" in err, err


@pytest.mark.parametrize(("column", "value", "says"), [
    ("kind", ["interaction"], "jsprof.spans.kind[1]: ['interaction'] is not one of"),
    ("kind", {"a": 1}, "jsprof.spans.kind[1]: {'a': 1} is not one of"),
    ("kind", "k" * 5000, "jsprof.spans.kind[1]: 'kkkk"),
    ("name", "0" * 5000, "jsprof.spans.name[1]: '0000"),
])
def test_bad_span_columns_are_one_short_line(
    good: tuple[Path, dict], tmp_path: Path, column: str, value: object, says: str
) -> None:
    # A kind that is no string was a TypeError traceback (unhashable in the kinds' dict),
    # and a 5,000-character one was echoed whole into the error line.
    _, doc = good
    doc = copy.deepcopy(doc)
    doc["jsprof"]["spans"][column][1] = value
    bad = tmp_path / "bad.jsprof.json"
    bad.write_bytes(orjson.dumps(doc))
    p = _report(bad)
    err = p.stderr.strip()
    assert p.returncode == 2 and "Traceback" not in err, err
    assert len(err.splitlines()) == 1 and len(err) < 300, err
    assert says in err, err
