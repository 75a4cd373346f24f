import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"

# A shell starts a background job (`make test &`, `nohup`) with SIGINT ignored, and an
# ignored signal stays ignored across exec: every jsprof the tests start would then shrug
# off the Ctrl-C the tests send it and run on until killed (seen: a `record` looping for
# 26 min). A handler, unlike SIG_IGN, is reset to the default at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def data() -> Path:
    return DATA


@pytest.fixture(scope="session")
def dask_client() -> Iterator[object]:
    """A real 2-worker LocalCluster's Client, one per pytest process: the fleet files'
    Dask tests share it (starting and closing one is ~6.5 s at load 11, and four files
    each started their own). Tests that need workers of their own (an environment, a
    failure) start them themselves."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address="127.0.0.1:0", host="127.0.0.1") as c, Client(c) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        yield client


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `make test-fast` deselects what needs headless Chromium or the npm test tools; tests
    # say so with @pytest.mark.chromium / @pytest.mark.npm, and a test that uses a
    # `chromium` or `browser` fixture or lives in a test_chromium*.py file is a chromium
    # test anyway.
    for item in items:
        uses = getattr(item, "fixturenames", ())
        if {"chromium", "browser"} & set(uses) or item.path.name.startswith("test_chromium"):
            item.add_marker(pytest.mark.chromium)


# `make test` sets JSPROF_NO_SKIP=1: everything runs, and a skip (a missing tool, a
# forgotten pytest.skip) is a failure, not a quiet pass. Read once and taken out of the
# environment, so the programs the tests run never see it (they check for leaked JSPROF_*).
NO_SKIP = os.environ.pop("JSPROF_NO_SKIP", "") == "1"


# `make test` runs the tests in pytest-xdist workers (-n): they start after the line above
# took the variable out of the environment, so the controller hands them its NO_SKIP.
@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    node.workerinput["jsprof_no_skip"] = NO_SKIP  # type: ignore[attr-defined]


def _no_skip(config: pytest.Config) -> bool:
    worker = getattr(config, "workerinput", None)
    return NO_SKIP or bool(worker and worker.get("jsprof_no_skip"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.when == "call":
        _native_stacks_of_a_hung_node(report, str(call.excinfo.value))
    if _no_skip(item.config) and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped, but JSPROF_NO_SKIP=1 forbids skips: {reason}"


_HUNG_NODE = re.compile(r"node \(pid (\d+)\): no CDP reply")


def _native_stacks_of_a_hung_node(report: pytest.TestReport, message: str) -> None:
    """A Node that stopped answering (seen in CI at load 19: its main thread in a futex,
    not reproduced in hundreds of runs here): every thread's native stack goes into the
    failure's report, taken before the fixture kills the process, so the next one tells
    where it waits."""
    m = _HUNG_NODE.search(message)
    gdb = shutil.which("gdb")
    if m is None or gdb is None:
        return
    try:
        p = subprocess.run(
            [gdb, "-p", m.group(1), "-batch", "-ex", "thread apply all bt 25"],
            capture_output=True, text=True, timeout=60,
        )
        stacks = p.stdout[-20000:] or p.stderr[-2000:]
    except (OSError, subprocess.TimeoutExpired) as e:
        stacks = f"gdb: {e}"
    report.sections.append(("native stacks of the hung node", stacks))
