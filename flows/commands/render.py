"""The one way a command prints a table, and progress on stderr.

In a terminal a table is a rich table whose path columns never wrap. Anywhere else (a CI log,
a pipe, a file) it is plain text: one line per row, each column as wide as its widest cell, so a
path is never folded whatever the width of the log. Rich is imported only for a terminal.
Cells are plain text, never markup (file names come from repositories and may hold "[").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any


@dataclass
class Column:
    """A column: its short header; `path` columns never wrap, `style` maps a cell to a colour."""

    header: str
    path: bool = False
    justify: str = "left"
    style: dict[str, str] = field(default_factory=dict)


def is_terminal(stream: IO[str]) -> bool:
    """Whether `stream` is a terminal (``TERM=dumb`` counts as none)."""
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):
        return False


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def plain_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[Any]]) -> str:
    """The table as plain lines: title, header, rows; widths from the content, nothing folded."""
    cells = [[_cell(v).replace("\n", ", ") for v in row] for row in rows]
    widths = [len(c.header) for c in columns]
    for row in cells:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if c.justify == "right" else v.ljust(w)
            for c, v, w in zip(columns, values, widths, strict=True)
        ]
        return "  ".join(parts).rstrip()

    out = [title] if title else []
    out.append(line([c.header for c in columns]))
    out.extend(line(row) for row in cells)
    return "\n".join(out) + "\n"


def print_table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    stream: IO[str] | None = None,
) -> None:
    """Print a table on `stream` (stdout): rich in a terminal, :func:`plain_table` elsewhere."""
    out = stream or sys.stdout
    if not is_terminal(out):
        out.write(plain_table(title, columns, rows))
        out.flush()
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title or None)
    for c in columns:
        table.add_column(
            c.header,
            no_wrap=c.path,
            overflow="fold",
            justify="right" if c.justify == "right" else "left",
        )
    for row in rows:
        table.add_row(
            *(
                Text(str(v) if isinstance(v, str) else _cell(v), c.style.get(_cell(v), ""))
                for c, v in zip(columns, row, strict=True)
            )
        )
    Console(file=out).print(table)


def print_lines(*lines: str, stream: IO[str] | None = None) -> None:
    """Lines printed as they are (no markup, no wrapping)."""
    out = stream or sys.stdout
    for line in lines:
        out.write(line + "\n")
    out.flush()
