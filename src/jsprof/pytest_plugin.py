"""jsprof's pytest plugin (registered by the `pytest11` entry point, so installing jsprof
is enough): the `jsprof` fixture, whose `budget(BASE, NEW, ...)` is `jsprof budget` from a
test. It returns the BudgetResult (`verdict`, `interval`, `changed`, `summary()`) and
writes the rounds' flame diff to the artifacts folder (`--jsprof-artifacts DIR` or the
`jsprof_artifacts` ini option; else the test's tmp_path) as TEST.budget.html::

    def test_parser_budget(jsprof):
        res = jsprof.budget("build/base/parse.js", "build/new/parse.js", max_slower=5)
        res.check()   # AssertionError with the summary when NEW is slower than allowed

The module imports nothing heavy: pytest loads it in every session of an environment
that has jsprof, whether a test uses the fixture or not.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jsprof", "jsprof performance budgets")
    group.addoption(
        "--jsprof-artifacts", metavar="DIR", default=None,
        help="where the jsprof fixture's budget() writes each test's flame diff "
        "(default: the test's tmp_path)",
    )
    parser.addini("jsprof_artifacts", "where jsprof budget flame diffs go (a folder)")


class JsprofFixture:
    """What the `jsprof` fixture gives a test."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Any) -> None:
        self._request = request
        self._tmp_path = tmp_path
        self._n = 0

    def _artifacts(self) -> str:
        config = self._request.config
        where = config.getoption("--jsprof-artifacts") or config.getini("jsprof_artifacts")
        if not where:
            return str(self._tmp_path)
        where = os.path.join(str(config.rootpath), where) if not os.path.isabs(where) else where
        os.makedirs(where, exist_ok=True)
        return where

    def budget(self, base: str | os.PathLike[str], new: str | os.PathLike[str],
               flame: bool = True, **options: Any) -> Any:
        """`jsprof budget BASE NEW` with `options` as `jsprof.budget.budget` takes them
        (engine, max_slower, max_slower_ms, min_rounds, max_rounds, time_cap, ...)."""
        from . import io
        from .budget import budget, flame_diff

        res = budget(base, new, **options)
        self._n += 1
        if flame:
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", self._request.node.name)[:120]
            suffix = "" if self._n == 1 else f".{self._n}"
            path = os.path.join(self._artifacts(), f"{stem}{suffix}.budget.html")
            io.atomic_write(path, flame_diff(res).encode("utf-8"))
            res.flame_path = path
        self._request.node.user_properties.append(("jsprof budget", res.summary().splitlines()[0]))
        return res


@pytest.fixture
def jsprof(request: pytest.FixtureRequest, tmp_path: Any) -> JsprofFixture:
    """jsprof from a test: `jsprof.budget(BASE, NEW, max_slower=5).check()`."""
    return JsprofFixture(request, tmp_path)
