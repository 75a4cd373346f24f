"""Tables as every command prints them: the title on its own line, then the table, no
line ending in spaces (rich pads every cell; logs and diffs should not see that). Needs
only rich, so the light commands (instrument's report) can use it."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text


def plain_table() -> Table:
    """A table with no borders and bold headers, as `report` prints."""
    return Table(box=None, header_style="bold", pad_edge=False)


def print_plain_table(console: Console, title: str | None, table: Table) -> None:
    """The title on its own line (a table title wraps to the table's width), then the
    table with no trailing spaces on any line."""
    if title:
        console.print(Text(title, style="bold"), soft_wrap=True)
    with console.capture() as cap:
        console.print(table)
    text = "\n".join(line.rstrip() for line in cap.get().splitlines())
    console.file.write(text + "\n")
    console.file.flush()
