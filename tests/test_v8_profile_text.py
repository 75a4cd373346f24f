"""V8's CDP profile read from the inspector's text in C (`formats._v8profile.
read_profile_text`, `engines._v8text.ProfileText`): the same columns and the same trace as
parsing the JSON and reading the dicts (`read_profile`), on real V8 profiles; escapes
decoded as JSON decodes them; text the C reader does not take (or that is not JSON) left
to the checked path, which words the error as before."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import orjson
import pytest

from jsprof.engines._v8slices import join_slices
from jsprof.engines._v8text import ProfileText, reply_with_profile
from jsprof.errors import ErrorAt, TraceFormatError
from jsprof.formats._v8profile import FlatChildren, read_profile, read_profile_text

JS = Path(__file__).parent / "data" / "nodejs"


@pytest.fixture(scope="module")
def cpuprofile(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real V8 profile as Node writes it (node --cpu-prof of split.js, 0.2 ms)."""
    if shutil.which("node") is None:
        pytest.fail("node is not installed; these tests need Node.js 20")
    d = tmp_path_factory.mktemp("cpuprof")
    subprocess.run(
        ["node", "--cpu-prof", "--cpu-prof-interval", "200", "--cpu-prof-dir", str(d),
         str(JS / "split.js")],
        check=True, capture_output=True, timeout=60,
    )
    (path,) = d.glob("*.cpuprofile")
    return path.read_bytes()


def _reply(profile_text: bytes, mid: int = 7) -> bytes:
    return b'{"id":%d,"result":{"profile":' % mid + profile_text + b"}}"


def _same_columns(text: bytes, start: int, profile: dict) -> None:
    got = read_profile_text(text, start)
    assert got is not None
    (ids, names, urls, lines, cols, children, hits, ticks), t0, t1, samples, deltas, nodes = got[0]
    (pids, pnames, purls, plines, pcols, pch, phits, pticks), p0, p1, ps, pd, _ = read_profile(
        ErrorAt("x"), profile
    )
    assert ids.tolist() == pids and hits.tolist() == phits
    assert names == pnames and urls == purls and lines == plines and cols == pcols
    assert ticks == pticks
    assert isinstance(children, FlatChildren)
    assert children.counts.tolist() == [len(c) for c in pch]
    assert children.flat.tolist() == [c for ch in pch for c in ch]
    assert (t0, t1) == (p0, p1)
    assert samples.tolist() == ps.tolist() and deltas.tolist() == pd.tolist()
    assert nodes is None


def test_a_real_profile_reads_as_its_parsed_dicts_do(cpuprofile: bytes) -> None:
    profile = orjson.loads(cpuprofile)
    assert len(profile["nodes"]) > 20 and len(profile["samples"]) > 100
    assert any(n.get("positionTicks") for n in profile["nodes"])
    _same_columns(cpuprofile, 0, profile)
    # As the inspector's reply: the Profile found in it, and the end after its object.
    raw = _reply(cpuprofile)
    msg = reply_with_profile(raw)
    assert msg is not None and msg["id"] == 7
    text = msg["result"]["profile"]
    assert isinstance(text, ProfileText)
    assert text.num_samples() == len(profile["samples"])
    got = read_profile_text(raw, text.start)
    assert got is not None and raw[got[1]:] == b"}}"
    # Laid out with whitespace (not how V8 writes it, but JSON): the same.
    indented = orjson.dumps(profile, option=orjson.OPT_INDENT_2)
    _same_columns(indented, 0, profile)


