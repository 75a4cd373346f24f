"""The instrumenting method profiler: exact call counts, total and self time per
Class.method, on QuickJS (embedded) or Node (a subprocess with a preload).

Every class the program creates is registered as it is created: the source transform
(`transform.py`, tree-sitter) inserts a call right after each class declaration or
expression; the JavaScript runtime (`runtime.js`) then wraps the methods, accessors,
statics and constructor of the watched ones and keeps the books. See
docs/local-profiling.md, "Instrumenting profiler", for the mechanism and its limits.
"""

from __future__ import annotations

import functools
import os
import posixpath
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..engines.base import Instrumentation, read_script
from ..errors import UsageError
from ..trace import ProfilerFrame, ProfilerTrace, Recording, Spans, TraceBuilder, Track

_HERE = Path(__file__).resolve().parent


@dataclass
class MethodRow:
    """One Class.method (or one instance's, with by_instance). Times in ms.

    For async methods `total_ms`/`mean_ms`/`max_ms` run until the returned promise
    settles and `sync_ms` is the synchronous part; `self_ms` is always on-stack time
    minus watched callees.
    """

    cls: str
    method: str
    kind: str
    calls: int
    total_ms: float
    self_ms: float
    mean_ms: float
    max_ms: float
    instance: int | None = None
    sync_ms: float | None = None

    @property
    def name(self) -> str:
        base = f"{self.cls}.{self.method}"
        return base if self.instance is None else f"{self.cls}#{self.instance}.{self.method}"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "class": self.cls,
            "method": self.method,
            "kind": self.kind,
            "calls": self.calls,
            "total_ms": self.total_ms,
            "self_ms": self.self_ms,
            "mean_ms": self.mean_ms,
            "max_ms": self.max_ms,
        }
        if self.instance is not None:
            d["instance"] = self.instance
        if self.sync_ms is not None:
            d["sync_ms"] = self.sync_ms
        return d


@dataclass
class InstrumentResult:
    """Rows (every watched Class.method that ran, by self time) and the spans Recording."""

    rows: list[MethodRow]
    recording: Recording
    engine: str
    script: str
    exit: str = "ok"
    error: str | None = None
    signal: str | None = None  # what told jsprof to end (exit "interrupted")
    classes: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "script": self.script,
            "exit": self.exit,
            "error": self.error,
            **({"signal": self.signal} if self.signal else {}),
            "rows": [r.to_json() for r in self.rows],
        }


@functools.cache
def runtime_source() -> str:
    return (_HERE / "runtime.js").read_text(encoding="utf-8")


def _config(watch: Sequence[str], by_instance: bool, spans: bool) -> dict[str, Any]:
    return {"watch": list(watch), "byInstance": by_instance, "spans": spans}


def parse_watch(spec: str) -> list[str]:
    """`Shape,Store` -> ["Shape", "Store"]; `*` watches every class."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise UsageError("--watch needs class names (Shape,Store) or '*' for every class")
    return names


def run_instrumented(
    path: str | os.PathLike[str],
    watch: Sequence[str],
    engine: str = "quickjs",
    args: Sequence[str] = (),
    by_instance: bool = False,
    spans: bool = True,
) -> InstrumentResult:
    """Run the script with the named classes watched and return the rows and spans.

    A script that throws still yields its rows: the JSError is re-raised carrying
    `.result`. Node's own exit status other than 0 raises JSError the same way.
    """
    from ..engines.registry import engine_spec
    from .transform import transform

    run = engine_spec(engine).instrumenter()  # a refusal before the script is read
    p = os.fspath(path)
    source = read_script(p)
    how = Instrumentation(
        config=_config(watch, by_instance, spans),
        runtime=runtime_source(),
        transform=transform,
        module_deps=_module_deps,
        preload=(_HERE / "node_preload.mjs").as_uri(),
    )
    dump, error, origin = run(p, source, args, how)
    result = _result(dump, engine, p, origin)
    if error is not None:
        meta = result.recording.tracks[0].meta
        if isinstance(error, KeyboardInterrupt):
            result.exit = "interrupted"
            signum = getattr(error, "signum", signal.SIGINT)
            result.signal = meta["signal"] = signal.Signals(signum).name
        else:
            result.exit = "error"
            result.error = f"{getattr(error, 'name', 'Error')}: {error}"
        meta["exit"] = result.exit
        error.result = result  # type: ignore[attr-defined]
        raise error
    return result


# ---- module graph (for QuickJS, whose loader reads imports past the transform) -------


def _static_imports(source: str) -> list[str]:
    """Specifiers of a module's static `import ... from 'x'` / `export ... from 'x'`."""
    from .transform import _parser

    tree = _parser().parse(source.encode("utf-8"))
    out = []
    for node in tree.root_node.children:
        if node.type in ("import_statement", "export_statement"):
            src = node.child_by_field_name("source")
            if src is not None and src.type == "string":
                out.append(src.text.decode("utf-8")[1:-1])
    return out


