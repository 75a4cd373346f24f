"""The Node process: finding Node, starting it with its inspector on a loopback port,
forwarding its stderr (less the inspector's own lines), and ending it and its group."""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

from ...errors import EngineError, UsageError
from .. import _v8session
from .._process import dies_with_jsprof, end_group

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import BinaryIO

ENGINE = "node"
_WS_RE = re.compile(rb"Debugger listening on (ws://\S+)")
# Lines the inspector writes to stderr that are ours, not the script's.
_INSPECTOR_LINES = (
    b"Debugger listening on ",
    b"For help, see: https://nodejs.org/",
    b"Debugger attached.",
    b"Waiting for the debugger to disconnect...",
    b"Debugger ending on ",
)
_WAITING = b"Waiting for the debugger to disconnect..."
MIN_INTERVAL_US = 100


def stderr_lines(pipe: BinaryIO) -> Iterator[bytes]:
    """A Node process's stderr line by line. The inspector writes its lines whole, but
    after the script's last write left its line open the two come as one ("doneWaiting
    for the debugger to disconnect..."): the script's part, as it wrote it, comes first
    and alone, so the inspector's line is known for its own. Only a whole inspector line
    ends a line so: the script's own line that mentions one ("note: Debugger attached.
    twice") is passed on whole, as it was written."""
    for line in iter(pipe.readline, b""):
        for marker in _INSPECTOR_LINES:
            i = line.rfind(marker, 1)  # the last: a line of its own ends the line
            if i > 0 and _whole_inspector_line(marker, line[i + len(marker):]):
                yield line[:i]
                line = line[i:]
                break
        yield line


def _whole_inspector_line(marker: bytes, rest: bytes) -> bool:
    """Whether `rest`, what follows `marker` on the line, ends an inspector line as Node
    writes it: nothing after "Debugger attached." or "...disconnect...", a URL after the
    others."""
    rest = rest.rstrip(b"\r\n")
    if marker.endswith(b"."):
        return not rest
    return bool(rest) and b" " not in rest


def pass_on_stderr(line: bytes, out: BinaryIO | None = None) -> None:
    """One line of a Node process's stderr onto `out`, else onto ours (its bytes where
    sys.stderr has a buffer; decoded where it was replaced by a text-only stream)."""
    if out is None:
        out = getattr(sys.stderr, "buffer", None)
    try:
        if out is None:
            sys.stderr.write(line.decode(errors="replace"))
            sys.stderr.flush()
        else:
            out.write(line)
            out.flush()
    except (OSError, ValueError):
        pass  # our stderr went away; the script's stderr is not worth dying for


_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "in uninterruptible I/O",
    "T": "stopped",
    "t": "stopped by a tracer",
    "Z": "a zombie",
    "X": "dead",
}


