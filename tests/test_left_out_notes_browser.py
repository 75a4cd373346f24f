"""What the clients left out, as the pages show it (issue 34), in real headless Chromium:
the flame page's vitals panel (`fleet flame`, its Time view) and the collector's dashboard
(its vitals section), over a store whose page loads had interactions and long frames cut
(`timeline.dropped`) and running pieces whose samples never came (`timeline.unsampled`,
one of them brought later: not counted). Each note is the sentence `fleet vitals` prints,
with the store's numbers, as text (a paragraph with no element in it)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from browser_util import fresh_pages, playwright_chromium
from fleet_util import resampled_page_load, split_trace, upload
from jsprof.fleet import api
from jsprof.fleet.filters import Filters
from jsprof.store import Store
from jsprof.timeline import check
from serve_util import Collector, signed_in

CLICK = {"id": 7, "type": "click", "start": 1200.0, "duration": 240.0,
         "processingStart": 1210.0, "processingEnd": 1400.0, "target": "button#buy"}


def _piece(piece: int, ms: float, long_frames: int = 0, interactions: int = 0) -> dict:
    return {"piece": piece, "start": 2000.0, "ms": ms, "longFrames": long_frames,
            "interactions": interactions}


# Per page load, its chunks' timelines: A cut 1 interaction and 3 long frames and lost its
# last piece (612.4 ms, the click and a long frame in it); B's piece came after all (ms 0
# in the next chunk: not lost); C cut 2 long frames and lost 1,487.6 ms with 2 long frames.
LOADS = {
    "A": [{"interactions": [CLICK], "load": {"lcp": 500.0},
           "dropped": {"longFrames": 3, "interactions": 1}},
          {"unsampled": _piece(4, 612.4, 1, 1)}],
    "B": [{"unsampled": _piece(2, 900.2)}, {"unsampled": _piece(2, 0.0)}],
    "C": [{"dropped": {"longFrames": 2, "interactions": 0}, "unsampled": _piece(1, 1487.6, 2)}],
}
LEFT_OUT = ("Left out by the clients (past their caps, or cut to fit a page's way out), not "
            "in these p75s: 1 interaction, 5 long frames.")
UNSAMPLED = ("2 page loads ended with 2.1 s unsampled (the piece profiling as the page left: "
             "its samples never came; 1 interaction and 3 long frames in it).")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("leftout") / "store"
    st = Store(path)
    rng = np.random.default_rng(3)
    now = time.time() * 1000 - 3600e3  # within the dashboard's default span
    for i, (pl, tls) in enumerate(LOADS.items()):
        tr = resampled_page_load(rng)
        parts = split_trace(tr, len(tls)) if len(tls) > 1 else [tr]
        for j, (piece, t) in enumerate(zip(parts, tls, strict=True)):
            upload(st, f"u{i}.{j}", piece, app="shop", release="1.0", route="/cart",
                   pageLoad=f"load-{pl}", timeline=check(t),
                   receivedAt=now + i * 60e3 + j * 1000)
    st.close()
    return path


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with playwright_chromium() as b:
        yield b


def _text_only(loc: Any) -> str:
    """The note's text, asserting it is text: no element inside the paragraph."""
    assert loc.evaluate("(e) => e.children.length") == 0, loc.evaluate("(e) => e.innerHTML")
    return " ".join(loc.text_content().split())


def test_the_store_counts_what_the_notes_say(store: Path) -> None:
    # The premise, from `fleet vitals` itself: the notes below must say these numbers.
    from jsprof.fleet.vitals import left_out_note

    st = api.open_store(store)
    with api.session(st) as s:
        doc = api.vitals(s, Filters(app="shop"))
    st.close()
    left = {k: sum(r["leftOut"][k] for r in doc["rows"]) for k in doc["rows"][0]["leftOut"]}
    assert left == {"interactions": 1, "longFrames": 5, "unsampledPageLoads": 2,
                    "unsampledMs": 2100, "unsampledLongFrames": 3, "unsampledInteractions": 1}
    note = left_out_note(doc)
    assert note is not None and LEFT_OUT[:-1].lower() in note.lower()
    assert UNSAMPLED[:-1] in note


@pytest.mark.chromium
def test_the_flame_pages_vitals_panel_says_what_was_left_out(store: Path, chromium: Any,
                                                             tmp_path: Path) -> None:
    st = api.open_store(store)
    with api.session(st) as s:
        html = api.flame(s, Filters(app="shop"))
    st.close()
    page_file = tmp_path / "flame.html"
    page_file.write_text(html)
    with fresh_pages(chromium) as b:
        p = b.new_page(viewport={"width": 1300, "height": 1000})
        errors: list[str] = []
        p.on("pageerror", lambda e: errors.append(str(e)))
        p.goto(page_file.as_uri() + "#view=time")
        p.wait_for_selector("[data-panel='vitals']", timeout=60000)
        panel = p.locator("[data-panel='vitals']")
        assert _text_only(panel.locator("[data-note='left-out']")) == LEFT_OUT
        assert _text_only(panel.locator("[data-note='unsampled']")) == UNSAMPLED
        assert not errors


@pytest.mark.chromium
def test_the_dashboard_says_what_was_left_out(store: Path, chromium: Any) -> None:
    col = Collector(store, "--app", "shop:k1")
    try:
        with fresh_pages(chromium) as b:
            p = b.new_page(viewport={"width": 1280, "height": 900})
            signed_in(p, col.url)
            p.wait_for_function("document.getElementById('vitals-note').textContent !== ''",
                                timeout=60000)
            assert _text_only(p.locator("#vitals-note")) == f"{LEFT_OUT} {UNSAMPLED}"
    finally:
        col.stop()
