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
