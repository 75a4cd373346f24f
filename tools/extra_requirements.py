"""Print the requirements of one of jsprof's extras (pyproject.toml), one a line, its
nested extras (`jsprof[field,otlp]`) expanded: `make test` installs the dev extra's beside
the core that `make demo` installed, without building jsprof (QuickJS) a second time.

    python tools/extra_requirements.py dev > requirements.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirements(extra: str, extras: dict[str, list[str]], seen: set[str]) -> Iterator[str]:
    if extra not in extras:
        raise SystemExit(f"extra_requirements: pyproject.toml has no extra {extra!r} "
                         f"(it has {', '.join(sorted(extras))})")
    seen.add(extra)
    for req in extras[extra]:
        own = re.fullmatch(r"jsprof\[([\w,\s-]+)\]", req.strip())
        if own is None:
            yield req
            continue
        for name in own.group(1).split(","):
            if name.strip() not in seen:
                yield from requirements(name.strip(), extras, seen)


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python tools/extra_requirements.py EXTRA")
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    extras = project["optional-dependencies"]
    for req in dict.fromkeys(requirements(argv[0], extras, set())):
        print(req)


if __name__ == "__main__":
    main(sys.argv[1:])
