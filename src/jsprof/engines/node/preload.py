"""`run_node`: run a script under Node with the spec's `Profiler` global, preloaded from
js/node_profiler.js (package data)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from importlib import resources as _res

from ...errors import EngineError
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
    """
    path = script_path(script)
    exe = find_node(node)
    env = dict(os.environ)
    env.pop("JSPROF_NO_PROFILING", None)
    if not allow_profiling:
        env["JSPROF_NO_PROFILING"] = "1"
    cmd = [exe, "--require", preload_path(), *node_args, path, *args]
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        raise EngineError(f"cannot start {exe}: {e}") from None
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # Node got the same SIGINT; give it a moment to end, then make sure it did.
        try:
            proc.wait(5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
