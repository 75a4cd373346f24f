"""Folded stacks (Brendan Gregg's collapsed format): read and write.

One line per unique stack, `root;caller;leaf COUNT`, COUNT the number of samples, as
flamegraph.pl, inferno and speedscope read it. How jsprof writes it:

- A frame is `name (url:line:column)`, or `name (url)` without a line, or just `name`
  without a script. Unknown line or column parts are written as 0 (lines are 1-based, so
  0 cannot be a real one); an empty name is written `(anonymous)`, as viewers show it,
  and `(anonymous)` with a place, `(anonymous) (url...)`, reads back as the empty name.
- `;` cannot appear in a frame (it separates frames) and a line break cannot appear
  either: both become `,`/space. This loses nothing a person reads, but a name that held
  them does not read back identically.
- Samples without JavaScript are one-frame stacks of a pseudo frame named after the
  sample's marker: `(idle)`, `(garbage collector)`, `(program)`, ...
- One track: lines as above. Several tracks: each line starts with a root frame
  `track:NAME` (not `[...]`: a leading bracket reads as JSON); when every line of a file
  starts with such a frame, reading splits the file back into those tracks.
- A recording with no samples is refused: its folded stacks would be an empty file,
  which no reader takes.
- Lines are sorted, like stackcollapse output. Counts are per stack, so timestamps do
  not survive; reading back gives each line's samples one after the other, 1 ms apart
  (the format has no interval), which keeps per-stack totals. When the counts add up to
  more than `trace.MAX_SAMPLES` (a merged fleet profile), each line is instead one
  sample standing for its count (`sample_count`); one line counts at most that many.

Reading accepts what the tools write: any frame text (a trailing `(url:line:col)`,
`(url:line)` as py-spy writes it, or `(url)` is parsed back, so a bare name that itself
ends in ` (...)` reads as name plus URL), a whole-number count after the last space,
blank lines ignored.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .. import trace as model
from ..errors import ErrorAt, TraceFormatError
from ..meta import FOLDED, SOURCE_FORMAT
from ..trace import NONE, Recording, Track, sample_counts
from ._common import (
    PSEUDO_NAMES,
    FrameKey,
    build_trace,
    frame_keys,
    pseudo_index,
)
from ._format import Format

TRACK_FRAME = re.compile(r"^track:(.+)$")
_LOCATION = re.compile(r"^(?P<name>.*) \((?P<url>.*?)(?::(?P<line>\d+)(?::(?P<col>\d+))?)?\)$")
_LINE = re.compile(r"^\S.*[ \t]\d+$")
# `;` separates frames; line breaks (all that str.splitlines splits at) and other control
# characters would break or void the line.
_CLEAN = str.maketrans(
    {
        ";": ",",
        **{chr(c): " " for c in range(0x20) if c != 0x09},
        "\x85": " ",
        "\u2028": " ",
        "\u2029": " ",
    }
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
NOMINAL_INTERVAL_MS = 1.0
ANONYMOUS = "(anonymous)"  # an empty name, as viewers show it
SNIFF_BYTES = 1 << 20


def _frame_text(name: str, url: str | None, line: int | None, col: int | None) -> str:
    text = name or ANONYMOUS
    if url is not None or line is not None:
        loc = url or ""
        if line is not None or col is not None:
            loc += f":{line or 0}:{col or 0}"
        text += f" ({loc})"
    return text.translate(_CLEAN)


def _track_lines(track: Track, prefix: str) -> dict[str, int]:
    trace = track.trace
    texts = [_frame_text(*k) for k in frame_keys(trace)]
    # Stack text built once per stack; parents precede children.
    stack_text: list[str] = []
    for p, f in zip(trace.stack_parent.tolist(), trace.stack_frame.tolist(), strict=True):
        stack_text.append(f"{stack_text[p]};{texts[f]}" if p != NONE else prefix + texts[f])
    # Key per sample: stack id, or -(pseudo index) - 2 for samples without JavaScript.
    pseudo = pseudo_index(trace)
    key = np.where(trace.sample_stack != NONE, trace.sample_stack.astype(np.int64), -pseudo - 2)
    # Counts are recorded samples: a merged (fleet) profile's rows stand for several.
    uniq, inverse = np.unique(key, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1), weights=sample_counts(trace), minlength=len(uniq))
    counts = counts.astype(np.int64)
    out: dict[str, int] = {}
    for k, c in zip(uniq.tolist(), counts.tolist(), strict=True):
        text = stack_text[k] if k >= 0 else prefix + PSEUDO_NAMES[-k - 2]
        out[text] = out.get(text, 0) + c  # two frames may print alike
    return out


def write(rec: Recording) -> bytes:
    if not rec.tracks:
        raise TraceFormatError("cannot write a recording with no tracks")
    if not rec.num_samples:
        # Folded stacks have no way to say "no samples" but an empty file, and an empty
        # file is what every reader (jsprof's, flamegraph.pl's, speedscope's) refuses.
        raise TraceFormatError(
            "cannot write folded stacks of a recording with no samples (the file would be "
            "empty, which no reader takes); write .jsprof.json or .speedscope.json instead"
        )
    several = len(rec.tracks) > 1
    lines: dict[str, int] = {}
    for t in rec.tracks:
        prefix = f"track:{t.name.translate(_CLEAN)};" if several else ""
        for text, c in _track_lines(t, prefix).items():
            lines[text] = lines.get(text, 0) + c
    return "".join(f"{s} {c}\n" for s, c in sorted(lines.items())).encode()


def _parse_frame(text: str) -> FrameKey:
    m = _LOCATION.match(text)
    if m is None:
        return (text, None, None, None)
    line = int(m["line"]) if m["line"] is not None else 0
    col = int(m["col"]) if m["col"] is not None else 0
    # jsprof writes an empty name (V8's anonymous function) as `(anonymous)`; with a place
    # it is that function again, not one named "(anonymous)" (which diffed as new).
    name = "" if m["name"] == ANONYMOUS else m["name"]
    return (name, m["url"] or None, line or None, col or None)


def sniff(data: bytes, doc: Any) -> bool:
    """The first non-blank line is a stack line. Only that line is read (up to 1 MiB:
    deep stacks make long lines), so sniffing a big file costs what its head costs."""
    if doc is not None:
        return False
    limit = min(len(data), SNIFF_BYTES)
    pos = 0
    while pos < limit:
        nl = data.find(b"\n", pos, limit)
        if nl < 0 and len(data) > limit:
            return False  # a first line longer than SNIFF_BYTES: not folded stacks
        end = limit if nl < 0 else nl
        try:
            line = data[pos:end].decode("utf-8")
        except UnicodeDecodeError:
            return False
        # Text, not binary: protobuf (pprof, Perfetto) is full of bytes below 0x20.
        if _CONTROL.search(line):
            return False
        if line.strip():
            return _LINE.match(line.strip()) is not None
        pos = end + 1
    return False


def read(data: bytes, doc: Any, source: str) -> Recording:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceFormatError(
            f"{source}: byte {e.start}: not UTF-8 text; folded stacks are text lines"
        ) from None
    # Sniffing looked at the first line only; a control character anywhere is not text.
    if (bad := _CONTROL.search(text)) is not None:
        n = text.count("\n", 0, bad.start()) + 1
        raise ErrorAt(source)(
            f"line {n}", f"control character {bad[0]!r}; folded stacks are text lines"
        )
    stacks: list[list[str]] = []
    counts: list[int] = []
    line_numbers: list[int] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        head, _, count = line.rpartition(" ")
        head = head.rstrip()
        if not head or not count.isdigit():
            raise TraceFormatError(
                f"{source}: line {n}: expected `frame;frame;... COUNT` with a whole-number "
                f"count after the last space, got {line[:60]!r}"
            )
        frames = head.split(";")
        if any(f == "" for f in frames):
            raise ErrorAt(source)(f"line {n}", "empty frame name between `;`")
        stacks.append(frames)
        counts.append(int(count))
        line_numbers.append(n)
    if not stacks:
        raise TraceFormatError(f"{source}: no stack lines; expected `frame;frame COUNT` lines")
    groups: dict[str, list[int]] = {}
    tracked = all(TRACK_FRAME.match(s[0]) and len(s) > 1 for s in stacks)
    for i, s in enumerate(stacks):
        name = TRACK_FRAME.match(s[0])[1] if tracked else "main"  # type: ignore[index]
        groups.setdefault(name, []).append(i)
    parsed: dict[str, FrameKey] = {}  # a deep profile repeats few frames many times

    def frame(text: str) -> FrameKey:
        k = parsed.get(text)
        if k is None:
            k = parsed[text] = _parse_frame(text)
        return k

    # Up to MAX_SAMPLES in all, a line's samples are laid out one by one; beyond (a merged
    # fleet profile), each line is one sample standing for its count (`sample_count`), so
    # whatever jsprof writes as folded stacks reads back. One line counts at most that many.
    if (big := next((n for n, c in enumerate(counts) if c > model.MAX_SAMPLES), None)) is not None:
        raise ErrorAt(source)(
            f"line {line_numbers[big]}",
            f"counts {counts[big]} samples, more than jsprof reads ({model.MAX_SAMPLES}); "
            "is this file intact?",
        )
    rows = sum(counts) > model.MAX_SAMPLES
    tracks = []
    for name, idx in groups.items():
        skip = int(tracked)
        frame_lists = [[frame(f) for f in stacks[i][skip:]] for i in idx]
        c = np.array([counts[i] for i in idx], np.int64)
        reps = (c > 0).astype(np.int64) if rows else c
        key = np.repeat(np.arange(len(idx)), reps)
        if rows:
            weight = c[c > 0] * NOMINAL_INTERVAL_MS
            times = np.cumsum(weight) - weight
        else:
            times = np.arange(len(key), dtype=np.float64) * NOMINAL_INTERVAL_MS
        trace = build_trace(frame_lists, key, times)
        if rows:
            trace.sample_weight = weight
            trace.sample_count = c[c > 0]
        tracks.append(Track(name, trace, meta={SOURCE_FORMAT: FOLDED}))
    return Recording(tracks)


FORMAT = Format(
    name="folded",
    description="folded stacks `root;caller;leaf COUNT` (flamegraph.pl, inferno, speedscope)",
    extensions=(".folded", ".collapsed"),
    sniff_head=lambda p: not p.is_json and sniff(p.data, None),
    read=lambda p: read(p.data, None, p.source),
    write=write,
)
