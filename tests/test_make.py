"""The Makefile's two doors (#36): `make demo` installs jsprof's core only (it took 1:56 on a
fresh clone, nearly all of it installing Playwright, MkDocs and Dask for a demo that needs
none of them); `make test` adds the dev extra's requirements, nested extras expanded, without
building jsprof a second time."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the core's build keeps its compiled objects for test_packaging's wheel (setup.py)
CORE_INSTALL = (f"JSPROF_BUILD_CACHE={ROOT}/build/objcache "
                ".venv/bin/python -m pip install --quiet -e .")


def _plan(target: str) -> list[str]:
    """The commands `make TARGET` would run on a fresh clone (-n: none is run; -B: as if
    nothing were built)."""
    # Run by `make test` itself, make here is a sub-make: it would print "make[1]: Leaving
    # directory" after the plan (the CI run at d10db9e), and take the parent's flags.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    p = subprocess.run(["make", "--no-print-directory", "-n", "-B", target], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def test_demo_installs_the_core_only():
    installs = [ln for ln in _plan("demo") if "pip install" in ln]
    assert installs == [CORE_INSTALL], installs
    assert not any("extra_requirements" in ln for ln in _plan("demo"))


def test_test_adds_the_dev_extra_without_building_again():
    plan = _plan("test")
    installs = [ln for ln in plan if "pip install" in ln]
    assert installs == [CORE_INSTALL,
                        ".venv/bin/python -m pip install --quiet -r "
                        ".venv/dev-requirements.txt"], installs
    assert ".venv/bin/python tools/extra_requirements.py dev > .venv/dev-requirements.txt" in plan


def test_dev_requirements_are_every_extras_own():
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "extra_requirements.py"), "dev"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    got = p.stdout.splitlines()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    want = {r for reqs in extras.values() for r in reqs if not r.startswith("jsprof[")}
    assert len(got) == len(set(got)) and set(got) == want, set(got) ^ want
    bad = subprocess.run([sys.executable, str(ROOT / "tools" / "extra_requirements.py"), "nope"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "no extra 'nope'" in bad.stderr


def test_test_ends_with_the_sampling_tests_beside_busy_loops():
    # (#37) the files of every test marked under_load, beside busy loops, after the suite
    last = _plan("test")[-1]
    assert last.startswith("JSPROF_NO_SKIP=1 .venv/bin/python tools/under_load.py --per-cpu 3 ")
    assert "-m under_load" in last
    marked = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("test_*.py")
              if "\n@pytest.mark.under_load" in p.read_text()}
    assert {"tests/test_quickjs.py", "tests/test_node.py", "tests/test_chromium.py"} <= marked
    assert marked == {w for w in last.split() if w.startswith("tests/")}, last
