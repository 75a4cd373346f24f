"""Engines: each implements the RuntimeProfiler contract (engines/base.py)."""

from __future__ import annotations

# No `typing` at run time: `jsprof record --engine node` starts Node after importing this.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["QuickJS"]


def __getattr__(name: str) -> Any:
    # Lazy, so importing jsprof.engines never requires the C extension to be built.
    if name == "QuickJS":
        from .quickjs import QuickJS

        return QuickJS
    raise AttributeError(f"module 'jsprof.engines' has no attribute {name!r}")