def test_slices_as_text_join_into_the_trace_their_dicts_give(cpuprofile: bytes) -> None:
    profile = orjson.loads(cpuprofile)
    n = len(profile["samples"])
    # Three slices of the real profile (each the whole tree, a third of the samples).
    slices = []
    for a, b in ((0, n // 3), (n // 3, 2 * n // 3), (2 * n // 3, n)):
        ts = np.cumsum(profile["timeDeltas"]) + profile["startTime"]
        start = int(ts[a])
        slices.append(dict(profile, startTime=start, samples=profile["samples"][a:b],
                           timeDeltas=np.diff(ts[a:b], prepend=start).tolist()))
    texts = [reply_with_profile(_reply(orjson.dumps(s), i))["result"]["profile"]
             for i, s in enumerate(slices)]
    hidden = {u for u in (nd["callFrame"]["url"] for nd in profile["nodes"])
              if u.startswith("node:internal/modules")}
    for hide in (set(), hidden):
        want = join_slices(slices, "s", hide).to_trace(None)
        got = join_slices(texts, "s", hide).to_trace(None)
        assert got.frames == want.frames and got.resources == want.resources
        for col in ("stack_parent", "stack_frame", "sample_time", "sample_stack"):
            assert np.array_equal(getattr(got, col), getattr(want, col)), col
        assert (got.sample_line is None) == (want.sample_line is None)
        if got.sample_line is not None:
            assert np.array_equal(got.sample_line, want.sample_line)


def test_escapes_are_decoded_as_json_decodes_them(cpuprofile: bytes) -> None:
    # V8 escapes what JSON needs in a function's name (a RegExp's source: "RegExp:
    # ^\\/\\/..."); other writers escape more (\/, \u00e9, a surrogate pair).
    names = [
        rb"RegExp: ^\\/\\/\\/?\\s*@(ts-expect-error|ts-ignore)",
        rb"a\"quoted\" \/ tab\there\nline",
        rb"caf\u00e9 \u00E9 \ud83d\ude00 \u0000",
    ]
    for name in names:
        text = cpuprofile.replace(b'"functionName":"fifty"', b'"functionName":"' + name + b'"', 1)
        assert text != cpuprofile
        profile = orjson.loads(text)
        _same_columns(text, 0, profile)


@pytest.mark.parametrize("old,new", [
    (b'"id":1,', b'"id":1.0,'),  # a float where V8 writes integers
    (b'"id":1,', b'"id":1,"id":1,'),  # a repeated key (JSON parsers keep the last)
    (b'"functionName":"fifty"', b'"functionName":"\\ud83d"'),  # a lone surrogate
    (b'"functionName":"fifty"', b'"functionName":"f\xffty"'),  # not UTF-8
    (b'"functionName":"fifty"', b'"functionName":"\\x"'),  # not a JSON escape
    (b'"startTime":', b'"startTime":0.5,"x":'),
])
def test_text_the_c_reader_declines_goes_to_the_checked_path(
    cpuprofile: bytes, old: bytes, new: bytes
) -> None:
    text = cpuprofile.replace(old, new, 1)
    assert text != cpuprofile
    assert read_profile_text(text, 0) is None
    raw = _reply(text)
    pt = reply_with_profile(raw)["result"]["profile"]
    assert pt.read() is None
    try:
        profile = orjson.loads(raw)["result"]["profile"]
    except orjson.JSONDecodeError:
        return  # not JSON: the checked path's parse says so, as before
    # JSON the C reader leaves alone: joined through the dict, as before (its trace, or
    # the same error)
    def outcome(p: object) -> object:
        try:
            t = join_slices([p], "s").to_trace(None)
        except TraceFormatError as e:
            return str(e)
        return t.frames, t.sample_stack.tolist()

    assert outcome(pt) == outcome(profile)


def test_a_malformed_profile_says_what_and_where_as_before(cpuprofile: bytes) -> None:
    text = cpuprofile.replace(b'"id":1,', b'"id":"1",', 1)
    pt = reply_with_profile(_reply(text))["result"]["profile"]
    with pytest.raises(TraceFormatError, match=r"nodes\[0\]\.id"):
        join_slices([pt], "slice")


def test_members_v8_may_add_are_skipped(cpuprofile: bytes) -> None:
    extra = b'"deoptReason":"x","more":{"a":[1,-2.5e3,true,false,null,"\\u00e9",{}],"b":[]},'
    text = cpuprofile.replace(b'"hitCount":', extra + b'"hitCount":', 3)
    text = text.replace(b'"startTime":', b'"title":"t\\"x","startTime":', 1)
    _same_columns(text, 0, orjson.loads(text))


def test_only_a_profile_reply_is_kept_as_text() -> None:
    assert reply_with_profile(b'{"id":3,"result":{}}') is None
    assert reply_with_profile(b'{"method":"Profiler.consoleProfileFinished","params":{}}') is None
    # a flattened session's reply carries its sessionId after the result
    assert reply_with_profile(b'{"id":3,"result":{"profile":{"nodes":[]}},"sessionId":"S"}') is None


def test_an_extension_built_before_the_reader_leaves_it_to_the_checked_path(
    cpuprofile: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A checkout updated without `make` keeps its old _columns build: the slices are then
    # read as before (an AttributeError ended the recording).
    from jsprof.formats import _columns

    monkeypatch.delattr(_columns, "read_profile")
    pt = reply_with_profile(_reply(cpuprofile))["result"]["profile"]
    assert pt.read() is None
    got = join_slices([pt], "s").to_trace(None)
    want = join_slices([orjson.loads(cpuprofile)], "s").to_trace(None)
    assert got.frames == want.frames and np.array_equal(got.sample_stack, want.sample_stack)
