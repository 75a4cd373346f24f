"""Every engine in one place: one `EngineSpec` per engine says which of `record`'s options it
takes, how it checks a target, and where its record, run, attach and early start live.
Adding an engine touches its own module or package and one entry of `SPECS`.

Each entry point is named "module:function" and imported on first use, so `jsprof --help`
imports no engine and `record --engine node` starts Node before numpy (docs/design.md,
"Start-up is a feature"). Stdlib only; nothing of jsprof above engines/ (arrows point down).

The entry points' shapes (keyword arguments: only the options the spec lists are passed):
  check(path, engine) -> path           a UsageError when the engine cannot take it
  record(path, *, sample_interval, args, duration, progress, ...) -> (Recording, error)
                                        the script's error (JSError, KeyboardInterrupt,
                                        EngineError) is returned with the samples, not raised
  run(path, args, *, allow_profiling, ...) -> exit code or None (the caller passes only
                                        options the engine takes: node_args, until, ...)
  attach(where, *, duration, sample_interval, ...) -> Recording
                                        what already runs, named by the spec's
                                        `attach_flag` (--pid, --cdp); `attach_options` more
  notes(rec, interrupted_status) -> (lines, exit status)
                                        the engine's own ending of `record` (a page's
                                        errors and crashes), printed after the summary
  stem(target) -> str                   the default output's stem (else `app.<engine>`)
  start(path, args, node_args) -> a booting process (`record(started=...)`) or None
  command(argv, *, sample_interval, duration, progress) -> (Recording, error)
                                        `record -- COMMAND ARGS`: every process of the
                                        engine the command starts (node: a track each)
  check_command(word) -> executable     the command found (PATH), or a UsageError
  instrument(path, source, args, how: base.Instrumentation) -> (dump, error, time origin)
                                        `jsprof instrument`: the script with instrument/'s
                                        transform and runtime; engines without it refuse
"""

from __future__ import annotations

import importlib

from ..errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (before Node starts)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any


