"""`jsprof fleet regressions` on a real store: a planted release regression is found at
the release it happened in (releases in version order: 1.9.0 < 1.10.0), reported once,
exit 1; stores without a planted change report nothing, exit 0."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import orjson

from fleet_util import make_trace, upload
from jsprof.store import Store
from serve_util import JSPROF


def _store(path: Path, releases: list[tuple[str, str | None]], seed: int) -> Path:
    st = Store(path)
    rng = np.random.default_rng(seed)
    at = 1.7e12
    for rel, hot in releases:
        for i in range(8):
            at += 60e3
            upload(st, f"{rel}-{i}", make_trace(rng, 500, hot=hot, hot_share=0.12),
                   app="shop", release=rel, route="/cart", receivedAt=at,
                   pageLoad=f"{rel}-load-{i // 2}")
    st.close()
    return path


def _run(store: Path) -> tuple[int, dict]:
    r = subprocess.run([str(JSPROF), "fleet", "regressions", "--store", str(store), "--app",
                        "shop", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, orjson.loads(r.stdout)


def test_planted_regression_found_once(tmp_path: Path) -> None:
    # Uploaded out of version order: 1.10.0 first, then 1.9.0, then 1.11.0 (slowPricing
    # starts in 1.10.0 and stays in 1.11.0: reported once, at 1.10.0).
    store = _store(tmp_path / "s", [("1.10.0", "slowPricing"), ("1.9.0", None),
                                    ("1.11.0", "slowPricing")], seed=3)
    code, doc = _run(store)
    assert doc["releases"] == ["1.9.0", "1.10.0", "1.11.0"]
    assert code == 1
    (reg,) = doc["regressions"]
    assert reg["name"] == "slowPricing" and reg["release"] == "1.10.0"
    assert reg["baseRelease"] == "1.9.0" and reg["beforeSelfPct"] == 0
    assert reg["selfPp"] > 2 and reg["selfPpCi"][0] > 0
    assert reg["afterMsPerLoad"] > reg["beforeMsPerLoad"] == 0
    assert len(reg["exampleIds"]) == 3 and all(i.startswith("1.10.0-") for i in reg["exampleIds"])


def test_clean_stores_report_nothing(tmp_path: Path) -> None:
    # Five releases from one generator, three seeds: 12 release pairs x ~12 functions,
    # none of them changed; any report is a false positive.
    false = 0
    for seed in (11, 12, 13):
        rels = [(f"2.{i}.0", None) for i in range(5)]
        code, doc = _run(_store(tmp_path / f"c{seed}", rels, seed))
        assert not doc["skipped"]
        false += len(doc["regressions"])
        assert code == (1 if doc["regressions"] else 0)
    assert false == 0


def test_mistakes_are_one_line_and_exit_2(tmp_path: Path) -> None:
    # A --route matching no upload said "no regressions over 2 releases" with exit 0 (every
    # other query exits 2 naming the routes), and --min-change -1 or nan was taken.
    store = _store(tmp_path / "s", [("1.0.0", None), ("1.1.0", None)], seed=4)
    base = [str(JSPROF), "fleet", "regressions", "--store", str(store), "--app", "shop"]
    for extra, said in ((["--route", "/nope"], "route '/nope' matches no route of app shop"),
                        (["--where", "country=XX"], "no uploads match"),
                        (["--min-change", "-1"], "--min-change -1.0: expected"),
                        (["--min-change", "nan"], "--min-change nan: expected")):
        r = subprocess.run(base + extra, capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, (extra, r.stdout, r.stderr)
        assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = subprocess.run(base + ["--route", "/cart"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout == "no regressions over 2 releases\n", r.stderr
