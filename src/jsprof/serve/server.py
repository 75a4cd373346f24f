"""Running the collector: bind, announce, serve on uvicorn (one process or a few forked ones).

We bind the socket ourselves so the first stdout line can carry the real port the moment it
is bound (`--port 0`), before uvicorn starts; uvicorn then serves on that socket. With
`--workers N` the parent forks N workers that share the listening socket (each opens the
store and writes its own segments) and forwards SIGTERM/SIGINT to them once.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import tempfile
import time

from ..errors import UsageError
from .config import ServeConfig

SHUTDOWN_S = 10.0
_GRACE_S = 7.0  # uvicorn's wait for requests in progress; the rest is for closing the store


def bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise UsageError(f"--host {host}: cannot resolve ({e.strerror})") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as e:
        sock.close()
        raise UsageError(
            f"--host {host} --port {port}: cannot listen ({e.strerror}); "
            "pick another port, or --port 0 for a free one"
        ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def url_for(sock: socket.socket, host: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def _run_worker(config: ServeConfig, sock: socket.socket) -> None:
    import uvicorn

    from ..store import open_store
    from .app import create_app
    from .protocol import GuardedProtocol, connection_cap

    store = open_store(config.store)
    app = create_app(config, store)
    _tune_gc()
    GuardedProtocol.configure(
        config.read_timeout, config.body_timeout, connection_cap(config.max_connections)
    )
    uconf = uvicorn.Config(
        app,
        http=GuardedProtocol,
        log_config=None,
        log_level="warning",
        access_log=False,  # ours (opt-in) never logs the client's address
        server_header=False,
        # Only from the proxies named: then the client's address (for the wrong-token
        # throttle) and scheme (for the Secure cookie) are the proxy's X-Forwarded-*.
        proxy_headers=bool(config.forwarded_allow_ips),
        forwarded_allow_ips=config.forwarded_allow_ips or "",
        lifespan="on",
        timeout_graceful_shutdown=_GRACE_S,
        timeout_keep_alive=5,
    )

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: object) -> None:
            # One SIGTERM/SIGINT: stop accepting, finish what is in progress, exit 0.
            # (uvicorn would re-raise the signal afterwards and die by it; a second ctrl-c
            # while draining still forces the exit.)
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            self.should_exit = True

    server = _Server(uconf)
    try:
        server.run(sockets=[sock])
    finally:
        store.close()


def _tune_gc() -> None:
    """Each upload parses into ~10^4 short-lived dicts. With the default thresholds the
    cyclic GC runs a dozen times per upload and now and then walks every object of the
    loaded server (Starlette, numpy, ...). Freeze what start-up made (never garbage) and let
    the young generation grow larger between passes."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def run(config: ServeConfig, host: str, port: int, sock: socket.socket | None = None) -> int:
    """Serve on `sock` (bound by `bind(host, port)` when None) until told to stop."""
    if sock is None:
        sock = bind(host, port)
    metrics_dir = _metrics_dir()
    try:
        print(f"jsprof serve: listening on {url_for(sock, host)}", flush=True)
        if config.workers <= 1:
            try:
                _run_worker(config, sock)
            except KeyboardInterrupt:
                pass
            print("jsprof serve: stopped", file=sys.stderr, flush=True)
            return 0
        return _supervise(config, sock)
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)


def _metrics_dir() -> str:
    """A fresh directory for this run's metric values, set for the workers to inherit (before
    any of them imports prometheus_client, which reads it then): each worker writes its
    counts there and a scrape adds them all up (serve/metrics.py). Fresh, so counters start
    at 0 with the collector as Prometheus expects, and a stale one is never read."""
    d = tempfile.mkdtemp(prefix="jsprof-serve-metrics-")
    os.environ.pop("prometheus_multiproc_dir", None)  # the old spelling would win elsewhere
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = d
    return d


def _spawn(config: ServeConfig, sock: socket.socket, index: int) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        # Own process group: a terminal's ctrl-c reaches the parent only, which forwards
        # it once (a second signal would make uvicorn skip its graceful shutdown).
        os.setpgid(0, 0)
        _die_with_parent()
        os.environ["JSPROF_SERVE_WORKER"] = str(index)
        _run_worker(config, sock)
    except KeyboardInterrupt:
        pass
    except BaseException as e:  # noqa: BLE001 - a worker reports and exits, never returns
        print(f"jsprof serve: worker {index} failed: {e}", file=sys.stderr, flush=True)
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _die_with_parent() -> None:
    """A worker whose supervisor is killed goes too, at once (as if the collector crashed),
    instead of serving on as an orphan."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the supervisor's SIGTERM path remains
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def _supervise(config: ServeConfig, sock: socket.socket) -> int:
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            for pid in list(children):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    children: dict[int, int] = {}
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for i in range(config.workers):
        children[_spawn(config, sock, i)] = i
    deadline = None
    while children:
        if stopping and deadline is None:
            deadline = time.monotonic() + SHUTDOWN_S - 0.5
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            if deadline is not None and time.monotonic() > deadline:
                for p in children:
                    os.kill(p, signal.SIGKILL)
            time.sleep(0.05)
            continue
        index = children.pop(pid, None)
        if index is not None and not stopping:
            # A worker that dies (OOM, a bug) is replaced; the store needs no repair for it.
            print(
                f"jsprof serve: worker {index} exited ({_status(status)}); restarting it",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(0.2)
            children[_spawn(config, sock, index)] = index
    sock.close()
    print("jsprof serve: stopped", file=sys.stderr, flush=True)
    return 0


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.waitstatus_to_exitcode(status)}"
