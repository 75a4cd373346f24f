"""A fleet merge says it is aggregated instead of inventing a time axis (issue 34).

Its tracks hold one weighted sample per (stack, marker), summed over many page loads that
share no clock. Before, `fleet` laid those rows end to end (`cumsum` of their weights) and
called that sample times: a Time view, `report --time-range` and every writer took the
made-up axis for a recording's. Now the times are 0, the track's meta says `aggregated`,
views and filters respect it, and only a format that keeps time as timestamps gets the
samples laid out, at the border (so no weight is lost there).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from fleet_util import real_store
from jsprof import io
from jsprof.cli import main
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.meta import AGGREGATED


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return real_store(tmp_path_factory.mktemp("aggregated") / "store", 5, n=6)


def test_the_merged_recording_is_aggregated_with_no_times(store: Path) -> None:
    st = api.open_store(store)
    with api.session(st) as s:
        rec = api.recording(s, Filters(app="shop"))
        top = api.top(s, Filters(app="shop"), None)
    st.close()
    assert len(rec.tracks) == 3
    for t in rec.tracks:
        assert t.meta[AGGREGATED] is True
        assert t.trace.num_samples > 1 and not t.trace.sample_time.any()
    total = sum(float(t.trace.sample_weight.sum()) for t in rec.tracks)
    assert total == pytest.approx(top["totalMs"], abs=1e-3)


def test_an_export_keeps_the_mark_and_refuses_a_time_range(store: Path, tmp_path: Path,
                                                           capsys) -> None:
    out = tmp_path / "merged.jsprof.json"
    assert main(["fleet", "export", "--store", str(store), "--app", "shop", "-o", str(out)]) == 0
    rec = io.load(out)
    assert all(t.meta[AGGREGATED] is True and not t.trace.sample_time.any()
               for t in rec.tracks)
    capsys.readouterr()
    assert main(["report", str(out), "--time-range", "0:100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "merged profile" in err[0] and "no time axis" in err[0]
    # The flame page of the export has no Time view (there is no time to draw).
    page = tmp_path / "merged.html"
    assert main(["flame", str(out), "-o", str(page)]) == 0
    assert "time" not in re.findall(r'data-tab="(\w+)"', page.read_text())


def test_a_format_of_timestamps_gets_the_samples_laid_out(store: Path, tmp_path: Path,
                                                          capsys) -> None:
    """Speedscope's sampled profile keeps weights, a Chrome trace only timestamps: both
    read back with every millisecond the query counted."""
    capsys.readouterr()
    assert main(["fleet", "top", "--store", str(store), "--app", "shop", "--release", "1.9.0",
                 "--json", "--all"]) == 0
    top = json.loads(capsys.readouterr().out)
    for name in ("merged.speedscope.json", "merged.trace.json"):
        out = tmp_path / name
        assert main(["fleet", "export", "--store", str(store), "--app", "shop", "--release",
                     "1.9.0", "-o", str(out)]) == 0
        capsys.readouterr()
        (t,) = io.load(out).tracks
        times = t.trace.sample_time
        assert np.all(np.diff(times) >= 0)
        assert AGGREGATED not in t.meta  # laid out: a plain recording of that format
        assert main(["report", str(out), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["total_ms"] == pytest.approx(top["totalMs"], rel=1e-3, abs=0.5), name
