"""TraceBuilder follows the spec's "get an element ID" / "get a stack ID" and the buffer limit."""

import numpy as np

from jsprof.trace import NONE, ProfilerFrame, TraceBuilder


def test_equal_resources_and_frames_get_the_existing_id():
    b = TraceBuilder()
    r0 = b.resource_id("file:///a.js")
    r1 = b.resource_id("file:///b.js")
    assert b.resource_id("file:///a.js") == r0 != r1
    f = b.frame_id("f", r0, 1, 10)
    assert b.frame_id("f", r0, 1, 10) == f
    # Component-wise: any differing member makes a new frame.
    others = {
        b.frame_id("f", r1, 1, 10),
        b.frame_id("f", r0, 2, 10),
        b.frame_id("f", r0, 1, 11),
        b.frame_id("g", r0, 1, 10),
        b.frame_id("f", None, 1, 10),
    }
    assert f not in others and len(others) == 5
    t = b.build()
    assert t.resources == ["file:///a.js", "file:///b.js"]
    assert t.frames[f] == ProfilerFrame("f", r0, 1, 10)


def test_stack_ids_are_shared_by_common_prefixes():
    b = TraceBuilder()
    a, c, d = (b.frame_id(n) for n in "acd")
    s1 = b.stack_id([a, c])
    s2 = b.stack_id([a, d])
    s3 = b.stack_id([a, c])
    assert s1 == s3 and s1 != s2
    t = b.build()
    assert t.num_stacks == 3  # a, a>c, a>d
    assert t.stack_frames(s1) == [a, c] and t.stack_frames(s2) == [a, d]
    # Parents always precede children.
    assert all(p < i for i, p in enumerate(t.stack_parent.tolist()) if p != NONE)


def test_undefined_frames_are_skipped_and_empty_stack_has_no_id():
    b = TraceBuilder()
    a, c = b.frame_id("a"), b.frame_id("c")
    assert b.stack_id([a, None, c]) == b.stack_id([a, c])
    assert b.stack_id([None, None]) is None
    assert b.stack_id([]) is None


def test_markers_and_lines_are_optional_columns():
    b = TraceBuilder()
    s = b.stack_id([b.frame_id("a")])
    b.add_sample(0.0, s)
    t = b.build()
    assert t.sample_marker is None and t.sample_line is None
    b.add_sample(1.0, None, marker="gc")
    b.add_sample(2.0, s, line=7)
    t = b.build()
    assert t.sample_marker.tolist() == [NONE, 1, NONE]
    assert t.sample_line.tolist() == [0, 0, 7]
    assert t.sample_stack.tolist() == [s, NONE, s]
    assert np.array_equal(t.sample_time, [0.0, 1.0, 2.0])


def test_map_stacks_reinterns_with_dropped_frames_skipped():
    b = TraceBuilder()
    a, h, c = b.frame_id("a"), b.frame_id("hidden"), b.frame_id("c")
    s_ahc = b.stack_id([a, h, c])
    s_ah = b.stack_id([a, h])
    t = b.build()
    nb = TraceBuilder()
    na, nc = nb.frame_id("a"), nb.frame_id("c")
    m = nb.map_stacks(t, [na, None, nc])
    out = nb.build()
    assert out.stack_frames(int(m[s_ahc])) == [na, nc]  # 'hidden' skipped, caller used
    assert m[s_ah] == m[t.stack_parent[s_ah]]  # a stack ending in a dropped frame = its parent
    assert m[-1] == NONE  # indexing with "no stack" stays "no stack"


def test_replace_and_with_tables_rebuild_a_trace_keeping_every_other_column():
    import ast
    from pathlib import Path

    import pytest

    import jsprof

    b = TraceBuilder()
    f = b.frame_id("f", b.resource_id("file:///a.js"), 1, 1)
    s = b.stack_id([f])
    b.add_sample(0.0, s, "gc", 3)
    b.add_sample(1.0, s, None, 4)
    t = b.build()
    t = t.replace(sample_weight=[1.0, 2.0], sample_count=[1, 2])
    assert t.sample_marker.tolist() == [1, NONE] and t.sample_line.tolist() == [3, 4]

    kept = t.replace(sample_time=[0.0, 5.0])
    assert kept.sample_time.tolist() == [0.0, 5.0]
    # the columns not named are shared, not copied
    assert kept.sample_line is t.sample_line and kept.sample_weight is t.sample_weight
    assert kept.sample_count is t.sample_count and kept.frames == t.frames

    nb = TraceBuilder()
    g = nb.frame_id("g", None, 7, 2)
    ns = nb.stack_id([g])
    new = t.with_tables(nb.build(), sample_stack=[ns, ns])
    assert new.frames == [ProfilerFrame("g", None, 7, 2)] and new.resources == []
    assert new.sample_stack.tolist() == [ns, ns] and new.sample_time is t.sample_time
    assert new.sample_marker is t.sample_marker and new.sample_count is t.sample_count
    with pytest.raises(TypeError, match="no column sample_times"):
        t.replace(sample_times=[0.0, 1.0])

    # the modules that rebuild traces go through these, not the constructor
    src = Path(jsprof.__file__).parent
    for rel in ("analysis/filters.py", "analysis/sourcemap.py", "instrument/__init__.py"):
        calls = [
            n.lineno for n in ast.walk(ast.parse((src / rel).read_text()))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id == "ProfilerTrace"
        ]
        assert calls == [], (rel, calls)
