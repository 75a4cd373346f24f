"""Build the `jsprof._quickjs` extension (metadata lives in pyproject.toml).

QuickJS-ng's source is never committed: at build time we fetch the pinned PyPI sdist
with pip (the only network jsprof's build needs), unpack `upstream-quickjs/`, apply our
small patch (src/jsprof/engines/_quickjs/quickjs.patch) and compile it -O2 together with
the sampler. The unpacked, patched tree is cached under build/ so rebuilds don't
re-download. Set JSPROF_QUICKJS_SDIST=/path/to/quickjs_ng-0.17.0.2.tar.gz to build offline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

QUICKJS_VERSION = "0.17.0.2"
HERE = Path(__file__).resolve().parent
EXT_DIR = HERE / "src" / "jsprof" / "engines" / "_quickjs"
PATCH = EXT_DIR / "quickjs.patch"
CACHE = HERE / "build" / f"quickjs-ng-{QUICKJS_VERSION}"
# quickjs-libc.c is not in the sdist and not needed: our host (console, timers, module
# loader) is in jsprof_quickjs.c.
QJS_SOURCES = ["dtoa.c", "libregexp.c", "libunicode.c"]


def _download_sdist(dest: Path) -> Path:
    local = os.environ.get("JSPROF_QUICKJS_SDIST")
    if local:
        return Path(local)
    found = sorted(dest.glob(f"quickjs_ng-{QUICKJS_VERSION}.tar.gz"))
    if found:
        return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--no-build-isolation", f"quickjs-ng=={QUICKJS_VERSION}", "-d", str(dest)]
    print("jsprof: downloading QuickJS-ng sdist:", " ".join(cmd), flush=True)
    # pip's isolated build environment hides the interpreter's own site-packages (and so
    # pip itself) through PYTHONPATH/PYTHONNOUSERSITE; the download runs outside it.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE")}
    attempts = [([c for c in cmd if c != "--no-build-isolation"], env), (cmd, env)]
    for i, (c, e) in enumerate(attempts):
        try:
            subprocess.run(c, check=True, env=e)
            break
        except subprocess.CalledProcessError:
            if i == len(attempts) - 1:
                raise
    found = sorted(dest.glob(f"quickjs_ng-{QUICKJS_VERSION}.tar.gz"))
    if not found:
        raise RuntimeError(f"jsprof: pip did not produce quickjs_ng-{QUICKJS_VERSION}.tar.gz")
    return found[0]


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
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    prefix = f"quickjs_ng-{QUICKJS_VERSION}/upstream-quickjs/"
    with tarfile.open(tarball) as tf:
        for m in tf.getmembers():
            if m.name.startswith(prefix) and m.isfile():
                data = tf.extractfile(m)
                assert data is not None
                out = tmp / "upstream-quickjs" / m.name[len(prefix):]
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(data.read())
    qc = tmp / "upstream-quickjs" / "quickjs.c"
    qc.write_text(apply_unified_patch(qc.read_text(), PATCH.read_text()))
    if CACHE.exists():
        import shutil

        shutil.rmtree(CACHE)
    tmp.rename(CACHE)
    stamp.write_text(PATCH.read_text())
    return src


def _rel(p: Path) -> str:
    return os.path.relpath(p, HERE)


class BuildQuickJS(build_ext):
    def run(self) -> None:
        qjs = prepare_quickjs()
        for ext in self.extensions:
            if ext.name == "jsprof._quickjs":
                # setuptools wants sources relative to setup.py
                ext.sources = [_rel(EXT_DIR / "jsprof_quickjs.c")] + [
                    _rel(qjs / s) for s in QJS_SOURCES
                ]
                ext.include_dirs = [str(qjs), str(EXT_DIR)]
                # quickjs.c is #included by jsprof_quickjs.c; rebuild when it changes.
                ext.depends = [str(qjs / "quickjs.c"), str(PATCH)]
        super().run()


ext = Extension(
    "jsprof._quickjs",
    sources=["src/jsprof/engines/_quickjs/jsprof_quickjs.c"],
    extra_compile_args=["-O2", "-std=gnu11", "-D_GNU_SOURCE", "-w"],
    extra_link_args=["-lpthread", "-lm"],
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildQuickJS})
