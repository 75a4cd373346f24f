"""Build the C extensions `jsprof._quickjs` and `jsprof.formats._columns` (metadata lives in
pyproject.toml).

QuickJS-ng's source is never committed: at build time we fetch the pinned PyPI sdist
with pip (the only network jsprof's build needs), unpack `upstream-quickjs/`, apply our
small patch (src/jsprof/engines/_quickjs/quickjs.patch) and compile it -O2 together with
the sampler. The unpacked, patched tree is cached under build/ so rebuilds don't
re-download. Set JSPROF_QUICKJS_SDIST=/path/to/quickjs_ng-0.17.0.2.tar.gz to build offline,
and JSPROF_BUILD_CACHE=DIR to keep the compiled objects for the next build (docs/engines.md).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

QUICKJS_VERSION = "0.17.0.2"
# sha256 of quickjs_ng-0.17.0.2.tar.gz as PyPI serves it: a local or cached sdist, or one
# pip fetched, is used only when it matches.
QUICKJS_SHA256 = "43d2e48272208721a7aaea8e3f02d4b9318f12ef20cc4f5421b59d9a470706ef"
SDIST_NAME = f"quickjs_ng-{QUICKJS_VERSION}.tar.gz"
HERE = Path(__file__).resolve().parent
EXT_DIR = HERE / "src" / "jsprof" / "engines" / "_quickjs"
PATCH = EXT_DIR / "quickjs.patch"
CACHE = HERE / "build" / f"quickjs-ng-{QUICKJS_VERSION}"
# quickjs-libc.c is not in the sdist and not needed: our host (console, timers, module
# loader) is in jsprof_quickjs.c.
QJS_SOURCES = ["dtoa.c", "libregexp.c", "libunicode.c"]
OFFLINE_HINT = (
    f"download {SDIST_NAME} (sha256 {QUICKJS_SHA256}) from "
    f"https://pypi.org/project/quickjs-ng/{QUICKJS_VERSION}/#files and set "
    "JSPROF_QUICKJS_SDIST=/path/to/it"
)
# jsprof's own C is built with warnings on; QuickJS's sources (compiled separately, and
# quickjs.c found through -isystem when jsprof_quickjs.c includes it) with warnings off.
# No debug info unless CFLAGS asks for it (Python's own flags carry -g): it is a fifth of the
# CPU time of compiling quickjs.c (26 s against 32 s), most of a first `make demo`.
NO_DEBUG = [] if "-g" in os.environ.get("CFLAGS", "").split() else ["-g0"]
# Paths inside the source tree leave the objects as relative ones (__FILE__, debug info):
# the same sources make the same objects wherever they are unpacked, which the build cache
# below relies on.
PREFIX_MAP = [f"-ffile-prefix-map={HERE}=."]
OWN_CFLAGS = ["-O2", "-std=gnu11", "-D_GNU_SOURCE", "-Wall", "-Wextra", *NO_DEBUG, *PREFIX_MAP]
QJS_CFLAGS = ["-O2", "-std=gnu11", "-D_GNU_SOURCE", "-w", *NO_DEBUG, *PREFIX_MAP]
# JSPROF_BUILD_CACHE=DIR: compiled objects kept in DIR by what made them (`make` sets it to
# build/objcache), so a second build of the same C, from another copy of the tree (the
# wheel `python -m build` makes from the sdist, tests/test_packaging.py), compiles nothing:
# quickjs.c is ~30 s of CPU, minutes on a loaded machine.
BUILD_CACHE_ENV = "JSPROF_BUILD_CACHE"
BUILD_CACHE_KEEP = 24  # objects kept in it, the newest


class BuildError(SystemExit):
    """One line on stderr and exit status 1: setuptools and pip print no traceback."""

    def __init__(self, message: str) -> None:
        super().__init__(f"jsprof: {message}")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sdist(path: Path, origin: str) -> Path:
    """`path` if it is the pinned sdist, else a BuildError naming it."""
    if not path.is_file():
        raise BuildError(f"{origin} {path} is not a file; {OFFLINE_HINT}")
    digest = sha256_of(path)
    if digest != QUICKJS_SHA256:
        raise BuildError(
            f"{origin} {path} has sha256 {digest}, not the pinned {QUICKJS_SHA256} of "
            f"{SDIST_NAME}; {OFFLINE_HINT}"
        )
    return path


def _download_sdist(dest: Path) -> Path:
    local = os.environ.get("JSPROF_QUICKJS_SDIST")
    if local:
        return check_sdist(Path(local), "JSPROF_QUICKJS_SDIST")
    cached = dest / SDIST_NAME
    if cached.is_file() and sha256_of(cached) == QUICKJS_SHA256:
        return cached
    dest.mkdir(parents=True, exist_ok=True)
    cached.unlink(missing_ok=True)  # a damaged or foreign file is fetched again
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           f"quickjs-ng=={QUICKJS_VERSION}", "-d", str(dest)]
    print("jsprof: downloading the QuickJS-ng sdist:", " ".join(cmd), flush=True)
    # pip's isolated build environment hides the interpreter's own site-packages (and so
    # pip itself) through PYTHONPATH/PYTHONNOUSERSITE; the download runs outside it.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE")}
    reason = ""
    for c in (cmd, cmd + ["--no-build-isolation"]):
        try:
            r = subprocess.run(c, env=env, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            reason = str(e)
            continue
        if r.returncode == 0 and cached.is_file():
            return check_sdist(cached, "the downloaded")
        lines = [x for x in (r.stderr or r.stdout).splitlines() if x.strip()]
        reason = lines[-1].strip() if lines else f"pip exited with {r.returncode}"
    raise BuildError(f"could not download {SDIST_NAME} from PyPI ({reason}); {OFFLINE_HINT}")


def safe_member_path(name: str, prefix: str) -> PurePosixPath | None:
    """The path of an sdist member below `prefix`, or None for anything that is not
    plainly inside it (absolute, `..`, another directory)."""
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or not name.startswith(prefix):
        return None
    rel = PurePosixPath(name[len(prefix):])
    if not rel.parts or rel.is_absolute() or ".." in rel.parts:
        return None
    return rel


def extract_upstream(tarball: Path, dest: Path) -> None:
    """Unpack the sdist's upstream-quickjs/ regular files into `dest` (nothing else: no
    links, devices, absolute paths or `..`)."""
    prefix = f"quickjs_ng-{QUICKJS_VERSION}/upstream-quickjs/"
    try:
        with tarfile.open(tarball) as tf:
            for m in tf.getmembers():
                rel = safe_member_path(m.name, prefix)
                if rel is None or not m.isfile():
                    continue
                out = dest.joinpath(*rel.parts)
                if dest.resolve() not in out.resolve().parents:
                    continue
                data = tf.extractfile(m)
                if data is None:
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data.read())
    except (tarfile.TarError, OSError, EOFError) as e:
        raise BuildError(f"cannot unpack {tarball} ({e}); {OFFLINE_HINT}") from None
    if not (dest / "quickjs.c").is_file():
        raise BuildError(f"{tarball} holds no upstream-quickjs/quickjs.c; {OFFLINE_HINT}")


def apply_unified_patch(text: str, patch: str) -> str:
    """Apply a unified diff to one file's text by exact context match (no `patch` binary
    needed on the build machine)."""
    hunks: list[tuple[list[str], list[str]]] = []
    cur: tuple[list[str], list[str]] | None = None
    for line in patch.splitlines():
        if line.startswith("@@"):
            cur = ([], [])
            hunks.append(cur)
        elif cur is None or line.startswith(("---", "+++")):
            continue
        elif line.startswith("-"):
            cur[0].append(line[1:])
        elif line.startswith("+"):
            cur[1].append(line[1:])
        else:
            body = line[1:] if line.startswith(" ") else line
            cur[0].append(body)
            cur[1].append(body)
    # Hunks are in file order: each one is searched after the previous one, so repeated
    # context (the if_true/if_false cases look alike) lands where the diff meant it.
    pos = 0
    for old, new in hunks:
        old_s, new_s = "\n".join(old) + "\n", "\n".join(new) + "\n"
        i = text.find(old_s, pos)
        if i < 0:
            raise RuntimeError(f"jsprof: quickjs.patch hunk does not apply:\n{old_s[:300]}")
        text = text[:i] + new_s + text[i + len(old_s):]
        pos = i + len(new_s)
    return text


def prepare_quickjs() -> Path:
    """Return the directory holding the patched upstream-quickjs sources."""
    src = CACHE / "upstream-quickjs"
    stamp = CACHE / ".patched"
    if stamp.exists() and stamp.read_text() == PATCH.read_text():
        return src
    tarball = _download_sdist(HERE / "build" / "sdist")
    tmp = CACHE.with_suffix(".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    extract_upstream(tarball, tmp / "upstream-quickjs")
    qc = tmp / "upstream-quickjs" / "quickjs.c"
    qc.write_text(apply_unified_patch(qc.read_text(), PATCH.read_text()))
    if CACHE.exists():
        shutil.rmtree(CACHE)
    tmp.rename(CACHE)
    stamp.write_text(PATCH.read_text())
    return src


def _newer(sources: list[str], target: Path) -> bool:
    """Whether `target` is missing or older than any of `sources` (distutils' newer_group)."""
    if not target.exists():
        return True
    built = target.stat().st_mtime
    return any(Path(s).stat().st_mtime > built for s in sources if Path(s).exists())


def _rel(p: Path) -> str:
    return os.path.relpath(p, HERE)


def object_key(cmd: list[str], root: Path, compiler_id: str) -> str | None:
    """What decides the object `cmd` (a `cc ... -c SRC -o OBJ ...` line) makes: the compiler,
    its flags less the include paths and the output, and the preprocessed source (every
    header's text; paths in `root` written as <root>). None when it does not preprocess:
    the real compile then says why."""
    i = cmd.index("-o")
    pre = [("-E" if a == "-c" else a) for a in cmd[:i] + cmd[i + 2:]]
    try:
        r = subprocess.run(pre, capture_output=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    mark = str(root)
    flags, skip = [], False
    for a in cmd[1:i] + cmd[i + 2:]:
        if skip:
            skip = False
        elif a in ("-I", "-isystem", "-iquote"):
            skip = True  # what they found is in the preprocessed text
        elif not a.startswith(("-I", "-isystem", "-iquote")):
            flags.append(a.replace(mark, "<root>"))
    h = hashlib.sha256(compiler_id.encode())
    h.update("\0".join(flags).encode())
    h.update(r.stdout.replace(mark.encode(), b"<root>"))
    return h.hexdigest()


def caching_spawn(spawn: object, cache: Path, root: Path) -> object:
    """`spawn` (a compiler's) that takes a compile's object from `cache` when one was made
    by the same compiler from the same preprocessed source and flags, and keeps every object
    it compiles there. Links and anything else run as they are."""
    ids: dict[str, str] = {}

    def compiler_id(cc: str) -> str:
        if cc not in ids:
            try:
                r = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
                ids[cc] = f"{shutil.which(cc)}\n{r.stdout}"
            except (OSError, subprocess.TimeoutExpired):
                ids[cc] = ""
        return ids[cc]

    def run(cmd: list[str], **kw: object) -> object:
        cmd = list(cmd)
        if "-c" not in cmd or cmd.count("-o") != 1 or cmd.index("-o") == len(cmd) - 1:
            return spawn(cmd, **kw)
        cid = compiler_id(cmd[0])
        key = object_key(cmd, root, cid) if cid else None
        if key is None:
            return spawn(cmd, **kw)
        obj = Path(cmd[cmd.index("-o") + 1])
        kept = cache / f"{key}.o"
        if kept.is_file():
            try:
                obj.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(kept, obj)
            except OSError:
                pass  # trimmed by another build meanwhile: compiled below
            else:
                try:
                    os.utime(kept)  # recently used: kept when the cache is trimmed
                except OSError:
                    pass  # a cache this build may only read (CI's, mounted read-only)
                print(f"jsprof: {_rel(obj)} from the build cache ({cache})", flush=True)
                return None
        out = spawn(cmd, **kw)
        try:
            cache.mkdir(parents=True, exist_ok=True)
            tmp = cache / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
            shutil.copyfile(obj, tmp)
            os.replace(tmp, kept)  # whole or not at all, if two builds store it at once
            objs = sorted(cache.glob("*.o"), key=lambda p: p.stat().st_mtime, reverse=True)
            for old in objs[BUILD_CACHE_KEEP:]:
                old.unlink(missing_ok=True)
        except OSError as e:  # a cache that cannot be written costs only the next build
            print(f"jsprof: build cache {cache} not written: {e}", flush=True)
        return out

    return run


class BuildQuickJS(build_ext):
    def build_extensions(self) -> None:
        cache = os.environ.get(BUILD_CACHE_ENV)
        if cache:
            self.compiler.spawn = caching_spawn(self.compiler.spawn, Path(cache), HERE)
        super().build_extensions()

    def run(self) -> None:
        qjs = prepare_quickjs()
        for ext in self.extensions:
            if ext.name == "jsprof._quickjs":
                # setuptools wants sources relative to setup.py
                ext.sources = [_rel(EXT_DIR / "jsprof_quickjs.c")]
                ext.include_dirs = [str(EXT_DIR)]
                # quickjs.c is #included by jsprof_quickjs.c: found as a system header,
                # so its own warnings stay quiet while ours are on; rebuild when it changes.
                ext.extra_compile_args = OWN_CFLAGS + ["-isystem", str(qjs)]
                ext.depends = [str(qjs / "quickjs.c"), str(PATCH)]
                self._qjs_sources = [_rel(qjs / s) for s in QJS_SOURCES]
        super().run()

    def build_extension(self, ext: Extension) -> None:
        if ext.name != "jsprof._quickjs":
            super().build_extension(ext)
            return
        ext_path = self.get_ext_fullpath(ext.name)
        if not (self.force or _newer([*ext.sources, *ext.depends], Path(ext_path))):
            return
        # jsprof_quickjs.c #includes quickjs.c: the one long compile (~30 s of CPU, most of a
        # first `make demo`). QuickJS's other sources (apart, their warnings off) compile
        # beside it rather than after it, then one link: setuptools' own object list.
        macros = [*ext.define_macros, *((u,) for u in ext.undef_macros)]
        jobs = [(ext.sources, {"macros": macros, "include_dirs": ext.include_dirs,
                               "debug": self.debug, "extra_postargs": ext.extra_compile_args})]
        jobs += [([src], {"extra_postargs": QJS_CFLAGS}) for src in self._qjs_sources]

        def compile_job(job: tuple[list[str], dict]) -> list[str]:
            return self.compiler.compile(job[0], output_dir=self.build_temp,
                                         depends=ext.depends, **job[1])

        with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
            objects = [o for objs in pool.map(compile_job, jobs) for o in objs]
        # the link alone: setuptools compiles no source of its own (sources emptied) and
        # links every object (force: the objects are new whatever the .so's date)
        sources, force = ext.sources, self.force
        ext.sources, ext.extra_objects, self.force = [], objects, True
        try:
            super().build_extension(ext)
        finally:
            ext.sources, self.force = sources, force


if __name__ == "__main__":
    setup(
        ext_modules=[
            Extension(
                "jsprof._quickjs",
                sources=["src/jsprof/engines/_quickjs/jsprof_quickjs.c"],
                extra_compile_args=OWN_CFLAGS,
                extra_link_args=["-lpthread", "-lm"],
            ),
            # JSON text to and from numpy columns (the big per-sample arrays): our own C.
            Extension(
                "jsprof.formats._columns",
                sources=["src/jsprof/formats/_columns.c"],
                extra_compile_args=OWN_CFLAGS,
                extra_link_args=["-lpthread", "-lm"],
            ),
        ],
        cmdclass={"build_ext": BuildQuickJS},
    )
