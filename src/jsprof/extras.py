"""jsprof's optional parts and the pip extra that installs each (pyproject.toml).

The core (`pip install jsprof`) records, runs and reads traces on every engine; field
profiling (`jsprof serve`, `jsprof fleet`) needs `jsprof[field]`, `fleet --engine dask`
needs `jsprof[dask]`, and OTLP profiles (`.otlp.pb`, `.otlp.json`) need `jsprof[otlp]`. A
command whose extra is missing stops before it starts, with one line naming the extra (a
`MissingExtra`, exit 2), not an ImportError from deep inside; the OTLP formats raise it
when they are read or written (formats/_otlp.py).
From a checkout (an editable install) the line says how to install the extra there
(`install_hint`). Stdlib only: `cli.py` asks before it runs serve or fleet.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import UsageError

# extra -> the top-level modules it must provide (the packages its pyproject.toml list
# installs that jsprof imports; httptools and uvloop are uvicorn's optional speed-ups).
# `dask` pulls in `field` (it queries the same store), so it checks field's modules too.
_FIELD = ("starlette", "anyio", "uvicorn", "zstandard", "pyarrow", "duckdb", "prometheus_client")
EXTRAS: dict[str, tuple[str, ...]] = {
    "field": _FIELD,
    "dask": (*_FIELD, "pandas", "dask", "distributed"),
    "otlp": ("opentelemetry",),
    "s3": (*_FIELD, "boto3"),
}


class MissingExtra(UsageError):
    """What asked for an extra that is not installed, and the pip command that installs it."""

    def __init__(self, what: str, extra: str, module: str) -> None:
        self.extra = extra
        self.module = module
        super().__init__(
            f"{what} needs the {extra} extra ({module} is not installed): "
            f"{install_hint(extra)}"
        )


def _editable_checkout() -> Path | None:
    """The checkout jsprof is installed from in editable mode (`make demo`, `pip install -e
    .`), from its PEP 610 direct_url.json; None for a wheel or sdist install."""
    import importlib.metadata
    import json
    import urllib.parse
    import urllib.request

    info: dict = {}
    try:
        # the installed one's record (a checkout's src/jsprof.egg-info, when on sys.path
        # too, has no direct_url.json)
        for dist in importlib.metadata.distributions(name="jsprof"):
            text = dist.read_text("direct_url.json")
            if text:
                info = json.loads(text)
                break
    except (ValueError, OSError):
        return None
    if not isinstance(info, dict):
        return None
    url = str(info.get("url", ""))
    if not (isinstance(info.get("dir_info"), dict) and info["dir_info"].get("editable")
            and url.startswith("file://")):
        return None
    return Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))


def install_hint(extra: str) -> str:
    """The command that installs `extra` into this jsprof. From a checkout that is not
    `pip install 'jsprof[EXTRA]'`: that fetches a jsprof from PyPI over the checkout's.
    make demo's venv takes `make field` (no second QuickJS build); another venv on the
    checkout takes `pip install -e 'CHECKOUT[EXTRA]'`."""
    checkout = _editable_checkout()
    if checkout is None:
        return f"pip install 'jsprof[{extra}]'"
    if extra == "field" and _same_path(Path(sys.prefix), checkout / ".venv"):
        return f"make field (in {checkout})"
    return f"pip install -e '{checkout}[{extra}]'"


def _same_path(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def missing_module(extra: str) -> str | None:
    """The first module of `extra` that cannot be imported, or None when all are there."""
    import importlib.util

    for module in EXTRAS[extra]:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):  # a broken or half-removed installation
            return module
    return None


def require(extra: str, what: str) -> None:
    """Raise MissingExtra unless every module of `extra` is installed (`what` names the
    command or option that needs it, e.g. `jsprof serve`)."""
    if extra not in EXTRAS:
        raise ValueError(f"no such extra: {extra!r}")
    module = missing_module(extra)
    if module is not None:
        raise MissingExtra(what, extra, module)
