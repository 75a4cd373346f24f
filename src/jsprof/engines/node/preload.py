"""`run_node`: run a script under Node with the spec's `Profiler` global, preloaded from
js/node_profiler.js (package data). Also what Node's preloads say of a main script that
did not compile (`not_compiled`), for run, record and instrument alike."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from importlib import resources as _res
from typing import Any

from ...errors import EngineError, JSError
from .process import find_node, script_path


def preload_path() -> str:
    """The Profiler-global preload shipped as package data."""
    return str(_res.files("jsprof").joinpath("js", "node_profiler.js"))


def run_node(
    script: str | os.PathLike[str],
    args: Sequence[str] = (),
    node: str | None = None,
    node_args: Sequence[str] = (),
    allow_profiling: bool = True,
) -> int:
    """Run `script` under Node with the spec's `Profiler` global; returns Node's exit code.

    The global comes from a preload (`--require`), so it exists in worker threads too.
    With `allow_profiling=False` its constructor throws a `NotAllowedError`. Stdio is
    the caller's; Ctrl-C reaches Node (same process group) and we wait for it to end.
    Raises JSError with `compile` set when the script does not compile (the preload ends
    Node before it prints its own report of it).
    """
    path = script_path(script)
    exe = find_node(node)
    env = dict(os.environ)
    env.pop("JSPROF_NO_PROFILING", None)
    if not allow_profiling:
        env["JSPROF_NO_PROFILING"] = "1"
    cmd = [exe, "--require", preload_path(), *node_args, path, *args]
    with tempfile.TemporaryDirectory(prefix="jsprof-run-") as tmp:
        # Where the preload says the script did not compile (a file: nothing to block on
        # if a child the script started keeps Node's descriptors open).
        env["JSPROF_NOT_PARSED"] = told = os.path.join(tmp, "not-parsed.json")
        try:
            proc = subprocess.Popen(cmd, env=env)
        except OSError as e:
            raise EngineError(f"cannot start {exe}: {e}") from None
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            # Node got the same SIGINT; give it a moment to end, then make sure it did.
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
        error = not_compiled(told, os.fspath(script))
    if error is not None:
        raise error
    return code


def not_compiled(told: str, script: str) -> JSError | None:
    """The JSError for a main script that did not compile, from the file a preload wrote
    (js/node_not_compiled.js: {name, message, compile: {file, line, column}}); None if it
    wrote none (the script compiled) or something unreadable."""
    try:
        with open(told, encoding="utf-8") as f:
            info: Any = json.load(f)
        at = info["compile"]
        where = f"{at['file']}:{int(at['line'])}:{int(at['column'])}"
        error = JSError(str(info["message"]), "", str(info["name"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    error.compile = True
    error.where = as_given(where, script)
    return error


def as_given(where: str, script: str) -> str:
    """`file:line:column` with the script's path as the user gave it (Node says it
    absolute)."""
    file, line, column = where.rsplit(":", 2)
    with contextlib.suppress(OSError):
        if os.path.samefile(file, script):
            file = script
    return f"{file}:{line}:{column}"
