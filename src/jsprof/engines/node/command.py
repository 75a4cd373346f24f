"""`record_command`: run a command (`npm test`, `npx tsc -p .`, a shell script) and profile
every Node process it starts, each as its own tracks, in one Recording.

How: the command runs with NODE_OPTIONS += `--require js/node_command_hook.js` (kept
through npm, spawn/exec/fork and nesting, as NODE_OPTIONS is), in its own process group,
its stderr through jsprof (the inspector's own lines are dropped). Each Node process's hook
opens its inspector on 127.0.0.1 port 0 and writes its URL into a private directory
(mode 0700, named by $JSPROF_NODE_COMMAND; the URL's id is in no command line and on no
stderr), then waits. jsprof polls that directory and drives each process from a thread of
its own exactly as `record_node` drives a script (record._record: profiler started before
its first line, slices while it runs, worker threads as tracks, its last samples taken
while Node waits for the debugger to disconnect at its end).

Tracks: `pid PID SCRIPT` for each process's main thread (SCRIPT: its process.argv[1],
relative to the working directory when under it; `node` for `-e`/stdin), then
`pid PID SCRIPT worker N`, in the order the processes announced themselves. The first
track's meta also holds the command's ending as a script's (`command`, `exit`,
`exitCode`, `signal`), so `record.exit_status` gives the command's own status.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence

from ...errors import EngineError, UsageError
from .._ending import interruption
from .._process import SignalFlag, dies_with_jsprof, end_group
from .process import (
    _INSPECTOR_LINES,
    effective_interval,
    interval_us,
    pass_on_stderr,
    stderr_lines,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ...trace import Recording, Track
    from .._ending import Progress
    from .isolate import _Isolate

ANNOUNCE_ENV = "JSPROF_NODE_COMMAND"
_EXIT_PREFIX = "jsprof-exit:"
_POLL_S = 0.05  # the directory of announcements is read at each ring, and this often


def command_hook_path() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(os.path.dirname(os.path.dirname(here)), "js", "node_command_hook.js")


def find_command(word: str) -> str:
    """The executable `word` names: a path (with a `/`) or a name found on PATH, as a
    shell finds it; else a UsageError in one line."""
    if "/" in word:
        if not os.path.exists(word):
            raise UsageError(f"{word}: no such file; give a command to run (e.g. -- npm test)")
        if os.path.isdir(word) or not os.access(word, os.X_OK):
            raise UsageError(f"{word}: not an executable command (permission denied)")
        return word
    found = shutil.which(word)
    if found is None:
        raise UsageError(
            f"{word}: command not found on PATH; give a command that runs Node (e.g. -- npm "
            "test), or a script without --"
        )
    return found


def _node_options(existing: str | None, hook: str) -> str:
    """The user's NODE_OPTIONS, then ours (Node reads it with shell-like double quotes)."""
    quoted = hook
    if any(c in hook for c in ' "\\\t'):
        quoted = '"' + hook.replace("\\", "\\\\").replace('"', '\\"') + '"'
    ours = f"--inspect-publish-uid=, --require {quoted}"
    return f"{existing} {ours}" if existing and existing.strip() else ours


