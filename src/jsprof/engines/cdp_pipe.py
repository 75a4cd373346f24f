"""CDP over Chromium's `--remote-debugging-pipe`: no port is opened at all.

Chromium reads commands from its fd 3 and writes replies and events to its fd 4, each
message a JSON text ended by a NUL byte. `PipeConnection` offers the two calls the CDP
client uses of a WebSocket connection (`send(text)`, `recv(timeout)`) plus `close()`,
so `CDPClient(connection=PipeConnection(...))` speaks to a browser through it.

Reads happen on the caller's thread with `select`, like the WebSocket client's: no
thread of ours sits on the pipe.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import threading

from .websocket import ConnectionClosed, MessageTooBig, max_message_bytes

# A browser's messages are usually small; a profile can be hundreds of MB.
_READ_CHUNK = 1 << 20


class PipeConnection:
    """One end of Chromium's debugging pipe: we write to `write_fd`, read from `read_fd`."""

    def __init__(self, read_fd: int, write_fd: int, max_message: int | None = None) -> None:
        # The same limit as the WebSocket's: a pipe message has no length up front, so it
        # is enforced on what has been buffered without a NUL.
        self.max_message = max_message_bytes() if max_message is None else max_message
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._buf = bytearray()
        self._scan = 0  # the buffer holds no NUL before this offset
        self._eof = False
        self._closed = False
        self._send_lock = threading.Lock()
        os.set_blocking(read_fd, False)

    def send(self, text: str | bytes) -> None:
        data = (text.encode() if isinstance(text, str) else text) + b"\0"
        with self._send_lock:
            if self._closed:
                raise ConnectionClosed(None, None)
            view = memoryview(data)
            while view:
                try:
                    n = os.write(self.write_fd, view)
                except BrokenPipeError:
                    self._eof = True
                    raise ConnectionClosed(None, None) from None
                except OSError as e:
                    if e.errno == errno.EINTR:
                        continue
                    raise ConnectionClosed(None, None) from None
                view = view[n:]

    def _take(self) -> bytes | None:
        i = self._buf.find(b"\0", self._scan)
        if i < 0:
            self._scan = len(self._buf)
            if len(self._buf) > self.max_message:
                size = len(self._buf)
                self._buf = bytearray()
                self._scan = 0
                self._eof = True  # the rest of that message would follow: unusable
                raise MessageTooBig(size, self.max_message)
            return None
        if i > self.max_message:
            self._buf = bytearray()
            self._scan = 0
            self._eof = True
            raise MessageTooBig(i, self.max_message)
        msg = bytes(self._buf[:i])
        del self._buf[: i + 1]
        self._scan = 0
        return msg

    def recv(self, timeout: float | None = None) -> bytes:
        """The next message; TimeoutError when none is complete within `timeout` s
        (0: only what already arrived); ConnectionClosed once Chromium closed its end."""
        msg = self._take()
        if msg is not None:
            return msg
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._eof or self._closed:
                raise ConnectionClosed(None, None)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                ready, _, _ = select.select([self.read_fd], [], [], left)
            except InterruptedError:
                ready = []
            except (OSError, ValueError):
                self._eof = True
                raise ConnectionClosed(None, None) from None
            if ready:
                self._fill()
                msg = self._take()
                if msg is not None:
                    return msg
                continue
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError

    def _fill(self) -> None:
        """Read all that is there (a big profile arrives in many chunks)."""
        while True:
            try:
                chunk = os.read(self.read_fd, _READ_CHUNK)
            except BlockingIOError:
                return
            except InterruptedError:
                continue
            except OSError:
                self._eof = True
                return
            if not chunk:
                self._eof = True
                return
            self._buf += chunk
            if len(chunk) < _READ_CHUNK:
                return

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for fd in (self.write_fd, self.read_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def child_pipes() -> tuple[PipeConnection, tuple[int, int]]:
    """Make the two pipes: our connection, and (child_read, child_write) to become the
    child's fds 3 and 4 (see `install_in_child`). All four fds are close-on-exec and
    numbered >= 10, so the dup2 in the child cannot overwrite one with the other."""

    def high(fd: int) -> int:
        h = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return h

    cmd_r, cmd_w = os.pipe()  # we write commands, Chromium reads (its fd 3)
    out_r, out_w = os.pipe()  # Chromium writes (its fd 4), we read
    cmd_r, cmd_w, out_r, out_w = (high(fd) for fd in (cmd_r, cmd_w, out_r, out_w))
    return PipeConnection(out_r, cmd_w), (cmd_r, out_w)


def install_in_child(fds: tuple[int, int]) -> None:
    """In the child before exec: its fds 3 and 4 become the pipe ends (inheritable)."""
    os.dup2(fds[0], 3)
    os.dup2(fds[1], 4)
