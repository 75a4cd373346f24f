"""A slower session's share of a faster one's ticks on the wall clock (issue 32, qjsthin):
each tick stands for its time until the next, so a due time of the slower session that
falls in a gap of the grid (a stop's ticks dropped as off-CPU, its first restamped where
the stop began) is the tick's before the gap, and the slower session's grid keeps its
phase past the gap. Before, thinning by times kept the first tick after the gap: the stop
weighed on the slower session's sample before it, and its grid restarted where the
thread resumed. Engine-free: a fake sampler backend feeds the chunks (the engine's own
recordings beside busy loops: tests/test_quickjs_load.py)."""

from __future__ import annotations

import numpy as np

from jsprof.session import DEFERRED, Chunk, ProfilerSession, SharedSampler, keep_spans
from jsprof.trace import sample_weights

A, B = 0, 1  # trie nodes: function a ran before the stop, b where the thread stood

# A 1 ms grid from 0 to 60 ms; the thread stood in b from 21 ms to 41 ms: the stop's
# first tick (21) restamped where it began, 22-40 dropped as off-CPU (the engine's
# sampler_capture_locked), b again at 41-44 (where it resumed), then a.
TIMES = np.array([*range(0, 22), *range(41, 61)], np.float64)
STACKS = np.array([A] * 21 + [B] + [B] * 4 + [A] * 16, np.int32)
FLAGS = np.where(TIMES == 21, DEFERRED, 0).astype(np.uint32)


def test_a_due_time_in_a_gap_is_the_tick_before_it_at_the_due_time() -> None:
    idx, at, last = keep_spans(TIMES, 9.5, -np.inf, 10.0, 1.0)
    # 30 falls in the stop (21-41): the stop's first tick there; 40 too, no sample (a
    # 10 ms sampler drops it as off-CPU); the grid goes on at 50, not at 41 + 10
    assert at.tolist() == [0, 10, 20, 30, 50, 60]
    assert TIMES[idx].tolist() == [0, 10, 20, 21, 50, 60]
    assert last == 60
    # a 4 ms session: 24 falls in the stop, 28 ... 40 no sample, then 44
    idx4, at4, _ = keep_spans(TIMES, 3.5, -np.inf, 4.0, 1.0)
    assert at4.tolist() == [*range(0, 21, 4), 24, *range(44, 61, 4)]
    assert TIMES[idx4].tolist() == [*range(0, 21, 4), 21, *range(44, 61, 4)]
    # a 3 ms one: the stop's first tick (21) is on its grid, kept there; nothing more
    # in the stop (24 ... 39), then 42
    _, at3, _ = keep_spans(TIMES, 2.5, -np.inf, 3.0, 1.0)
    assert at3.tolist() == [*range(0, 22, 3), *range(42, 61, 3)]


def test_a_full_grid_keeps_what_keep_indices_keeps() -> None:
    from jsprof.session import keep_indices

    t = np.arange(0.0, 100.0, 1.0)
    for interval in (2.0, 2.5, 3.0, 10.0):
        threshold = interval - 0.5
        idx, at, _ = keep_spans(t, threshold, -np.inf, interval, 1.0)
        assert idx.tolist() == keep_indices(t, threshold, -np.inf).tolist()
        assert (at == t[idx]).all()


class FakeBackend:
    """The sampler backend the session layer drives, fed chunks by the test."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []

    def start(self, interval: float, capacity: int, cpu: bool = False) -> None:
        pass

    def cpu_now(self) -> float:
        return 0.0

    def set_interval(self, interval: float) -> None:
        pass

    def stop(self) -> None:
        pass

    def drain(self) -> Chunk:
        if self.chunks:
            return self.chunks.pop(0)
        return chunk(slice(0, 0))

    def sample_now(self) -> None:
        pass

    def notify_at(self, n: int) -> None:
        pass


def chunk(part: slice) -> Chunk:
    t = TIMES[part]
    return Chunk(
        funcs=[("a", "x.js", 1, 1, 0, False), ("b", "x.js", 2, 1, 0, False)],
        stack_parent=np.array([-1, -1], np.int32),
        stack_func=np.array([0, 1], np.int32),
        time=t,
        stack=STACKS[part],
        line=np.zeros(len(t), np.int32),
        flags=FLAGS[part],
        due=t,
        cap=t + np.where(FLAGS[part] & DEFERRED, 0.0, 0.1),
    )


def record(cut: int | None) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The 1 ms and 10 ms sessions' samples (times, frame names) of the ticks drained in
    one chunk, or in two cut before tick index `cut`."""
    backend = FakeBackend()
    sampler = SharedSampler(backend, min_interval=1.0, capacity=1000)
    sessions = {iv: ProfilerSession(sampler, iv, 10**6) for iv in (1, 10)}
    parts = [slice(None)] if cut is None else [slice(0, cut), slice(cut, None)]
    for part in parts:
        backend.chunks.append(chunk(part))
        sampler.refresh()
    out = {}
    for iv, s in sessions.items():
        tr = s.stop()
        names = np.array([tr.frames[tr.stack_frame[x]].name for x in tr.sample_stack])
        out[iv] = (tr.sample_time, names, sample_weights(tr, iv))
    return out


def test_a_slower_session_weighs_a_stop_where_the_thread_stood() -> None:
    for cut in (None, 22, 5):  # one chunk; the stop's first tick a chunk's last; elsewhere
        got = record(cut)
        t1, n1, w1 = got[1]
        assert t1.tolist() == TIMES.tolist()
        # the 1 ms session: b from 21 to 45 (the stop's 20 ms among them)
        assert w1[n1 == "b"].sum() == 24
        t10, n10, w10 = got[10]
        assert t10.tolist() == [0, 10, 20, 30, 50, 60], cut
        assert n10.tolist() == ["a", "a", "a", "b", "a", "a"], cut
        # b from 30 (its due time in the stop) to 50: the stop's 20 ms are b's, not a's
        assert w10[n10 == "b"].sum() == 20, cut


def test_the_sampler_slowed_down_after_a_stop_keeps_its_due_time() -> None:
    """The 1 ms session stops right after the stop's first tick: the sampler goes on at
    10 ms, every tick the 10 ms session's, and its due time 30 in the stop is still the
    stop's first tick, from the chunk before. The ticks taken where the thread resumed
    (41-44) came due on the 1 ms grid: one of them is the 10 ms session's (before, all
    four: samples 1 ms apart)."""
    backend = FakeBackend()
    sampler = SharedSampler(backend, min_interval=1.0, capacity=1000)
    fast = ProfilerSession(sampler, 1.0, 10**6)
    slow = ProfilerSession(sampler, 10.0, 10**6)
    backend.chunks.append(chunk(slice(0, 22)))  # drained when the 1 ms session stops
    fast.stop()
    assert sampler.interval == 10.0
    later = chunk(slice(0, 6))
    later.time = later.due = np.array([41.0, 42.0, 43.0, 44.0, 51.0, 61.0])
    later.cap = later.due + 0.1
    later.stack = np.array([B, B, B, B, A, A], np.int32)
    later.flags = np.zeros(6, np.uint32)
    backend.chunks.append(later)
    tr = slow.stop()
    names = [tr.frames[tr.stack_frame[x]].name for x in tr.sample_stack]
    assert tr.sample_time.tolist() == [0, 10, 20, 30, 41, 51, 61]
    assert names == ["a", "a", "a", "b", "b", "a", "a"]
