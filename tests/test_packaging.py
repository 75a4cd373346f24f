"""What a user gets from `pip install jsprof` (issue 25): the sdist and the wheel that
`python -m build` makes, the wheel installed into a fresh venv without a compiler, the core's
size, and the commands that need an extra saying which one.

One wheel and one venv per session (fixtures): `python -m build` compiles QuickJS once
(~1 min on two busy cores; nothing when `make` compiled the same C, build/objcache), the
venv installs the core's dependencies from pip's cache.
Marked `packaging` (`make test` runs it; `make test-fast` leaves it out).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import jsprof

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parent.parent
QUICKJS_SDIST = ROOT / "build" / "sdist" / "quickjs_ng-0.17.0.2.tar.gz"
BUILD_CACHE = ROOT / "build" / "objcache"  # the Makefile's
CORE_LIMIT_MB = 160
# What the core must not install: the field and dask extras' packages (extras.py).
EXTRA_MODULES = ("starlette", "uvicorn", "zstandard", "pyarrow", "duckdb", "pandas", "dask",
                 "distributed", "uvloop", "httptools")
BUSY = """function spin(n) { let x = 0; for (let i = 0; i < n; i++) x += i % 7; return x; }
function work() { let t = 0; for (let r = 0; r < 40; r++) t += spin(200000); return t; }
console.log(work() > 0 ? "done" : "no");
"""


def _clean_env() -> dict[str, str]:
    """This session's environment less what would point Python at the source tree."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path