def process_state(pid: int) -> str:
    """What Linux says of a process, for an error about it: its state, CPU time so far, and
    where its main thread waits (e.g. "sleeping, 1.20 s of CPU, waiting in ep_poll")."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return "the process is gone"
    fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) "
    state = _STATES.get(fields[0], fields[0]) if fields else "?"
    try:
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        said = f"{state}, {cpu:.2f} s of CPU"
    except (IndexError, ValueError):
        said = state
    try:
        with open(f"/proc/{pid}/wchan", "rb") as f:
            wchan = f.read().decode("ascii", "replace").strip()
    except OSError:
        wchan = ""
    said = f"{said}, waiting in {wchan}" if wchan and wchan != "0" else said
    threads = _threads_waiting(pid)
    return f"{said}; threads: {threads}" if threads else said


def _threads_waiting(pid: int) -> str:
    """Where each thread of `pid` waits, grouped ("node: futex_do_wait; V8Worker x4:
    futex_do_wait; ..."): a hung main thread and what its helpers do tell a deadlock from
    a starved or lost reply."""
    try:
        tids = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        return ""
    seen: dict[str, int] = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm", "rb") as f:
                comm = f.read().decode("ascii", "replace").strip()
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
            with open(f"/proc/{pid}/task/{tid}/wchan", "rb") as f:
                wchan = f.read().decode("ascii", "replace").strip()
        except OSError:
            continue
        state = stat[stat.rfind(")") + 2 :][:1]
        where = wchan if wchan and wchan != "0" else ("running" if state == "R" else state)
        key = f"{comm}: {where}"
        seen[key] = seen.get(key, 0) + 1
    return "; ".join(k if n == 1 else f"{k} x{n}" for k, n in seen.items())


def script_path(script: str | os.PathLike[str]) -> str:
    """`script` as a str path, or a UsageError when there is no such file."""
    path = os.fspath(script)
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file; give the path of a .js, .mjs or .cjs script")
    return path


def find_node(node: str | None = None) -> str:
    """The node binary: the argument, $JSPROF_NODE, or `node` on PATH."""
    exe = node or os.environ.get("JSPROF_NODE") or "node"
    path = shutil.which(exe)
    if path is None:
        raise EngineError(
            f"cannot find Node.js ({exe!r}); install Node 18+ or set JSPROF_NODE to its path"
        )
    return path


def interval_us(sample_interval: float) -> int:
    """CDP wants whole microseconds. 0 means the minimum, 0.1 ms as in the Profiler global:
    V8 takes finer requests but spaces samples ~120-180 us apart anyway."""
    return _v8session.interval_us(sample_interval, MIN_INTERVAL_US)


def effective_interval(sample_interval: float) -> float:
    """The interval asked of V8 in ms: the request, or V8's minimum for 0."""
    return _v8session.effective_interval(sample_interval, MIN_INTERVAL_US)


# ---- the node process ---------------------------------------------------------------------


class NodeProcess:
    """`node --inspect-brk=127.0.0.1:0 ...` (or the `inspect` flags given) in its own
    process group; forwards its stderr (less the inspector's own lines) and finds the
    WebSocket URL there. With wait=False it returns as soon as Node is spawned (Node boots
    while the caller goes on); `wait_ready()` then gives the URL."""

    def __init__(
        self,
        argv: Sequence[str],
        node: str | None = None,
        node_args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        stderr: BinaryIO | None = None,
        start_timeout: float = 15.0,
        inspect: Sequence[str] = ("--inspect-brk=127.0.0.1:0",),
        wait: bool = True,
    ) -> None:
        exe = find_node(node)
        # The inspector's URL (its id is the only key to it: whoever has it runs code in
        # Node) is read from Node's stderr, which is ours; not published over HTTP too,
        # where any local user's GET /json/list on the port would give it.
        publish = ("--inspect-publish-uid=stderr",) if inspect else ()
        cmd = [exe, *publish, *inspect, *node_args, *argv]
        self._err_out = stderr
        self.url: str | None = None
        self.waiting = threading.Event()  # "Waiting for the debugger to disconnect..."
        self._url_ready = threading.Event()
        # Node's own lines before the inspector opened ("node: bad option: --bogus"): held
        # back to be quoted in the error if Node exits there, else forwarded as they were.
        self._early: list[bytes] = []
        try:
            self.proc = subprocess.Popen(
                cmd,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
                preexec_fn=dies_with_jsprof(),
            )
        except OSError as e:
            raise EngineError(f"cannot start {exe}: {e}") from None
        self._reader = threading.Thread(target=self._read_stderr, daemon=True, name="node-stderr")
        self._reader.start()
        self._exe = exe
        if wait:
            self.wait_ready(start_timeout)

    def wait_ready(self, start_timeout: float = 15.0) -> str:
        """The inspector's WebSocket URL, once Node has printed it (EngineError if it
        does not within `start_timeout` s)."""
        exe = self._exe
        if not self._url_ready.wait(start_timeout) or self.url is None:
            code = self.kill()
            early = [ln.strip() for ln in self._early if ln.strip()]
            if early and code is not None and code >= 0:
                for line in self._early[: len(self._early) - 1]:
                    self._write_err(line)
                said = early[-1].decode(errors="replace")
                raise EngineError(
                    f"node exited with code {code} before it opened its inspector: {said}"
                )
            if code is not None and code < 0:
                raise EngineError(
                    f"node was killed by {signal.Signals(-code).name} before it opened its "
                    "inspector; nothing was recorded"
                )
            raise EngineError(
                f"node did not open its inspector within {start_timeout:g} s "
                f"(exit code {self.proc.poll()}); is {exe} Node.js 18 or newer?"
            )
        return self.url

    def _write_err(self, line: bytes) -> None:
        pass_on_stderr(line, self._err_out)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in stderr_lines(self.proc.stderr):
            if self.url is None:
                m = _WS_RE.search(line)
                if m:
                    self.url = m.group(1).decode()
                    early, self._early = self._early, []
                    for held in early:
                        self._write_err(held)
                    self._url_ready.set()
                    continue
                if not line.startswith(_INSPECTOR_LINES) and len(self._early) < 64:
                    self._early.append(line)
                    continue
            if line.startswith(_WAITING):
                self.waiting.set()
                continue
            if line.startswith(_INSPECTOR_LINES):
                continue
            self._write_err(line)
        self._url_ready.set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self, grace: float = 2.0) -> int | None:
        """End the whole process group: SIGTERM, then SIGKILL after `grace` s."""
        code = end_group(self.proc, grace)
        self._reader.join(2.0)
        return code

    def _pidfd(self) -> int | None:
        """A pidfd for Node while it is not yet reaped, else None. Once Popen has reaped
        Node its pid may name an unrelated process, so the pidfd is taken only while
        `returncode` is None, and dropped if a reap (another thread's poll()) raced it."""
        if self.proc.poll() is not None:
            return None
        try:
            fd = os.pidfd_open(self.proc.pid)
        except (OSError, AttributeError):  # ProcessLookupError: gone meanwhile; not Linux
            return None
        if self.proc.returncode is not None:  # reaped between the check and the open
            os.close(fd)
            return None
        return fd

    def wait_exit(self, timeout: float = 10.0) -> int | None:
        # Popen.wait(timeout) polls with growing sleeps (up to 50 ms late), which a short
        # script pays in full: a pidfd says at once when Node exited (Linux 5.3+).
        fd = self._pidfd()
        if fd is not None:
            try:
                exited = select.select([fd], [], [], timeout)[0]
            finally:
                os.close(fd)
            if not exited:
                return self.kill()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()
        end_group(self.proc)  # what it left in its group
        self._reader.join(2.0)
        early, self._early = self._early, []  # Node ran without an inspector (inspect=())
        for line in early:
            self._write_err(line)
        return self.proc.returncode
