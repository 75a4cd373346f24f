"""The browser process: a headless Chromium on its debugging pipe (no port at all), in
its own process group and profile folder, and its tabs, each in a browser context of its
own."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile

from ...errors import EngineError
from .._process import dies_with_jsprof, end_group
from ..cdp import CDPClient, CDPClosed, CDPError, Session
from ..cdp_pipe import child_pipes, install_in_child

HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",  # as root (CI, containers) Chromium refuses to start with its sandbox
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
    "--no-default-browser-check",
)


def find_chromium(exe: str | None = None) -> str:
    """The browser: the argument, $JSPROF_CHROMIUM, or chromium/google-chrome on PATH."""
    names = [exe] if exe else []
    env = os.environ.get("JSPROF_CHROMIUM")
    if env and not exe:
        names = [env]
    names = names or ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    raise EngineError(
        f"cannot find Chromium ({', '.join(names)}); install it (Debian: apt-get install "
        "chromium, or `make chromium`) or set JSPROF_CHROMIUM to its path"
    )


class Browser:
    """A headless Chromium on a debugging pipe, in its own process group and profile
    folder; `close()` (or jsprof's death: PR_SET_PDEATHSIG) ends it."""

    def __init__(
        self,
        chromium: str | None = None,
        extra_args: tuple[str, ...] = (),
        start_timeout: float = 60.0,
    ) -> None:
        exe = find_chromium(chromium)
        self.user_data = tempfile.mkdtemp(prefix="jsprof-chromium-")
        conn, fds = child_pipes()
        self._log_path = os.path.join(self.user_data, "chromium.log")
        cmd = [
            exe,
            *HEADLESS_FLAGS,
            f"--user-data-dir={self.user_data}",
            "--remote-debugging-pipe",
            *extra_args,
            "about:blank",
        ]

        die_with_jsprof = dies_with_jsprof()

        def child() -> None:
            install_in_child(fds)
            die_with_jsprof()

        try:
            with open(self._log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                    close_fds=False,  # fds 3 and 4 are the pipe; ours are all close-on-exec
                    preexec_fn=child,
                )
        except OSError as e:
            conn.close()
            shutil.rmtree(self.user_data, ignore_errors=True)
            raise EngineError(f"cannot start {exe}: {e}") from None
        finally:
            for fd in fds:
                os.close(fd)
        self.client = CDPClient("chromium (pipe)", connection=conn)
        self._contexts: dict[str, str] = {}
        try:
            self.version = self.client.session.send("Browser.getVersion", timeout=start_timeout)
        except (CDPClosed, EngineError) as e:
            tail = self.log_tail()
            self.close()
            raise EngineError(
                f"{exe} did not answer on its debugging pipe ({e}); its last words: {tail}"
            ) from None

    def log_tail(self, n: int = 300) -> str:
        try:
            with open(self._log_path, "rb") as f:
                data = f.read()[-n:]
        except OSError:
            return "(no log)"
        return data.decode(errors="replace").strip().replace("\n", " | ") or "(nothing)"

    def new_page(self) -> tuple[Session, str]:
        """A fresh blank tab, in a browser context of its own, and a flattened session.

        Its own context, so that no other page of the site shares its renderer: the page's
        document restarts the profiler from the session's confirmed state (page.py's
        prepare waits for the start's reply; docs/engines.md, "Profiler state survives a
        navigation")."""
        root = self.client.session
        ctx = root.send("Target.createBrowserContext", {"disposeOnDetach": True})
        cid = ctx["browserContextId"]
        tid = root.send("Target.createTarget", {"url": "about:blank", "browserContextId": cid})[
            "targetId"
        ]
        self._contexts[tid] = cid
        sid = root.send("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
        return self.client.attach(sid, via_node_worker=False), tid

    def close_page(self, target_id: str) -> None:
        """Close a tab of ours and drop its browser context (cookies, caches, processes)."""
        root = self.client.session
        cid = self._contexts.pop(target_id, None)
        with contextlib.suppress(CDPClosed, CDPError, EngineError):
            root.send("Target.closeTarget", {"targetId": target_id}, timeout=10)
            if cid is not None:
                root.send("Target.disposeBrowserContext", {"browserContextId": cid}, timeout=10)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, grace: float = 3.0) -> int | None:
        if self.proc.poll() is None and not self.client.closed:
            with contextlib.suppress(CDPClosed, EngineError):
                self.client.session.send_nowait("Browser.close", reply=False)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        self.client.close()
        end_group(self.proc, 2.0, 2.0)
        shutil.rmtree(self.user_data, ignore_errors=True)
        return self.proc.returncode

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