@dataclass(frozen=True)
class Venv:
    root: Path
    site: Path
    bare_env: dict[str, str]  # PATH holds the venv's bin/ only: no cc, gcc, make, ...

    @property
    def jsprof(self) -> str:
        return str(self.root / "bin" / "jsprof")

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    out = tmp_path_factory.mktemp("dist")
    env = _clean_env()
    if QUICKJS_SDIST.is_file():  # the pinned QuickJS sdist `make` fetched: no second download
        env["JSPROF_QUICKJS_SDIST"] = str(QUICKJS_SDIST)
    # The objects `make` compiled for the source tree, taken again when the sdist's copy of
    # the C would compile to the same bytes (setup.py's JSPROF_BUILD_CACHE, tests/test_build.py):
    # the wheel is still built from the sdist, its C preprocessed there, linked there.
    env["JSPROF_BUILD_CACHE"] = str(BUILD_CACHE)
    # As `make dist` runs it: the sdist first, then the wheel built from that sdist in an
    # isolated environment, so a file the sdist forgot fails the wheel here.
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    sdists = list(out.glob("jsprof-*.tar.gz"))
    wheels = list(out.glob("jsprof-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in out.iterdir())
    return Dist(sdists[0], wheels[0])


@pytest.fixture(scope="session")
def core(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh venv with the wheel installed, core only, and no compiler reachable."""
    root = tmp_path_factory.mktemp("core") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300,
                   env=_clean_env())
    env = _clean_env()
    env.update(PATH=str(root / "bin"), CC="/bin/false", CXX="/bin/false", LDSHARED="/bin/false")
    for tool in ("cc", "gcc", "clang", "c++", "g++", "ld", "make"):
        assert shutil.which(tool, path=env["PATH"]) is None, tool
    r = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "--quiet",
                        str(dist.wheel)], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    site = next((root / "lib").glob("python3*/site-packages"))
    return Venv(root, site, env)


def _run(venv: Venv, *args: str | Path, cwd: Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([venv.jsprof, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env or venv.bare_env, timeout=300)


def _size_mb(tree: Path) -> float:
    return sum(p.lstat().st_size for p in tree.rglob("*") if p.is_file()) / 2**20


def test_build_makes_an_sdist_and_a_wheel_with_the_extensions(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    # A platform wheel carrying both built C extensions, and the JavaScript it ships.
    assert "-py3-none-any" not in dist.wheel.name, dist.wheel.name
    for ext in ("jsprof/_quickjs", "jsprof/formats/_columns"):
        assert any(n.startswith(ext + ".") and n.endswith(".so") for n in names), (ext, names)
    for data in ("jsprof/js/quickjs_profiler.js", "jsprof/js/package.json",
                 "jsprof/instrument/runtime.js",
                 "jsprof/render/flame.js", "jsprof/serve/static/"):
        assert any(n.startswith(data) for n in names), data
    assert not any(n.endswith(".c") for n in names)
    # The core's requirements carry no field package; the extras name theirs.
    core_reqs = [ln for ln in meta.splitlines()
                 if ln.startswith("Requires-Dist:") and "extra ==" not in ln]
    assert core_reqs and not any(m in ln for ln in core_reqs for m in EXTRA_MODULES), core_reqs
    for extra in ("field", "dask", "dev"):
        assert f"Provides-Extra: {extra}" in meta
    # The sdist builds the wheel (the fixture did): setup.py and our C sources, no QuickJS.
    with tarfile.open(dist.sdist) as tf:
        members = [m.split("/", 1)[1] for m in tf.getnames() if "/" in m]
    for need in ("setup.py", "pyproject.toml", "src/jsprof/engines/_quickjs/jsprof_quickjs.c",
                 "src/jsprof/engines/_quickjs/quickjs.patch", "src/jsprof/formats/_columns.c"):
        assert need in members, need
    assert not any(m.endswith("/quickjs.c") for m in members)


def test_the_core_install_is_small_and_holds_no_extra(core: Venv) -> None:
    size = _size_mb(core.site)
    assert size <= CORE_LIMIT_MB, f"site-packages is {size:.0f} MB"
    probe = ("import importlib.util, sys; "
             f"print(' '.join(m for m in {EXTRA_MODULES!r} if importlib.util.find_spec(m)))")
    r = subprocess.run([core.python, "-c", probe], capture_output=True, text=True,
                       env=core.bare_env, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr


def test_the_core_imports_the_cli_and_its_installed_extensions(core: Venv, tmp_path: Path
                                                               ) -> None:
    code = ("import jsprof.cli, jsprof, jsprof._quickjs, jsprof.formats._columns as c; "
            "print(jsprof.__file__); print(jsprof._quickjs.__file__); print(c.__file__)")
    r = subprocess.run([core.python, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path, env=core.bare_env, timeout=60)
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():  # the wheel's copies, not the source tree's
        assert Path(line).is_relative_to(core.site), line


def test_the_core_records_on_quickjs_and_reads_its_trace(core: Venv, tmp_path: Path) -> None:
    app = tmp_path / "app.js"
    app.write_text(BUSY)
    r = _run(core, "record", "-o", "t.jsprof.json", app, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n" and "wrote t.jsprof.json" in r.stderr, r.stderr
    t = jsprof.load(tmp_path / "t.jsprof.json").tracks[0]
    assert t.engine == "quickjs" and t.trace.num_samples > 0
    assert {"spin", "work"} <= {f.name for f in t.trace.frames}
    # The rest of the local tour runs on the core too: report, flame, convert, validate.
    r = _run(core, "report", "t.jsprof.json", "--top", "3", cwd=tmp_path)
    assert r.returncode == 0 and "spin" in r.stdout, r.stdout + r.stderr
    for args in (("flame", "t.jsprof.json", "-o", "f.html"),
                 ("convert", "t.jsprof.json", "t.pb.gz"),
                 ("convert", "t.jsprof.json", "t.pftrace"),
                 ("validate", "t.pftrace")):
        r = _run(core, *args, cwd=tmp_path)
        assert r.returncode == 0, (args, r.stderr)
    assert (tmp_path / "f.html").stat().st_size > 0


def test_the_core_records_on_node(core: Venv, tmp_path: Path) -> None:
    app = tmp_path / "app.js"
    app.write_text(BUSY)
    env = {**core.bare_env, "PATH": os.environ["PATH"]}  # node is found on PATH
    r = _run(core, "record", "--engine", "node", "-o", "n.jsprof.json", app, cwd=tmp_path,
             env=env)
    assert r.returncode == 0, r.stderr
    assert jsprof.load(tmp_path / "n.jsprof.json").tracks[0].engine == "node"


# jsprof.field runs in the site's own process, where only the core may be installed: a
# WSGI app behind its middleware on wsgiref, asked twice over loopback by a session.
FIELD_SERVER = """
import http.client, threading, wsgiref.simple_server
from jsprof.field import WSGIMiddleware
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/html")])
    return [b"<p>hi"]
srv = wsgiref.simple_server.make_server("127.0.0.1", 0, WSGIMiddleware(app, rate=1.0))
threading.Thread(target=srv.serve_forever, daemon=True).start()
def get(cookie=None):
    c = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=30)
    c.request("GET", "/", headers={"Cookie": cookie} if cookie else {})
    r = c.getresponse()
    return r.getheader("Document-Policy"), r.getheader("Set-Cookie")
print(get())
print(get("jsprof_sample=0"))
srv.shutdown()
"""


def test_the_core_serves_sampled_pages_through_jsprof_field(core: Venv, tmp_path: Path) -> None:
    r = subprocess.run([core.python, "-c", FIELD_SERVER], capture_output=True, text=True,
                       cwd=tmp_path, env=core.bare_env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "('js-profiling', 'jsprof_sample=1; Path=/; SameSite=Lax')",
        "(None, None)",  # the session's own decision: not sampled, nothing to set again
    ], r.stdout


@pytest.mark.parametrize(("args", "extra"), [
    (("serve", "--port", "0"), "field"),
    (("serve", "prune", "--older-than", "1d"), "field"),
    (("fleet", "top", "--app", "a"), "field"),
    (("fleet", "top", "--app", "a", "--engine", "dask"), "dask"),
])
def test_a_command_without_its_extra_names_it(core: Venv, tmp_path: Path, args: tuple[str, ...],
                                              extra: str) -> None:
    r = _run(core, *args, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and f"pip install 'jsprof[{extra}]'" in lines[0], r.stderr
    assert not (tmp_path / "jsprof-store").exists()  # stopped before it started
    # Their help still prints: the parsers need no extra.
    r = _run(core, args[0], "--help", cwd=tmp_path)
    assert r.returncode == 0 and "usage: jsprof " + args[0] in r.stdout, r.stderr
