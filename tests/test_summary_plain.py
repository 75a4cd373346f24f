"""`jsprof record`'s short summary printed without rich (stderr not a terminal) is the text
rich prints to a pipe, also for names rich would change (markup, `:emoji:` codes)."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console

from jsprof.render import summary
from jsprof.trace import Recording, TraceBuilder, Track


def _recording(name: str, url: str, line: int) -> Recording:
    b = TraceBuilder()
    stack = b.stack_id([b.frame_id(name, b.resource_id(url), line, 4)])
    for i in range(5):
        b.add_sample(float(i), stack)
    return Recording(tracks=[Track(name="main", trace=b.build(), sample_interval=1.0)])


def _printed(
    monkeypatch: pytest.MonkeyPatch, rec: Recording, rich: bool, fallback: bool = False
) -> str:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(summary, "rich_console_needed", lambda: rich)
    if not rich:  # the plain path must not need rich's console
        monkeypatch.setattr(summary, "stderr_console", lambda: pytest.fail("rich used"))
    if rich or fallback:
        monkeypatch.setattr(
            summary,
            "stderr_console",
            lambda: Console(file=err, highlight=False, width=summary.PIPED_WIDTH),
        )
    summary.print_recording_summary(rec, "/tmp/out [1].json")
    return err.getvalue()


@pytest.mark.parametrize(
    ("name", "url", "line", "fallback"),
    [
        ("work", "file:///srv/app.js", 3, False),
        ("[bold]x[/bold] \\[y]", "file:///srv/a[b].js", 7, False),
        ("smile:thumbs_up:", "file:///srv/app.js", 100, True),  # rich prints :100: as an emoji
    ],
)
def test_plain_summary_is_richs_text(
    monkeypatch: pytest.MonkeyPatch, name: str, url: str, line: int, fallback: bool
) -> None:
    rec = _recording(name, url, line)
    plain = _printed(monkeypatch, rec, rich=False, fallback=fallback)
    assert plain == _printed(monkeypatch, rec, rich=True)
    assert "top 1 by self time:" in plain


def _gappy_recording() -> Recording:
    """1 ms asked; 900 gaps of 1.11 ms and 60 of 40 ms (the sampler starved): a median of
    1.11 ms alone would hide that most of the time sat in the long gaps."""
    b = TraceBuilder()
    stack = b.stack_id([b.frame_id("work", b.resource_id("file:///srv/app.js"), 3, 4)])
    gaps = [1.11] * 900 + [40.0] * 60
    gaps[::16] = [40.0] * len(gaps[::16])  # spread through the run
    t = 0.0
    b.add_sample(t, stack)
    for g in gaps:
        t += g
        b.add_sample(t, stack)
    return Recording(tracks=[Track(name="main", trace=b.build(), sample_interval=1.0)])


def test_summary_says_when_the_sampler_fell_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    rec = _gappy_recording()
    d = np.diff(rec.tracks[0].trace.sample_time)
    share = d[d > 5].sum() / d.sum()
    printed = _printed(monkeypatch, rec, rich=False)
    first = printed.splitlines()[0]
    assert (
        f"interval 1 ms (achieved 1.11 ms median, {d.mean():.2f} ms mean; "
        f"{share * 100:.0f} % of the time in gaps > 5x the interval: the sampler fell behind)"
    ) in first, first
    assert share > 0.5  # most of the time, as in the recording (57 %)
    assert printed == _printed(monkeypatch, rec, rich=True)


def test_summary_of_a_steady_sampler_is_one_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    printed = _printed(monkeypatch, _recording("work", "file:///srv/app.js", 3), rich=False)
    assert "interval 1 ms (achieved 1 ms)," in printed.splitlines()[0] or (
        "interval 1 ms (achieved 1 ms)\n" in printed
    ), printed
    assert "mean" not in printed and "behind" not in printed


def test_the_sampling_figures_come_from_analysis_and_render_only_formats_them() -> None:
    """analysis/sampling.py computes what the summary says of the sampler (issue 37: render
    does no analysis); render/summary.py formats its typed result and imports no numpy."""
    import inspect

    import numpy as np

    from jsprof.analysis.sampling import Achieved, track_sampling

    t = _gappy_recording().tracks[0]
    got = track_sampling(t)
    d = np.diff(t.trace.sample_time)
    assert got.samples == 961 and got.span_ms > 0
    assert got.achieved == Achieved(
        median=pytest.approx(1.11), mean=pytest.approx(d.mean()),
        behind=pytest.approx(d[d > 5].sum() / d.sum()),
    )
    assert got.achieved.fell_behind and not got.achieved.steady and not got.cpu
    assert got.wall_ms is None
    steady = track_sampling(_recording("w", "file:///a.js", 1).tracks[0]).achieved
    assert steady is not None and steady.steady and steady.median == 1.0
    assert summary.achieved_text(steady) == "achieved 1 ms"
    assert "numpy" not in inspect.getsource(summary)
