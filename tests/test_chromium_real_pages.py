"""Real pages running real npm code (acorn from tests/js/node_modules) recorded on real
headless Chromium, as a new user would: what a page does with its workers must not cost
their tracks."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_util import engine_browser
from jsprof.engines.chromium import Browser, record_chromium
from jsprof.trace import Track

ACORN = Path(__file__).parent / "js" / "node_modules" / "acorn" / "dist" / "acorn.js"

# The worker parses acorn's own source with acorn until the page says stop; the page lets
# it run a while, then ends it: by Worker.terminate() or by the worker's own close().
WORKER = """importScripts('acorn.js');
let src = '';
function parseInWorker() { return acorn.parse(src, {ecmaVersion: 2020}).body.length; }
onmessage = async (e) => {
  src = await (await fetch('acorn.js')).text();
  const t0 = performance.now();
  let rounds = 0;
  while (performance.now() - t0 < 400 || rounds < 3) { parseInWorker(); rounds++; }
  postMessage({ms: performance.now() - t0, rounds});
  if (e.data === 'close') close();
  else setInterval(() => postMessage({late: true}), 1);  // the page must not hear these
};
"""

PAGE = """<!doctype html><html><body><script>
const w = new Worker('parse.js');
let heard = 0;
w.addEventListener('message', () => { heard++; });
w.onmessage = (e) => {
  if ('%s' === 'terminate') { w.terminate(); w.terminate(); }
  console.log('parsed ' + e.data.rounds + ' times');
  setTimeout(() => { console.log('heard ' + heard); window.done = true; }, 300);
};
w.postMessage('%s');
</script></body></html>
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with engine_browser() as b:
        yield b


def _page(folder: Path, how: str) -> Path:
    shutil.copy(ACORN, folder / "acorn.js")
    (folder / "parse.js").write_text(WORKER)
    page = folder / "index.html"
    page.write_text(PAGE % (how, how))
    return page


def _names(track: Track) -> set[str]:
    t = track.trace
    return {t.frames[t.stack_frame[s]].name for s in set(t.sample_stack.tolist()) if s >= 0} | {
        t.frames[f].name for s in set(t.sample_stack.tolist()) if s >= 0 for f in t.stack_frames(s)
    }


@pytest.mark.under_load
@pytest.mark.parametrize("how", ["terminate", "close"])
def test_an_ended_worker_keeps_its_track(browser: Browser, tmp_path: Path, how: str) -> None:
    # A worker that did its work and was ended by the page (terminate) or by itself
    # (close) in under a second: its whole track was lost, with one warning line ("the
    # thread ended before its profile could be taken"), as its one-second slice had not
    # come yet. Pools and one-shot workers end workers all the time.
    page = _page(tmp_path, how)
    out = io.StringIO()
    rec = record_chromium(str(page), 1.0, until="js:window.done", browser=browser, stdout=out)
    # The page hears nothing from a worker it terminated (terminate() waits for jsprof
    # to cut the workers' slices first): one message, the result.
    assert out.getvalue().startswith("parsed ") and out.getvalue().endswith("\nheard 1\n"), (
        out.getvalue())
    worker_url = (tmp_path / "parse.js").resolve().as_uri()
    assert [t.name for t in rec.tracks] == ["main", worker_url]
    worker = rec.tracks[1]
    assert "partial" not in worker.meta and "lost" not in rec.tracks[0].meta, (
        worker.meta, rec.tracks[0].meta)
    # The worker's own code is there, its parser under it; none of it on the page's track.
    names = _names(worker)
    assert "parseInWorker" in names and "pp$8.parseTopLevel" in names, sorted(names)[:40]
    assert "parseInWorker" not in _names(rec.tracks[0])