class _Child:
    """What record._record needs of a process: its inspector's URL, the event set when it
    waits for the debugger to disconnect, and kill(): a no-op (the command's group is ended
    once, by record_command)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.waiting = threading.Event()

    def kill(self, grace: float = 2.0) -> int | None:
        return None


class _Stop:
    """The `sigint` record._record polls: Ctrl-C (jsprof's SignalFlag), or the command's end
    or --duration (set by record_command)."""

    def __init__(self, sigint: SignalFlag) -> None:
        self.sigint = sigint
        self.event = threading.Event()

    @property
    def hit(self) -> bool:
        return self.sigint.hit or self.event.is_set()


class _Watched:
    """One announced Node process and the thread that profiles it."""

    def __init__(self, info: dict, us: int, stop: _Stop) -> None:
        from .._ending import Progress

        self.info = info
        self.pid: int = info["pid"]
        self.progress = Progress()
        self.isolates: list[_Isolate] = []
        self.how = "lost"
        self.error: dict | None = None
        self.exit_code: int | None = None
        self.failure: BaseException | None = None
        self._us = us
        self._stop = stop
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"jsprof-pid-{self.pid}")
        self.thread.start()

    def _title(self, title: str) -> None:
        if title.startswith(_EXIT_PREFIX):
            with contextlib.suppress(ValueError):
                self.exit_code = int(title[len(_EXIT_PREFIX) :])

    def _run(self) -> None:
        from .record import _record

        try:
            self.isolates, self.how, self.error, _, _, _ = _record(
                _Child(str(self.info["url"])),  # type: ignore[arg-type]
                self._us,
                True,
                None,
                self._stop,  # type: ignore[arg-type]
                self.progress,
                hook=command_hook_path(),
                on_title=self._title,
            )
        except Exception as e:  # noqa: BLE001 -- said in the track's meta, not fatal to the others
            self.failure = e
            # Its hook may still hold it (waiting for jsprof's go, which no debugger that
            # left will give): let it run on unprofiled, or the command waits for it forever.
            _release(str(self.info["url"]))

    def samples(self) -> tuple[int, int]:
        poll = self.progress.poll
        return poll() if poll is not None else (0, 0)


def _script_label(info: dict) -> str:
    argv = info.get("argv")
    if not isinstance(argv, list) or len(argv) < 2 or not isinstance(argv[1], str):
        return "node"
    script = argv[1]
    with contextlib.suppress(ValueError):
        rel = os.path.relpath(script)
        if not rel.startswith(".."):
            return rel
    return script


def _written_at(name: str) -> int:
    """The monotonic ns in a hook's file name (PID-NS.json): one clock for all processes."""
    ns = name[: -len(".json")].rpartition("-")[2]
    return int(ns) if ns.isdigit() else 0


def _announced(where: str, seen: set[str]) -> list[dict]:
    """The processes that announced themselves in `where` since last time, in the order
    they did."""
    import orjson

    try:
        names = [n for n in os.listdir(where) if n.endswith(".json") and not n.startswith(".")]
    except OSError:
        return []
    new = []
    for name in sorted(set(names) - seen, key=_written_at):
        seen.add(name)
        try:
            with open(os.path.join(where, name), "rb") as f:
                info = orjson.loads(f.read())
        except (OSError, orjson.JSONDecodeError):
            continue
        # Only what the hook writes: a loopback inspector and a pid (anything else in the
        # directory is not ours to connect to).
        if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
            continue
        url = info.get("url")
        if isinstance(url, str) and url.startswith("ws://127.0.0.1:"):
            new.append(info)
    return new


def _release(url: str) -> None:
    """Let a process that announced itself too late go on unprofiled."""
    from ..cdp import CDPClient, CDPClosed
    from .record import _release as release

    with contextlib.suppress(CDPClosed, EngineError, OSError):
        client = CDPClient(url, open_timeout=2.0)
        try:
            release(client.session)
            client.pump(0.05)
        finally:
            client.close()


class _Stderr:
    """The command's stderr, forwarded line by line less the inspector's own lines
    ("Debugger attached.", "Waiting for the debugger to disconnect...")."""

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe
        self.thread = threading.Thread(target=self._read, daemon=True, name="command-stderr")
        self.thread.start()

    def _read(self) -> None:
        for line in stderr_lines(self.pipe):
            if not line.startswith(_INSPECTOR_LINES):
                pass_on_stderr(line)


def record_command(
    argv: Sequence[str],
    *,
    sample_interval: float = 1.0,
    duration: float | None = None,
    progress: Progress | None = None,
) -> tuple[Recording, BaseException | None]:
    """Run `argv` (its first word found on PATH) and profile every Node process it starts:
    (the Recording, the interruption that ended it or None). The command's exit status is
    in the first track's meta (`exitCode`, `exit`, `signal`), as a script's.
    Raises UsageError when the command is not found, EngineError when no Node process
    delivered a profile."""
    if not argv:
        raise UsageError("give the command to run after -- (e.g. -- npm test)")
    exe = find_command(argv[0])
    us = interval_us(sample_interval)
    requested = effective_interval(sample_interval)
    # The hooks write into `where`, a folder of jsprof's own 0700 one: it is closed by a
    # rename inside that folder, where no other user can put or replace anything (a
    # sibling in /tmp named after it could be made by anyone who saw the name).
    private = tempfile.mkdtemp(prefix="jsprof-command-")  # mode 0700
    where = os.path.join(private, "announce")
    os.mkdir(where, 0o700)
    env = dict(os.environ)
    env[ANNOUNCE_ENV] = where
    env["NODE_OPTIONS"] = _node_options(env.get("NODE_OPTIONS"), command_hook_path())
    watched: list[_Watched] = []
    seen: set[str] = set()
    how = "ok"
    # The doorbell the hooks ring once their file is written: read end polled, and a write
    # end of our own held open so the FIFO never reads as ended between two rings. Both
    # close with jsprof (not inherited: Python's fds are not), so a hook that rings later
    # finds no reader and runs unprofiled instead of waiting for us.
    bell = os.path.join(where, "doorbell")
    os.mkfifo(bell, 0o600)
    bell_r = os.open(bell, os.O_RDONLY | os.O_NONBLOCK)
    bell_w = os.open(bell, os.O_WRONLY | os.O_NONBLOCK)
    with SignalFlag() as sigint:
        stop = _Stop(sigint)
        try:
            proc = subprocess.Popen(
                [exe, *argv[1:]],
                env=env,
                stderr=subprocess.PIPE,
                # Its own session, as a script's Node: a terminal's Ctrl-C reaches jsprof only,
                # which takes every profile before it ends the command.
                start_new_session=True,
                preexec_fn=dies_with_jsprof(),
            )
        except OSError as e:
            os.close(bell_r)
            os.close(bell_w)
            shutil.rmtree(private, ignore_errors=True)
            raise EngineError(f"cannot start {argv[0]}: {e.strerror or e}") from None
        err = _Stderr(proc.stderr)
        if progress is not None:
            progress.poll = lambda: (
                sum(w.samples()[0] for w in list(watched)),
                sum(w.samples()[1] for w in list(watched)),
            )
        deadline = None if duration is None else time.monotonic() + duration
        try:
            while True:
                for info in _announced(where, seen):
                    watched.append(_Watched(info, us, stop))
                if sigint.hit:
                    how = "interrupted"
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    how = "duration"
                    break
                if proc.poll() is not None:
                    break
                if select.select([bell_r], [], [], _POLL_S)[0]:
                    with contextlib.suppress(BlockingIOError):
                        os.read(bell_r, 4096)
        finally:
            # No process announces itself from now on (its write finds no directory, or no
            # reader at the doorbell: it runs unprofiled); those that did but were not
            # reached yet are let go.
            os.close(bell_r)
            os.close(bell_w)
            closed = os.path.join(private, "closed")
            with contextlib.suppress(OSError):
                os.rename(where, closed)
            late = _announced(closed, seen)
            stop.event.set()
            for w in watched:
                w.thread.join()
            for info in late:
                _release(str(info["url"]))
            end_group(proc)  # what it left running in its group
            err.thread.join(2.0)
            shutil.rmtree(private, ignore_errors=True)
    code = proc.returncode
    tracks: list[Track] = []
    for w in watched:
        tracks.extend(_tracks(w, requested, how))
    if not tracks:
        said = "; it ran no Node.js process that loaded jsprof's hook" if not watched else ""
        raise EngineError(
            f"{shlex.join(argv)}: exited with code {code}{said}, nothing was recorded "
            "(does it run node? a process started with a cleared NODE_OPTIONS is not seen, "
            "nor one that opens its own inspector: --inspect)"
        )
    meta = tracks[0].meta
    meta.update(command=list(argv), exitCode=code)
    error: BaseException | None = None
    if how == "interrupted" and sigint.signum is not None:
        meta["signal"] = signal.Signals(sigint.signum).name
        error = interruption(sigint.signum)
    elif how == "ok" and code is not None and code < 0:
        how = "killed"
        meta["signal"] = signal.Signals(-code).name
    elif how == "ok" and code:
        how = "error"
    meta["exit"] = how
    lost = [f"pid {w.pid}: {w.failure}" for w in watched if w.failure is not None]
    if lost:
        meta["lost"] = lost
    return _recording(tracks), error


def _recording(tracks: list[Track]) -> Recording:
    from ...trace import Recording

    return Recording(tracks)


def _tracks(w: _Watched, requested: float, ended: str) -> list[Track]:
    """The tracks of one process (main, then its workers), with what is known of it."""
    label = f"pid {w.pid} {_script_label(w.info)}"
    out: list[Track] = []
    lost: list[str] = []
    for iso in w.isolates if w.isolates and w.isolates[0].profile is not None else ():
        iso.name = label if iso.name == "main" else f"{label} {iso.name}"
        t = iso.track(requested, iso.name)
        if t is None:
            if iso.lost:
                lost.append(f"{iso.name}: {iso.lost}")
            continue
        if iso.exit_wait is not None and iso.exit_wait[0]:
            n, ms = iso.exit_wait
            t.meta["exitWaitDropped"] = {"samples": n, "ms": round(ms, 1)}
        if iso.partial:
            t.meta["partial"] = iso.lost
            if iso.lost_window is not None:
                t.meta["lostWindowMs"] = [round(x, 1) for x in iso.lost_window]
        t.meta["pid"] = w.pid  # every thread's: Perfetto and Chrome traces group by it
        out.append(t)
    if not out:
        return out
    m = out[0].meta
    m["argv"] = list(w.info.get("argv") or [])
    if isinstance(w.info.get("ppid"), int):
        m["ppid"] = w.info["ppid"]
    if w.exit_code is not None:
        m["processExitCode"] = w.exit_code
    # How its recording ended: on its own ("ok", or "error": it threw or exited non-zero;
    # "killed": by a signal, without its exit path), or cut short: by Ctrl-C or --duration
    # (as the command), or "outlived" the command.
    if w.how == "interrupted":
        m["processExit"] = ended if ended != "ok" else "outlived"
    elif w.isolates[0].partial:
        m["processExit"] = "killed"  # it never reached its exit path: a signal, a crash
    elif w.how == "ok" and (w.error is not None or w.exit_code):
        m["processExit"] = "error"
    else:
        m["processExit"] = w.how
    if w.error is not None:
        m["processError"] = str(w.error.get("stack") or w.error.get("message") or "")
    if lost:
        m["lost"] = lost
    return out
