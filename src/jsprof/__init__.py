"""jsprof: profile JavaScript on real engines; speaks the W3C JS Self-Profiling trace format.

The public names resolve lazily (module ``__getattr__``): ``import jsprof`` and
``jsprof --help`` load neither numpy nor any format, engine, analysis or render module.
"""

from __future__ import annotations

import importlib
import sys
import types

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up)

__version__ = "0.1.0"

# public name -> (module, attribute); None as attribute means the module itself.
_LAZY: dict[str, tuple[str, str | None]] = {
    "engines": ("jsprof.engines", None),
    "flame": ("jsprof.views", "flame"),
    "load": ("jsprof.io", "load"),
    "save": ("jsprof.io", "save"),
    "record": ("jsprof.record", "record"),
    "record_command": ("jsprof.record", "record_command"),
    "report": ("jsprof.views", "report"),
    "ProfilerFrame": ("jsprof.trace", "ProfilerFrame"),
    "ProfilerTrace": ("jsprof.trace", "ProfilerTrace"),
    "Recording": ("jsprof.trace", "Recording"),
    "TraceBuilder": ("jsprof.trace", "TraceBuilder"),
    "Track": ("jsprof.trace", "Track"),
    "views": ("jsprof.views", None),  # INLINE_LIMIT: how big a viewer a notebook shows inline
}

__all__ = [
    "engines",
    "flame",
    "load",
    "record",
    "record_command",
    "report",
    "save",
    "ProfilerFrame",
    "ProfilerTrace",
    "Recording",
    "TraceBuilder",
    "Track",
]

if TYPE_CHECKING:
    from typing import Any

    from . import engines
    from .io import load, save
    from .record import record, record_command
    from .trace import ProfilerFrame, ProfilerTrace, Recording, TraceBuilder, Track
    from .views import flame, report


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'jsprof' has no attribute {name!r}") from None
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # Importing the submodule jsprof.record would otherwise rebind `jsprof.record` (the
        # function, as before the names were lazy) to the module.
        if name == "record" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def _recording_html(rec: Any) -> str:
    from .views import inline_viewer

    return inline_viewer(rec)


def _show_in_ipython() -> bool:
    """Jupyter (any IPython shell) shows a Recording as the flame graph viewer, inline:
    `views.inline_viewer` registered with the shell's HTML formatter by the class's module
    and name, so nothing is imported until a Recording is shown. Done when jsprof is
    imported inside IPython (a kernel runs IPython before any cell); call it again after
    starting a shell in a process that imported jsprof first. False outside IPython.
    (The model, trace.py, has no `_repr_html_`: it would import the views above it.)"""
    ipython = sys.modules.get("IPython")  # never imported here: only a running shell counts
    # IPython may be in sys.modules half-imported (jsprof imported while IPython's own
    # package imports, e.g. from a startup hook): no `get_ipython` yet means no shell yet.
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not isinstance(formatters, dict) or "text/html" not in formatters:
        return False  # no shell, or one that shows no HTML (a terminal-only embedding)
    html = formatters["text/html"]
    html.for_type_by_name("jsprof.trace", "Recording", _recording_html)
    return True


_show_in_ipython()
