"""The stdlib-json paths that keep orjson's import off a short recording (issue 32) give
what orjson gives: the jsprof writer's small values byte for byte, the CDP client's
messages parsed alike on both sides of its size switch."""

from __future__ import annotations

import json
import math
import random
import struct

import orjson
import pytest

from jsprof.engines import cdp
from jsprof.formats._jsprof_write import dumps_json


def _orjson(v: object) -> bytes | type:
    try:
        return orjson.dumps(v, option=orjson.OPT_SERIALIZE_NUMPY)
    except Exception as e:  # noqa: BLE001 - the kind of error is compared
        return type(e)


def _ours(v: object) -> bytes | type:
    try:
        return dumps_json(v)
    except Exception as e:  # noqa: BLE001
        return type(e)


EDGES = [
    0.0, -0.0, 1e-4, -1e-4, 9.999e-5, 1e-5, 1e15, 9.99e15, 1e16, -1e16, 1e300, 5e-324,
    math.nan, math.inf, -math.inf, 0.1 + 0.2, 1733443200000.125, 2.5,
    2**63 - 1, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, True, False, None,
    "", "a\x00\x1f\x7f\u2028\u2029\"\\/\té😀\U0010ffff", "\udc80", "x\ud800y",
    [], {}, (1, 2.5), {"a": [1, {"b": None}]}, {1: "int key"}, [1, "\udfff"],
]


@pytest.mark.parametrize("v", EDGES, ids=repr)
def test_edges_are_written_as_orjson_writes_them(v):
    assert _ours(v) == _orjson(v)


def _drawn(rng: random.Random, depth: int = 0) -> object:
    k = rng.random()
    if depth > 3 or k < 0.5:
        return rng.choice([
            lambda: struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0],
            lambda: rng.uniform(-1, 1) * 10 ** rng.uniform(-6, 17),
            lambda: rng.randint(-(2**70), 2**70),
            lambda: "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(4)),
            lambda: rng.choice([True, False, None]),
        ])()
    if k < 0.75:
        return [_drawn(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {str(i): _drawn(rng, depth + 1) for i in range(rng.randint(0, 4))}


def test_drawn_values_are_written_as_orjson_writes_them():
    rng = random.Random(32)
    for _ in range(20_000):
        v = _drawn(rng)
        assert _ours(v) == _orjson(v), repr(v)


def test_numpy_and_big_values_go_to_orjson():
    np = pytest.importorskip("numpy")
    assert dumps_json({"l": np.arange(3)}) == b'{"l":[0,1,2]}'
    big = [{"name": f"f{i}", "line": i} for i in range(20_000)]
    assert dumps_json(big) == orjson.dumps(big)


@pytest.mark.parametrize("size", [10, cdp._BIG + 10])
def test_cdp_messages_parse_alike_on_both_sides_of_the_switch(size):
    msg = {"id": 7, "result": {"s": "é" * size, "n": [1, 2.5, None, True]}}
    raw = orjson.dumps(msg)
    assert cdp._loads(raw) == msg
    assert cdp._loads(raw.decode()) == msg
    assert json.loads(cdp._dumps(msg)) == msg
