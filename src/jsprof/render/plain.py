"""Tables as every command prints them: the title on its own line, then the table, no
line ending in spaces (rich pads every cell; logs and diffs should not see that). Needs
only rich, so the light commands (instrument's report) can use it.

The text renderers build their output with `TextOut` (what the console would print, as a
string): `render(data) -> str`, which `base.emit` then writes to the console's file."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .base import Renderer


def plain_table() -> Table:
    """A table with no borders and bold headers, as `report` prints."""
    return Table(box=None, header_style="bold", pad_edge=False)


class TextOut:
    """What `console` would print, collected as one string: each piece rendered by the
    console (its width, colours, terminal or not) as printing it would."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._parts: list[str] = []

    def print(self, *objects: Any, **kwargs: Any) -> None:
        with self.console.capture() as cap:
            self.console.print(*objects, **kwargs)
        self._parts.append(cap.get())

    def table(self, title: str | None, table: Table) -> None:
        """The title on its own line (a table title wraps to the table's width), then the
        table with no trailing spaces on any line."""
        if title:
            self.print(Text(title, style="bold"), soft_wrap=True)
        # The renderers fit the cells to the output's width already (rows.output_width);
        # where they leave them whole (`--wide`, or a name past PIPED_WIDTH in a pipe),
        # rich would crop each row at the console's width: the table gets its own width.
        console = self.console
        need = Measurement.get(console, console.options.update(width=1 << 24), table).maximum
        width = console.width
        try:
            if need > width:
                console.width = need
            with console.capture() as cap:
                console.print(table)
        finally:
            console.width = width
        self._parts.append("\n".join(line.rstrip() for line in cap.get().splitlines()) + "\n")

    def text(self) -> str:
        return "".join(self._parts)


class TextRenderer(Renderer):
    """A renderer of text for a rich console: `draw(out, data)` prints into a TextOut."""

    kind = "text"
    extension = ".txt"

    def __init__(self, console: Console) -> None:
        self.console = console

    def draw(self, out: TextOut, data: Any) -> None:
        raise NotImplementedError

    def render(self, data: Any) -> str:
        out = TextOut(self.console)
        self.draw(out, data)
        return out.text()
