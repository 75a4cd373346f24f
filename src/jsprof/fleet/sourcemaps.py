"""Per-release source maps, kept in the store and applied to a release's unique frames.

`<store>/sourcemaps/rkey=K/<script>.map`, K the release key of (app, release). At query
time `analysis.sourcemap` maps the release's frame table (and re-interns its stack
table): never per sample, so the cost grows with unique frames, not with traffic.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urljoin

import numpy as np

from .. import script_lines, sourcemap_files
from ..analysis import sourcemap
from ..analysis.profile import FunctionKey
from ..errors import UsageError
from ..io import atomic_write
from ..store.tables.view import release_key
from ..trace import ProfilerTrace

DIR = script_lines.MAPS_DIR
MAX_FILES = 10_000


def release_dir(store_path: str | os.PathLike, rkey: str) -> Path:
    return Path(store_path) / DIR / f"rkey={rkey}"


def _map_files(items: list[str]) -> list[Path]:
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.map") if q.is_file())
        elif p.is_file():
            out.append(p)
        else:
            raise UsageError(f"{item}: no such file or directory (give .map files or a folder)")
    if not out:
        raise UsageError(f"{' '.join(items)}: no .map files found")
    if len(out) > MAX_FILES:
        raise UsageError(f"{len(out)} source maps: more than {MAX_FILES}; upload fewer at once")
    return out


def stored_name(path: Path, sm: sourcemap.SourceMap) -> str:
    """The name a map is kept under: `<script basename>.map`, as find_maps looks it up."""
    if sm.file:
        base = os.path.basename(sm.file.split("?", 1)[0].split("#", 1)[0])
        if base:
            return f"{base}.map"
    return path.name if path.name.endswith(".map") else f"{path.name}.map"


def validate(data: bytes, where: str) -> sourcemap.SourceMap:
    import orjson

    if len(data) > sourcemap.MAX_MAP_BYTES:
        raise UsageError(f"{where}: larger than the {sourcemap.MAX_MAP_BYTES} byte limit")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise UsageError(f"{where}: not JSON ({e})") from None
    try:
        return sourcemap.SourceMap(doc, where)
    except sourcemap.SourceMapError as e:
        raise UsageError(str(e)) from None


def store_map(store_path: str | os.PathLike, app: str, release: str, data: bytes,
              name_hint: str) -> str:
    """Validate one map and keep it for (app, release); returns the stored name."""
    import orjson

    sm = validate(data, name_hint)
    name = stored_name(Path(name_hint), sm)
    d = release_dir(store_path, release_key(app, release))
    d.mkdir(parents=True, exist_ok=True)
    atomic_write(d / name, data)
    # The script's line index (`with_line_starts`), kept apart so the compactor reads it
    # without the map; a map without one removes an earlier build's.
    doc = orjson.loads(data)
    script_lines.write(d, name, script_lines.check(doc.get(script_lines.KEY))
                       if type(doc) is dict else None)
    return name


def with_line_starts(path: Path, data: bytes, notes: list[str] | None = None,
                     limit: int = sourcemap.MAX_MAP_BYTES) -> bytes:
    """The map at `path` with the line starts of its script (`script_lines`), read
    beside it: its `file`, else the map's name without `.map`. A long animation frame's
    script entry gives a character offset into the script; with them the fleet maps it as
    it maps a sampled frame. `notes` gets a line when the script is not there (its
    entry points keep the minified script's names). Left as it is when it is no map or
    would outgrow `limit` bytes."""
    import orjson

    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data
    if type(doc) is not dict:
        return data
    base = (script_lines.script_base(doc["file"]) if type(doc.get("file")) is str else "")
    script = path.parent / (base or (path.name[:-4] if path.name.endswith(".map") else ""))
    if not script.is_file():  # (no name at all: the folder, not a file)
        if notes is not None:
            notes.append(
                f"{path}: its script ({script.name or '?'}) is not beside it: long animation "
                "frames' entry points in it keep their minified names (upload the map "
                "from the build's output folder)")
        return data
    try:
        text = script.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return data
    doc[script_lines.KEY] = script_lines.line_starts(text)
    out = orjson.dumps(doc)
    return out if len(out) <= limit else data


def with_sources(path: Path, data: bytes, notes: list[str] | None = None,
                 limit: int = sourcemap.MAX_MAP_BYTES) -> bytes:
    """The map at `path` with the original sources it does not carry (`sourcesContent`)
    read from beside it, as `jsprof report --sourcemap` reads them: the fleet keeps no
    other copy of the sources, and without their text a function is named from the
    minified code and the map's `names` alone (terser leaves `sourcesContent` out by
    default: a function it inlined is then `(anonymous app.js:9)` where V8 names the
    original `countIdentifiers`). `notes` gets a line per map some of whose sources are
    in neither place. A map that is not one, or would outgrow `limit` bytes, is left as
    it is (`store_map` judges it)."""
    import orjson

    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data
    if type(doc) is not dict or type(doc.get("sources")) is not list:
        return data
    srcs = doc["sources"]
    root = doc.get("sourceRoot") if type(doc.get("sourceRoot")) is str else ""
    content = doc.get("sourcesContent")
    have = list(content) if type(content) is list else []
    have += [None] * (len(srcs) - len(have))
    if all(type(c) is str for c in have[:len(srcs)]):
        return data
    filled = missing = 0
    for i, src in enumerate(srcs):
        if type(have[i]) is str or type(src) is not str or not src:
            continue
        full = root + src
        if re.match(r"^[a-z][a-z0-9+.-]*:", full) and not full.startswith("file:"):
            missing += 1  # a URL: not a file of this machine
            continue
        text = sourcemap_files.read_source(
            full if full.startswith("file:") else str(path.parent / full))
        if text is None:
            missing += 1
            continue
        have[i] = text
        filled += 1
    if missing and notes is not None:
        notes.append(
            f"{path}: {missing} of {len(srcs)} original sources are neither in its "
            "sourcesContent nor beside it: their functions are named from the minified "
            "code and the map's names (build the map with its sources, e.g. terser "
            "--source-map includeSources)")
    if not filled:
        return data
    doc["sourcesContent"] = have[:len(srcs)]
    out = orjson.dumps(doc)
    return out if len(out) <= limit else data


def upload(store_path: str | os.PathLike, app: str, release: str, items: list[str],
           notes: list[str] | None = None) -> list[str]:
    names = []
    for p in _map_files(items):
        data = with_line_starts(p, with_sources(p, p.read_bytes(), notes), notes)
        names.append(store_map(store_path, app, release, data, str(p)))
    return names


def maps_for(store_path: str | os.PathLike, rkey: str, resources: list[str]
             ) -> dict[str, sourcemap.SourceMap]:
    d = release_dir(store_path, rkey)
    if not d.is_dir():
        return {}
    maps = sourcemap_files.find_maps(resources, str(d))
    for resource, sm in maps.items():
        # A map kept in the store stands for one beside the script: its relative sources
        # are relative to the script's URL, not to the store's folder.
        sm.base_dir = None
        sm.sources = [
            s if not s or re.match(r"^[a-z][a-z0-9+.-]*:", s) else urljoin(resource, s)
            for s in sm.sources
        ]
    return maps


def mismatch_hint(app: str, release: str) -> str:
    """What a note on an uploaded map that does not match its script says to do."""
    return (f"upload the .map built with this script for {app} {release} "
            "(jsprof fleet sourcemaps upload)")


def frame_functions(trace: ProfilerTrace, maps: dict[str, sourcemap.SourceMap],
                    notes: list[str] | None = None, hint: str = sourcemap.MISMATCH_HINT
                    ) -> list[FunctionKey]:
    """Per frame, its function after source maps (itself where no map applies); `notes`
    gets a line per map that does not match its script (not applied), as `jsprof report`
    says it."""
    res = trace.resources
    keys = [
        FunctionKey(f.name, None if f.resource_id is None else res[f.resource_id], f.line,
                    f.column)
        for f in trace.frames
    ]
    if not maps or not keys:
        return keys
    # One root stack and one sample per frame: the library maps them exactly as it maps
    # a recording, and each sample's new stack names its frame's new function.
    n = len(trace.frames)
    probe = ProfilerTrace(
        trace.resources, trace.frames, np.full(n, -1), np.arange(n), np.arange(n, dtype=float),
        np.arange(n),
    )
    out = sourcemap.apply_to_trace(probe, maps, notes, hint)
    new_frame = out.stack_frame[out.sample_stack]
    ores = out.resources
    return [
        FunctionKey(f.name, None if f.resource_id is None else ores[f.resource_id], f.line,
                    f.column)
        for f in (out.frames[i] for i in new_frame.tolist())
    ]


def apply(trace: ProfilerTrace, maps: dict[str, sourcemap.SourceMap]
          ) -> tuple[ProfilerTrace, np.ndarray]:
    """The release's tables mapped; and per stored stack id, its stack in the new tables."""
    n = trace.num_stacks
    probe = ProfilerTrace(
        trace.resources, trace.frames, trace.stack_parent, trace.stack_frame,
        np.arange(n, dtype=float), np.arange(n),
    )
    out = sourcemap.apply_to_trace(probe, maps)
    stack_map = np.concatenate([out.sample_stack.astype(np.int64), [-1]])
    return ProfilerTrace(out.resources, out.frames, out.stack_parent, out.stack_frame), stack_map
