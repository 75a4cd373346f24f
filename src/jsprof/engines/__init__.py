"""Engines: each implements the RuntimeProfiler contract (engines/base.py)."""

from __future__ import annotations

# No `typing` at run time: `jsprof record --engine node` starts Node after importing this.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["QuickJS"]


def lazy_attributes(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for an engine package: each public name is imported from
    its file on first use (`where`: name -> module of the package), so importing the
    package costs nothing (`jsprof record --engine node` starts Node before it imports
    numpy)."""

    def __getattr__(name: str) -> Any:
        mod = where.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        import importlib

        return getattr(importlib.import_module(f".{mod}", package), name)

    return __getattr__


def __getattr__(name: str) -> Any:
    # Lazy, so importing jsprof.engines never requires the C extension to be built.
    if name == "QuickJS":
        from .quickjs import QuickJS

        return QuickJS
    raise AttributeError(f"module 'jsprof.engines' has no attribute {name!r}")
