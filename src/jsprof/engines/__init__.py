"""Engines: each implements the RuntimeProfiler contract (engines/base.py)."""

from __future__ import annotations

from typing import Any

__all__ = ["QuickJS"]


def __getattr__(name: str) -> Any:
    # Lazy, so importing jsprof.engines never requires the C extension to be built.
    if name == "QuickJS":
        from .quickjs import QuickJS

        return QuickJS
    raise AttributeError(f"module 'jsprof.engines' has no attribute {name!r}")