def _module_deps(entry: str, source: str) -> list[tuple[str, str]]:
    """(name as QuickJS normalizes it, source) of the entry's file dependencies, in
    evaluation order (depth-first post-order, as the module graph evaluates)."""
    from ..engines.base import is_module

    if not is_module(source, entry):
        return []
    order: list[tuple[str, str]] = []
    seen = {entry}

    def visit(name: str, src: str) -> None:
        for spec in _static_imports(src):
            if not spec.startswith(("./", "../", "/")):
                continue  # bare names are not files QuickJS loads by path
            dep = spec if spec.startswith("/") else posixpath.normpath(
                posixpath.join(posixpath.dirname(name), spec)
            )
            if dep in seen:
                continue
            seen.add(dep)
            try:
                with open(dep, encoding="utf-8") as f:
                    dsrc = f.read()
            except OSError:
                continue  # QuickJS reports the missing module itself
            visit(dep, dsrc)
            order.append((dep, dsrc))

    visit(entry, source)
    return order


# ---- results -------------------------------------------------------------------------------


def spans_as_samples(frames: Sequence[ProfilerFrame], spans: Spans) -> ProfilerTrace:
    """The spans as a sampled trace that `report` and `flame` read: one sample per span,
    at its start, on the stack of its enclosing spans, weighing the span's self time (its
    duration minus its children's), so self and total per method come out exact."""
    b = TraceBuilder()
    ids = [b.frame_id(f.name, None, f.line, f.column) for f in frames]
    n = len(spans)
    dur = np.maximum(spans.end - spans.start, 0.0)
    child = np.zeros(n)
    has = spans.parent >= 0
    np.add.at(child, spans.parent[has], dur[has])
    stack = np.empty(n, np.int32)
    parents = spans.parent.tolist()
    for i, f in enumerate(spans.frame.tolist()):
        p = parents[i]
        stack[i] = b.stack_id_from(int(stack[p]) if p >= 0 else None, ids[f])
    # the builder holds no samples: the spans are the samples
    return b.build().replace(
        sample_time=spans.start, sample_stack=stack, sample_weight=np.maximum(dur - child, 0.0)
    )



def _result(
    dump: dict[str, Any], engine: str, script: str, origin: float | None
) -> InstrumentResult:
    all_rows = [
        MethodRow(
            cls=r["class"],
            method=r["method"],
            kind=r["kind"],
            calls=int(r["calls"]),
            total_ms=float(r["total_ms"]),
            self_ms=float(r["self_ms"]),
            mean_ms=float(r["mean_ms"]),
            max_ms=float(r["max_ms"]),
            instance=r.get("instance"),
            sync_ms=r.get("sync_ms"),
        )
        for r in dump["rows"]
    ]
    frames = [ProfilerFrame(r.name) for r in all_rows]
    s = dump["spans"]
    spans = Spans(
        np.asarray(s["start"], np.float64),
        np.asarray(s["end"], np.float64),
        np.asarray(s["frame"], np.int32),
        np.asarray(s["parent"], np.int32),
    )
    track = Track(
        name="main",
        trace=spans_as_samples(frames, spans),
        time_origin=float(dump.get("timeOrigin") or origin or 0.0) or None,  # 0: unknown
        engine=engine,
        spans=spans,
        meta={
            "instrumented": True,
            "script": script,
            "exit": "ok",
            "spansDropped": int(dump.get("spansDropped", 0)),
            # calls still running when the run was cut short, ended at the dump
            "openCalls": int(dump.get("openCalls", 0)),
        },
    )
    rows = [r for r in all_rows if r.calls > 0]
    rows.sort(key=lambda r: -r.self_ms)
    return InstrumentResult(
        rows=rows,
        recording=Recording([track]),
        engine=engine,
        script=script,
        classes=list(dump.get("classes", [])),
    )
