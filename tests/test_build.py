"""setup.py's QuickJS build steps (issue 11): the sdist's pinned sha256, a path filter when
unpacking, one line when offline, and jsprof's own C clean under -Wall -Wextra."""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load_setup() -> ModuleType:
    # imported under another name than __main__, setup.py defines its steps and builds nothing
    spec = importlib.util.spec_from_file_location("jsprof_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def one_line_exit(exc: pytest.ExceptionInfo[SystemExit]) -> str:
    msg = str(exc.value.code)
    assert msg.startswith("jsprof: ") and "\n" not in msg, msg
    return msg


def test_a_local_sdist_must_match_the_pinned_sha256(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = load_setup()
    fake = tmp_path / setup.SDIST_NAME
    fake.write_bytes(b"not the sdist")
    monkeypatch.setenv("JSPROF_QUICKJS_SDIST", str(fake))
    with pytest.raises(SystemExit) as e:
        setup._download_sdist(tmp_path / "dl")
    msg = one_line_exit(e)
    assert "sha256" in msg and setup.QUICKJS_SHA256 in msg and str(fake) in msg
    monkeypatch.setenv("JSPROF_QUICKJS_SDIST", str(tmp_path / "missing.tar.gz"))
    with pytest.raises(SystemExit) as e:
        setup._download_sdist(tmp_path / "dl")
    assert "is not a file" in one_line_exit(e)


def test_the_cached_sdist_matches_its_pin() -> None:
    setup = load_setup()
    cached = ROOT / "build" / "sdist" / setup.SDIST_NAME
    assert cached.is_file(), "build the extension first (make)"
    assert setup.sha256_of(cached) == setup.QUICKJS_SHA256


def test_offline_download_fails_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = load_setup()
    monkeypatch.delenv("JSPROF_QUICKJS_SDIST", raising=False)
    # nothing listens on port 9: pip cannot reach any index
    for k in list(os.environ):
        if k.startswith("PIP_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(SystemExit) as e:
        setup._download_sdist(tmp_path / "dl")
    msg = one_line_exit(e)
    assert "could not download" in msg and "JSPROF_QUICKJS_SDIST=" in msg


def test_unpacking_keeps_only_plain_files_inside(tmp_path: Path) -> None:
    setup = load_setup()
    prefix = f"quickjs_ng-{setup.QUICKJS_VERSION}/upstream-quickjs/"
    tarball = tmp_path / "evil.tar.gz"
    with tarfile.open(tarball, "w:gz") as tf:

        def add(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE,
                link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            info.type = kind
            info.linkname = link
            tf.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

        add(prefix + "quickjs.c", b"int main;")
        add(prefix + "sub/ok.h", b"ok")
        add(prefix + "../../escaped.c")
        add(prefix + "sub/../../../escaped2.c")
        add("/tmp/jsprof-absolute-" + str(os.getpid()))
        add(prefix + "link.c", kind=tarfile.SYMTYPE, link="/etc/passwd")
        add(prefix + "hard.c", kind=tarfile.LNKTYPE, link=prefix + "quickjs.c")
    dest = tmp_path / "out" / "upstream-quickjs"
    setup.extract_upstream(tarball, dest)
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == [
        "evil.tar.gz", "out/upstream-quickjs/quickjs.c", "out/upstream-quickjs/sub/ok.h"
    ]
    assert not Path(f"/tmp/jsprof-absolute-{os.getpid()}").exists()


def test_jsprof_c_is_clean_under_wall_wextra() -> None:
    setup = load_setup()
    qjs = setup.CACHE / "upstream-quickjs"
    assert (qjs / "quickjs.c").is_file(), "build the extension first (make)"
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc is not None, "a C compiler is needed"
    r = subprocess.run(
        [cc, "-fsyntax-only", "-Werror", *setup.OWN_CFLAGS, "-isystem", str(qjs),
         "-I", sysconfig.get_paths()["include"], str(setup.EXT_DIR / "jsprof_quickjs.c")],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "warning" not in r.stderr


def test_setup_py_builds_nothing_when_imported() -> None:
    r = subprocess.run(
        [sys.executable, "-c", "import runpy; runpy.run_path('setup.py', run_name='x')"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0 and r.stdout == "", (r.stdout, r.stderr)


def test_the_build_cache_gives_the_object_a_compile_would(tmp_path: Path) -> None:
    """JSPROF_BUILD_CACHE (issue 37): an object compiled in one copy of the tree is taken
    from the cache by another copy only when the compile there would make the same bytes
    (same compiler, flags and preprocessed source: __FILE__ and an included header's text
    count, where the copy is does not); anything else compiles."""
    setup = load_setup()
    for flags in (setup.OWN_CFLAGS, setup.QJS_CFLAGS):  # what makes objects path-free
        assert f"-ffile-prefix-map={setup.HERE}=." in flags
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc is not None, "a C compiler is needed"
    cache = tmp_path / "cache"
    trees = [tmp_path / "a" / "src", tmp_path / "b" / "deeper" / "src"]
    for t in trees:
        (t / "inc").mkdir(parents=True)
        # found through an absolute -I, as quickjs.c is: __FILE__ there is its full path
        (t / "inc" / "h.h").write_text("#define GREETING \"hi\"\n"
                                       "const char *where(void) { return __FILE__; }\n")
        (t / "m.c").write_text('#include "h.h"\n'
                               "const char *say(void) { return GREETING; }\n")
    compiled: list[str] = []

    def spawn(cmd: list[str]) -> None:
        compiled.append(cmd[cmd.index("-o") + 1])
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def compile_in(tree: Path, obj: str, cached: bool = True) -> bytes:
        # as setuptools does it: relative source, include dirs and prefix map absolute
        flags = ["-O2", "-g0", f"-ffile-prefix-map={tree}=.", "-I", str(tree / "inc"),
                 f"-I{tmp_path}/env-{tree.parent.name}/include"]
        cmd = [cc, *flags, "-c", "m.c", "-o", obj]
        cwd = os.getcwd()
        os.chdir(tree)  # setuptools compiles in the tree's root
        try:
            run = setup.caching_spawn(spawn, cache, tree) if cached else spawn
            run(cmd)
        finally:
            os.chdir(cwd)
        return (tree / obj).read_bytes()

    first = compile_in(trees[0], "m.o")
    assert compiled == ["m.o"] and len(list(cache.glob("*.o"))) == 1
    # Another copy elsewhere: from the cache, the very bytes its own compile makes.
    from_cache = compile_in(trees[1], "m.o")
    assert compiled == ["m.o"], "compiled again"
    assert from_cache == first == compile_in(trees[1], "fresh.o", cached=False)
    assert b"./inc/h.h" in from_cache and str(tmp_path).encode() not in from_cache
    # A header's text or a flag changed: compiled, not taken.
    (trees[1] / "inc" / "h.h").write_text("#define GREETING \"hello\"\n"
                                          "const char *where(void) { return __FILE__; }\n")
    compile_in(trees[1], "m.o")
    assert compiled[-1] == "m.o" and len(compiled) == 3
    assert b"hello" in (trees[1] / "m.o").read_bytes()
    assert len(list(cache.glob("*.o"))) == 2


def test_a_build_cache_it_may_only_read_still_gives_its_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hit marks the object recently used (os.utime); a cache this build may only read (a
    CI cache mounted read-only) made that raise out of the build, where a cache that
    cannot be written is meant to cost only the next build. Now the object is taken."""
    setup = load_setup()
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc is not None, "a C compiler is needed"
    cache = tmp_path / "cache"
    (tmp_path / "m.c").write_text("int f(void) { return 4; }\n")
    compiled: list[str] = []

    def spawn(cmd: list[str]) -> None:
        compiled.append(cmd[cmd.index("-o") + 1])
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def compile_to(obj: str) -> None:
        cwd = os.getcwd()
        os.chdir(tmp_path)
        try:
            setup.caching_spawn(spawn, cache, tmp_path)([cc, "-O2", "-c", "m.c", "-o", obj])
        finally:
            os.chdir(cwd)

    compile_to("a.o")

    def read_only(*_a: object, **_kw: object) -> None:
        raise PermissionError(13, "Read-only file system")

    monkeypatch.setattr(os, "utime", read_only)
    compile_to("b.o")
    assert compiled == ["a.o"], "compiled again"
    assert (tmp_path / "b.o").read_bytes() == (tmp_path / "a.o").read_bytes()
