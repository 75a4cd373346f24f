"""Track.meta is a typed contract (jsprof/meta.py's TrackMeta, the table in docs/formats.md):
one spelling per key, written and read by that name everywhere."""

import ast
from pathlib import Path

import orjson

import jsprof
from jsprof.meta import KEYS, TrackMeta, normalise
from jsprof.record import exit_status

SRC = Path(jsprof.__file__).parent
# The field wing's `meta` (serve, fleet, store, and upload.py, which builds an upload's
# envelope for the collector) is an upload's meta, another dict.
TRACK_SIDE = [
    p for p in sorted(SRC.rglob("*.py"))
    if p.relative_to(SRC).parts[0] not in ("serve", "fleet", "store", "upload.py")
]


def _is_meta(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "meta") or (
        isinstance(node, ast.Attribute) and node.attr == "meta"
    )


def _str_keys(d: ast.AST) -> list[str]:
    if isinstance(d, ast.Dict):
        return [k.value for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def meta_keys_used() -> dict[str, list[str]]:
    """Every literal key a track-side module writes to or reads from a `meta` dict."""
    used: dict[str, list[str]] = {}
    for path in TRACK_SIDE:
        where = str(path.relative_to(SRC))
        for node in ast.walk(ast.parse(path.read_text())):
            keys: list[str] = []
            if isinstance(node, ast.Subscript) and _is_meta(node.value):
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    keys.append(node.slice.value)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if _is_meta(node.func.value):
                    if node.func.attr in ("get", "setdefault", "pop") and node.args:
                        a = node.args[0]
                        if isinstance(a, ast.Constant) and isinstance(a.value, str):
                            keys.append(a.value)
                    elif node.func.attr == "update":
                        keys += [k.arg for k in node.keywords if k.arg]
                        keys += [k for a in node.args for k in _str_keys(a)]
            if isinstance(node, ast.Call):
                keys += [k for kw in node.keywords if kw.arg == "meta"
                         for k in _str_keys(kw.value)]
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_is_meta(t) for t in targets):
                    keys += _str_keys(node.value)
            for k in keys:
                used.setdefault(k, []).append(f"{where}:{node.lineno}")
    return used


def test_every_meta_key_in_the_code_is_a_documented_track_meta_key():
    used = meta_keys_used()
    assert {"exit", "exitCode", "signal", "captureLatencyMs", "script"} <= set(used)
    assert {k: v for k, v in used.items() if k not in KEYS} == {}
    doc = (SRC.parents[1] / "docs" / "formats.md").read_text()
    assert [k for k in sorted(KEYS) if f"`{k}`" not in doc] == []


def test_old_snake_case_keys_read_as_one_spelling(tmp_path):
    """A file an older jsprof wrote (`exit_code`, `buffer_full`) reads as camelCase, and
    the exit rule finds the status there."""
    b = jsprof.TraceBuilder()
    b.add_sample(0.0, b.stack_id([b.frame_id("f", b.resource_id("file:///a.js"), 1, 1)]))
    rec = jsprof.Recording.of(b.build(), sample_interval=1.0)
    path = tmp_path / "old.jsprof.json"
    jsprof.save(rec, path)
    doc = orjson.loads(path.read_bytes())
    old: dict = {"exit": "error", "exit_code": 3, "buffer_full": True, "my_key": 1}
    ext = doc["jsprof"]
    (ext["tracks"][0] if "tracks" in ext else ext)["meta"] = old
    path.write_bytes(orjson.dumps(doc))
    got = jsprof.load(path)
    want: TrackMeta = {"exit": "error", "exitCode": 3, "bufferFull": True}
    assert got.tracks[0].meta == {**want, "my_key": 1}
    assert exit_status(got) == 3
    assert normalise({"exitCode": 4, "exit_code": 3}) == {"exitCode": 4}
