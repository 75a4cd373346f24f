"""The suite's own rules (tests/conftest.py): under `make test` (JSPROF_NO_SKIP=1) a
skipped test fails the run; tests needing Chromium are marked for `make test-fast`."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent

SKIPPING = """
import pytest

def test_needs_a_tool():
    pytest.skip("tool missing")

def test_fine():
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_known_bug():
    assert False

def test_uses_chromium(chromium):
    pass

@pytest.fixture
def chromium():
    return "/usr/bin/chromium"
"""


def _run(tmp_path, no_skip: str, *args: str) -> subprocess.CompletedProcess:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(SKIPPING)
    env = {**os.environ, "JSPROF_NO_SKIP": no_skip}
    # Hypothesis's plugin left out: importing it is ~80 % of an inner pytest's start (9.5 s
    # of 11 at load 22, in each xdist worker too), and these rules never meet it.
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "no:hypothesispytest", *args, str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )


def test_a_skip_fails_under_make_test(tmp_path):
    strict = _run(tmp_path, "1")
    assert strict.returncode == 1, strict.stdout
    assert "1 failed, 2 passed, 1 xfailed" in strict.stdout, strict.stdout
    assert "JSPROF_NO_SKIP=1 forbids skips" in strict.stdout and "tool missing" in strict.stdout
    relaxed = _run(tmp_path, "")
    assert relaxed.returncode == 0 and "2 passed, 1 skipped, 1 xfailed" in relaxed.stdout


def test_a_skip_fails_in_xdist_workers_too(tmp_path):
    # `make test` runs the suite in pytest-xdist workers (-n), which start after conftest
    # took JSPROF_NO_SKIP out of the environment
    strict = _run(tmp_path, "1", "-n", "2")
    assert strict.returncode == 1, strict.stdout
    assert "1 failed, 2 passed, 1 xfailed" in strict.stdout, strict.stdout
    assert "JSPROF_NO_SKIP=1 forbids skips" in strict.stdout and "tool missing" in strict.stdout
    relaxed = _run(tmp_path, "", "-n", "2")
    assert relaxed.returncode == 0 and "2 passed, 1 skipped, 1 xfailed" in relaxed.stdout


def test_chromium_fixture_users_are_deselected_by_test_fast(tmp_path):
    fast = _run(tmp_path, "", "-m", "not chromium and not npm")
    assert "1 deselected" in fast.stdout, fast.stdout