class EngineSpec:
    """One engine as record/run/the CLI see it. `options`: the record options it takes
    beyond the common ones (sample_interval, duration, progress; "args": it passes
    arguments to what it runs). `attach_flag`: the CLI's option naming what it attaches to
    (`--pid PID`), `attach_options` what its attach takes beyond duration and interval."""

    __slots__ = (
        "name", "runs", "label", "options", "why_no_buffer_limit", "attach_flag",
        "attach_options", "attach_stem", "_parts",
    )

    def __init__(
        self,
        name: str,
        runs: str,
        options: tuple[str, ...],
        why_no_buffer_limit: str = "",
        *,
        label: str = "",
        attach_flag: str = "",
        attach_options: tuple[str, ...] = (),
        attach_stem: str = "",
        **parts: str,
    ) -> None:
        self.name = name
        self.runs = runs  # what it runs, for messages: "scripts" or "pages"
        self.label = label or name  # the engine's name in sentences
        self.options = frozenset(options)
        # Set when the engine keeps every sample (no --max-buffer-size): the reason said.
        self.why_no_buffer_limit = why_no_buffer_limit
        self.attach_flag = attach_flag  # "--pid PID": the option and its metavar
        self.attach_options = frozenset(attach_options)
        self.attach_stem = attach_stem  # the attached recording's default output stem
        self._parts = parts

    @property
    def attach_option(self) -> str:
        """`--pid`: the attach flag without its metavar ("" when it cannot attach)."""
        return self.attach_flag.split()[0] if self.attach_flag else ""

    def default_stem(self, target: str) -> str:
        """The default output's stem for recording `target`: `app.<engine>`, unless the
        engine names its own (a page's URL)."""
        fn = self.part("stem")
        if fn is not None:
            return fn(target)
        import os

        return f"{os.path.splitext(os.path.basename(target))[0]}.{self.name}"

    def check_args(self, target: str, args: Sequence[str]) -> None:
        """The one refusal of arguments for an engine that passes none (a page)."""
        if args and not self.takes("args"):
            raise UsageError(
                f"{target}: a {self.runs[:-1]} takes no arguments ({' '.join(args)!r})"
            )

    def check_workers(self, workers: int | None) -> None:
        """The one refusal of --workers for an engine without them."""
        if workers is not None and not self.takes("workers"):
            who = next(s for s in SPECS.values() if s.takes("workers"))
            raise UsageError(f"--workers runs {who.label} runtimes; use --engine {who.name}")

    def check_page_options(self, given: Sequence[str], attaching: bool) -> None:
        """--until, --target, --allow-remote (`given`: those given, by option name): each
        only where this engine, recording or attaching, takes it."""
        fits = self.attach_options if attaching else self.options
        if all(o in fits for o in given):
            return
        if self.takes("until"):  # the page engine: they go with its other way in
            if attaching:
                raise UsageError(
                    f"--until goes with a target that jsprof opens, not {self.attach_option}"
                )
            raise UsageError(f"--target and --allow-remote go with {self.attach_flag}")
        who = next(s for s in SPECS.values() if s.takes("until"))
        raise UsageError(
            "--until, --target and --allow-remote go with "
            f"--engine {who.name}/{who.attach_option}"
        )

    def part(self, name: str) -> Callable[..., Any] | None:
        where = self._parts.get(name)
        if where is None:
            return None
        module, attr = where.split(":")
        return getattr(importlib.import_module(module), attr)

    def takes(self, option: str) -> bool:
        return option in self.options

    def check_max_buffer_size(self, max_buffer_size: int | None) -> None:
        """The one refusal of --max-buffer-size for an engine that keeps every sample."""
        if max_buffer_size is not None and self.why_no_buffer_limit:
            raise UsageError(
                f"--max-buffer-size is not supported with --engine {self.name} "
                f"({self.why_no_buffer_limit})"
            )

    def check_clock(self, clock: str) -> None:
        """The one refusal of a clock other than wall for an engine without it."""
        if clock != "wall" and not self.takes("clock"):
            raise UsageError(
                f"--clock {clock} is not supported with --engine {self.name}: V8's sampling "
                "profiler samples wall-clock time only; use --engine quickjs for CPU time"
            )

    def check(self, path: str) -> str:
        fn = self.part("check")
        assert fn is not None
        return fn(path, self.name)

    def start(self, path: str, args: Sequence[str], node_args: Sequence[str]) -> Any:
        fn = self.part("start")
        return None if fn is None else fn(path, args, node_args=node_args)

    def record(self, path: str, **options: Any) -> Any:
        fn = self.part("record")
        assert fn is not None
        self.check_args(path, options.get("args") or ())
        return fn(path, **{k: v for k, v in options.items() if k in COMMON or k in self.options})

    def attach(self, where: Any, **options: Any) -> Any:
        """Profile what already runs (a Node pid, a browser's CDP endpoint): a Recording."""
        fn = self.part("attach")
        if fn is None:
            raise UsageError(f"--engine {self.name} cannot attach to a running program")
        return fn(where, **options)

    def instrumenter(self) -> Callable[..., Any]:
        """The engine's `jsprof instrument` entry point (path, source, args, how) -> (dump,
        error, time origin), or a UsageError naming the engines that have one."""
        fn = self.part("instrument")
        if fn is None:
            raise UsageError(
                f"--engine {self.name} cannot instrument methods; "
                f"choose one of: {', '.join(INSTRUMENT_NAMES)}"
            )
        return fn

    def check_command(self, word: str) -> str:
        """The command's executable (`record -- COMMAND`), or a UsageError: not found, or
        an engine that runs only what it is given."""
        fn = self.part("check_command")
        if fn is None:
            raise UsageError(
                f"{word}: a command after -- is recorded with --engine node (every Node "
                f"process it starts); --engine {self.name} records a {self.runs[:-1]} given "
                "without --"
            )
        return fn(word)

    def record_command(self, argv: Sequence[str], **options: Any) -> Any:
        """`record -- COMMAND ARGS`: (Recording, error)."""
        fn = self.part("command")
        if fn is None:
            self.check_command(argv[0] if argv else "")
        assert fn is not None
        return fn(argv, **options)

    def run(self, path: str, args: Sequence[str], **options: Any) -> int | None:
        fn = self.part("run")
        assert fn is not None
        return fn(path, args, **options)


