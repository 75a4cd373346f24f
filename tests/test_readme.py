"""The documentation's promises that code can check: the Python example (docs/local-profiling.md)
runs and prints the hottest functions, and the list of QuickJS's globals (docs/engines.md) is
what QuickJS has. The README itself points to those pages (and its pictures exist)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from jsprof.engines.quickjs import QuickJS

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
LOCAL = (ROOT / "docs" / "local-profiling.md").read_text()
ENGINES = (ROOT / "docs" / "engines.md").read_text()

# ECMAScript's own globals (ES2025 + stage-4 additions QuickJS-ng ships): not listed.
ECMASCRIPT = set(
    """Object Function Error EvalError RangeError ReferenceError SyntaxError TypeError
    URIError InternalError AggregateError SuppressedError Iterator Array parseInt parseFloat
    isNaN isFinite decodeURI decodeURIComponent encodeURI encodeURIComponent escape unescape
    Infinity NaN undefined eval Number Boolean String Math Reflect Symbol DisposableStack
    AsyncDisposableStack globalThis BigInt Date RegExp JSON Proxy Map Set WeakMap WeakSet
    ArrayBuffer SharedArrayBuffer Uint8ClampedArray Int8Array Uint8Array Int16Array
    Uint16Array Int32Array Uint32Array BigInt64Array BigUint64Array Float16Array Float32Array
    Float64Array DataView Atomics Promise WeakRef FinalizationRegistry""".split()
)


APP = """
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function strings(n) { let s = ''; for (let i = 0; i < n; i++) s += i % 10; return s.length; }
function sorts(n) { const a = []; for (let i = 0; i < n; i++) a.push((i * 7919) % n);
  return a.sort((x, y) => x - y).length; }
