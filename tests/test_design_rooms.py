"""docs/design.md's rooms list every module of the package (issue 37: the fleet and store
rooms had drifted from the code): a module added without a word there fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "jsprof"


def test_every_module_has_a_room_in_the_design() -> None:
    doc = (ROOT / "docs" / "design.md").read_text()
    rooms = doc[doc.index("## Rooms (as built)"):doc.index("## Rules of the house")]
    missing = [
        p.relative_to(SRC).as_posix()
        for p in sorted(SRC.rglob("*"))
        if p.suffix in (".py", ".c", ".js", ".mjs")
        and p.name != "__init__.py"
        and "__pycache__" not in p.parts
        and not re.search(rf"(?<![\w-]){re.escape(p.stem)}(?![\w-])", rooms)
    ]
    assert missing == [], f"not in docs/design.md's rooms: {missing}"