# What every engine's record takes ("args" only where it lists them: check_args).
COMMON = frozenset({"sample_interval", "duration", "progress"})

SPECS: dict[str, EngineSpec] = {
    spec.name: spec
    for spec in (
        EngineSpec(
            "quickjs",
            "scripts",
            ("args", "max_buffer_size", "workers", "clock"),
            label="QuickJS",
            check="jsprof.engines.registry:check_script_file",
            record="jsprof.engines.quickjs:record_script",
            run="jsprof.engines.quickjs:run_script",
            instrument="jsprof.engines.quickjs:run_instrumented",
        ),
        EngineSpec(
            "node",
            "scripts",
            ("args", "node_args", "started", "gate", "light"),
            "V8 keeps all",
            label="Node",
            attach_flag="--pid PID",
            attach_stem="node-{where}",
            check="jsprof.engines.registry:check_script_file",
            record="jsprof.engines.node.record:record_script",
            run="jsprof.engines.node.preload:run_node",
            attach="jsprof.engines.node.attach:attach_node",
            start="jsprof.engines.node.record:start_node",
            command="jsprof.engines.node.command:record_command",
            check_command="jsprof.engines.node.command:find_command",
            instrument="jsprof.engines.node.instrument:run_instrumented",
        ),
        EngineSpec(
            "chromium",
            "pages",
            ("until",),
            "V8 keeps all",
            label="Chromium",
            attach_flag="--cdp ENDPOINT",
            attach_options=("target", "allow_remote"),
            attach_stem="cdp.chromium",
            check="jsprof.engines.chromium.record:check_target",
            notes="jsprof.engines.chromium.cli:notes",
            stem="jsprof.engines.chromium.cli:default_stem",
            record="jsprof.engines.chromium.record:record_target",
            run="jsprof.engines.chromium.run:run_script",
            attach="jsprof.engines.chromium.attach:attach_cdp",
        ),
    )
}
NAMES = tuple(SPECS)
# The engines `jsprof instrument` runs on: those with an instrument entry point.
INSTRUMENT_NAMES = tuple(n for n, s in SPECS.items() if "instrument" in s._parts)


def engine_spec(name: str) -> EngineSpec:
    """The spec of engine `name`, or a UsageError listing the engines."""
    spec = SPECS.get(name)
    if spec is None:
        raise UsageError(f"unknown engine {name!r}; choose one of: {', '.join(NAMES)}")
    return spec


SCRIPT_EXTENSIONS = (".js", ".mjs", ".cjs")
_TRACE_EXTENSIONS = (".json", ".cpuprofile", ".pftrace", ".gz", ".pprof", ".folded")


def check_script_file(p: str, engine: str) -> str:
    """`p` if it is a script file a script engine can run, else a UsageError saying why."""
    import os

    low = p.lower()
    if "://" in p or low.endswith((".html", ".htm")):
        raise UsageError(f"{p}: pages and URLs are for a browser engine; {engine} runs scripts")
    if os.path.isdir(p):
        raise UsageError(f"{p}: is a directory; give the path of a .js or .mjs script")
    if not os.path.exists(p):
        raise UsageError(f"{p}: no such file; give the path of a .js or .mjs script")
    if not os.path.isfile(p):
        raise UsageError(f"{p}: not a regular file; give the path of a .js or .mjs script")
    if not os.access(p, os.R_OK):
        # Node would start, fail to read it with its own stack trace, and exit 1.
        raise UsageError(f"{p}: permission denied; give a script you can read")
    ext = os.path.splitext(low)[1]
    if ext and ext not in SCRIPT_EXTENSIONS:
        hint = (
            "; it looks like a trace: see it with `jsprof report`"
            if (ext in _TRACE_EXTENSIONS)
            else ""
        )
        raise UsageError(f"{p}: not a JavaScript file ({engine} runs .js, .mjs or .cjs){hint}")
    return p