const end = Date.now() + 400;
while (Date.now() < end) { fib(20); strings(20000); sorts(20000); }
"""


def test_python_example_prints_the_hottest_functions(tmp_path):
    block = re.search(r"## From Python\n\n```python\n(.*?)```", LOCAL, re.S).group(1)
    (tmp_path / "app.js").write_text(APP)
    p = subprocess.run(
        [sys.executable, "-c", block], capture_output=True, text=True, timeout=180, cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    # The Node recording's five hottest functions come last, largest first; before them
    # the example may print the QuickJS session's top 3 (led by its `f`).
    first, last = lines[:-5], lines[-5:]
    assert len(last) == 5 and len(first) <= 3, p.stdout
    assert not first or first[0].split()[2] == "f", p.stdout
    for group in (first, last):
        ms = [float(line.split()[0]) for line in group]
        assert ms == sorted(ms, reverse=True) and all(x >= 0 for x in ms), p.stdout
    assert any(line.split()[2] in ("fib", "strings", "sorts") for line in last), lines
    assert (tmp_path / "app.pftrace").stat().st_size > 0


def test_engines_page_lists_quickjs_globals():
    para = re.search(r"What a script sees on QuickJS(.*?)\n\n", ENGINES, re.S).group(1)
    names = re.findall(r"`([A-Za-z_$][\w$]*)`", para)  # `now()` is not a name: skipped
    members = {"log", "info", "debug", "error", "warn", "timeOrigin", "index", "count"}
    listed = set(names) - members - {"jsprof", "require", "import", "qjs"}
    have = set(QuickJS().eval("Object.getOwnPropertyNames(globalThis).join(' ')").split())
    assert listed - have == set(), "listed but missing"
    assert have - ECMASCRIPT - listed == set(), "present but not in docs/engines.md"


def test_readme_is_a_door():
    """A screen or two: the two set-up commands first, then links that resolve."""
    assert len(README.splitlines()) <= 80
    first_code = re.search(r"```sh\n(.*?)```", README, re.S).group(1)
    assert first_code.startswith("make demo") and "\nmake test" in first_code
    links = re.findall(r"\]\(([^)#]+)", README)
    assert {"docs/images/flame.png", "docs/images/dashboard.png"} <= set(links)
    for link in links:
        assert (ROOT / link).is_file(), link


# ---- the commands a reader pastes (#36) --------------------------------------------------
# A shell block right after a `<!-- runnable -->` line (invisible on GitHub and on the site)
# is run as pasted: every such block of a page in order, in one shell, from a folder laid
# out as the checkout is after `make demo` (examples/, .venv/), with a time bound; whatever
# it left running in the background (a collector) is stopped at the end.
RUNNABLE = re.compile(r"^<!-- runnable -->\n```(?:sh|bash)\n(.*?)^```", re.S | re.M)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def runnable_blocks(text: str) -> list[str]:
    return RUNNABLE.findall(text)


def _run_as_pasted(script: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    import os
    import signal

    env = {k: v for k, v in os.environ.items() if not k.startswith("JSPROF_READ")}
    # the shell leads its own process group: its background jobs are in it
    p = subprocess.Popen(["bash", "-c", "set -eo pipefail\n" + script], cwd=cwd, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(10)
    return subprocess.CompletedProcess(p.args, p.returncode, out, "")


def test_runnable_blocks_are_found():
    assert runnable_blocks(README), "the README's tour is marked runnable"
    sample = "x\n<!-- runnable -->\n```sh\necho a\n```\n```sh\nnot this\n```\n"
    assert runnable_blocks(sample) == ["echo a\n"]


def test_a_command_that_needs_an_extra_comes_after_its_install():
    """`make demo` installs the core only, so a pasted block that runs `jsprof serve` or
    `jsprof fleet` (the field extra: cli.PACKAGE_COMMANDS) installs it first (`make field`):
    the README's tour stopped at `jsprof serve needs the field extra` in a fresh clone,
    which the run below, in a venv holding every extra, cannot see."""
    from jsprof.cli import PACKAGE_COMMANDS

    needs = re.compile(r"\bjsprof (" + "|".join(PACKAGE_COMMANDS) + r")\b")
    installs = re.compile(r"^\s*(make field\b|(\.venv/bin/)?pip install .*\[field)")
    checked = 0
    for page in PAGES:
        lines = "\n".join(runnable_blocks(page.read_text())).splitlines()
        for i, line in enumerate(lines):
            if needs.search(line.split("#", 1)[0]):
                checked += 1
                assert any(installs.match(x) for x in lines[:i]), (page.name, line)
    assert checked >= 2  # the tour's collector and its fleet query


def test_make_field_installs_the_field_extra_beside_the_core():
    # what the tour's `make field` runs: the extra's requirements (no second QuickJS build)
    dry = subprocess.run(["make", "-n", "field"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "tools/extra_requirements.py field" in dry.stdout
    assert "pip install --quiet -r" in dry.stdout and "-e ." not in dry.stdout


# What `make field` reads besides the venv (the Makefile, the extras' list, the script
# that expands them): copied beside examples/ so the tour runs it as pasted.
MAKE_FILES = ["Makefile", "pyproject.toml", "tools/extra_requirements.py"]


@pytest.mark.chromium  # the tour records on Chromium too
def test_readme_and_docs_commands_work_as_pasted(tmp_path):
    import shutil

    ran = 0
    for page in PAGES:
        blocks = runnable_blocks(page.read_text())
        if not blocks:
            continue
        work = tmp_path / page.stem
        work.mkdir()
        shutil.copytree(ROOT / "examples", work / "examples")
        (work / ".venv").symlink_to(Path(sys.prefix))  # the venv `make demo` made
        shutil.copy(ROOT / ".gitignore", work / ".gitignore")
        for name in MAKE_FILES:
            (work / name).parent.mkdir(exist_ok=True)
            shutil.copy(ROOT / name, work / name)
        p = _run_as_pasted("\n".join(blocks), work, timeout=900)
        assert p.returncode == 0, f"{page.name}:\n{p.stdout[-6000:]}"
        ran += len(blocks)
        # what the commands wrote is ignored by git: a reader's checkout stays clean
        subprocess.run(["git", "init", "-q"], cwd=work, check=True, timeout=60)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                                cwd=work, capture_output=True, text=True, timeout=60).stdout
        left = [ln for ln in status.splitlines()
                if not ln.startswith(("?? examples/", "?? .gitignore", "?? .venv"))
                and ln[3:] not in MAKE_FILES]
        assert not left, (page.name, left)
    assert ran >= 2
