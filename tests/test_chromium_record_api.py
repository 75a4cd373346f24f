"""`jsprof.record(engine="chromium", ...)` from Python, on real headless Chromium: the
same targets and endings as `jsprof record --engine chromium` (a script, a page, a URL;
--until, --duration), the page's errors as the other engines' script errors, and user
mistakes as one-line UsageErrors before any browser starts."""

from __future__ import annotations

from pathlib import Path

import pytest

import jsprof
from jsprof.engines.chromium.serve import PageServer
from jsprof.errors import JSError, UsageError

DATA = Path(__file__).parent / "data" / "chromium_engine"


def frame_names(track: jsprof.Track) -> set[str]:
    return {f.name for f in track.trace.frames}


def test_record_a_script_and_save_it(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "split.jsprof.json"
    rec = jsprof.record(str(DATA / "split.js"), engine="chromium", sample_interval=0.5, output=out)
    assert capfd.readouterr().out == "split done\n"  # the page's console, as on the CLI
    main = rec.tracks[0]
    assert main.name == "main" and main.engine == "chromium"
    assert main.meta["exit"] == "ok" and main.sample_interval == 0.5
    assert {"fifty", "thirty", "twenty"} <= frame_names(main)
    # Saved as returned.
    back = jsprof.load(out)
    assert [t.name for t in back.tracks] == ["main"]
    assert back.tracks[0].trace.num_samples == main.trace.num_samples


def test_record_a_url_until_an_expression_capped_by_duration() -> None:
    # A URL on a real loopback server of the test's own, not one jsprof serves.
    server = PageServer(str(DATA))
    try:
        url = server.url("/forever.html")
        rec = jsprof.record(url, engine="chromium", until="js:window.ready === true", duration=20)
        main = rec.tracks[0]
        assert main.meta["exit"] == "ok" and main.meta["url"] == url
        assert "tickWork" in frame_names(main)
        # The same page never settles: --duration ends it, which is not an error.
        rec = jsprof.record(url, engine="chromium", duration=1.5)
        assert rec.tracks[0].meta["exit"] == "duration"
    finally:
        server.close()


def test_a_page_with_a_worker_gives_a_track_each() -> None:
    rec = jsprof.record(str(DATA / "worker.html"), engine="chromium")
    assert [t.name for t in rec.tracks][0] == "main" and len(rec.tracks) == 2
    assert rec.tracks[1].name.endswith("/worker_hot.js")
    assert "workerSpin" in frame_names(rec.tracks[1])


def test_a_syntax_error_says_where_it_is(tmp_path: Path) -> None:
    # A SyntaxError has no stack: the page's error said only "SyntaxError: Unexpected
    # end of input", naming neither the file nor the line.
    bad = tmp_path / "bad.js"
    bad.write_text("let ok = 1;\nfunction (\n")
    with pytest.raises(JSError, match="SyntaxError") as e:
        jsprof.record(str(bad), engine="chromium", duration=20)
    errors = e.value.recording.tracks[0].meta["errors"]  # type: ignore[attr-defined]
    assert f"{bad.resolve().as_uri()}:2:" in errors[0], errors


def test_a_page_error_raises_with_the_recording(tmp_path: Path) -> None:
    out = tmp_path / "error.jsprof.json"
    with pytest.raises(JSError, match="TypeError: bad thing") as e:
        jsprof.record(str(DATA / "error.js"), engine="chromium", output=out)
    rec = e.value.recording  # type: ignore[attr-defined]
    assert "failing" in frame_names(rec.tracks[0])
    assert e.value.output == str(out) and jsprof.load(out).tracks[0].meta["errors"]


@pytest.mark.parametrize(
    ("target", "kwargs", "message"),
    [
        ("notes.txt", {}, "give a .html, .js or .mjs file"),
        ("missing.html", {}, "no such file"),
        ("pages", {}, "is a directory"),  # it said "no such file" of a folder that exists
        ("ftp://example.com/x", {}, "only http://, https:// and file:// URLs"),
        ("split.js", {"args": ["x"]}, "a page takes no arguments"),
        ("split.js", {"until": "later"}, "give `load` or `js:EXPRESSION`"),
        ("split.js", {"max_buffer_size": 10}, "not supported with --engine chromium"),
        ("split.js", {"workers": 2}, "--workers runs QuickJS runtimes"),
    ],
)
def test_mistakes_are_one_line_usage_errors(
    tmp_path: Path, target: str, kwargs: dict, message: str
) -> None:
    (tmp_path / "notes.txt").write_text("not a page")
    (tmp_path / "pages").mkdir()
    path = (
        target
        if "://" in target
        else str(DATA / target if target == "split.js" else tmp_path / target)
    )
    with pytest.raises(UsageError, match=message) as e:
        jsprof.record(path, engine="chromium", **kwargs)
    assert "\n" not in str(e.value)


def test_until_is_refused_for_script_engines() -> None:
    with pytest.raises(UsageError, match="--until goes with --engine chromium"):
        jsprof.record(str(DATA / "split.js"), engine="node", until="load")
