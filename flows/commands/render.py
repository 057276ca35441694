"""The one way a command prints a table, and progress on stderr.

In a terminal a table is a rich table whose path columns never wrap (or the plain layout when it
would not fit the terminal's width). Anywhere else (a CI log, a pipe, a file) it is plain text:
one line per row, each column as wide as its widest cell, so a path is never folded whatever the
width of the log. Rich is imported only for a terminal. Cells are plain text, never markup (file
names come from repositories and may hold "[").
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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
    plain = plain_table(title, columns, rows)
    if not is_terminal(out):
        out.write(plain)
        out.flush()
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out)
    # Borders and padding: 3 columns per cell; wider than the terminal, a path would be cut.
    if max(len(line) for line in plain.splitlines()) + 3 * len(columns) + 1 > console.width:
        out.write(plain)
        out.flush()
        return

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
    console.print(table)


def print_lines(*lines: str, stream: IO[str] | None = None) -> None:
    """Lines printed as they are (no markup, no wrapping)."""
    out = stream or sys.stdout
    for line in lines:
        out.write(line + "\n")
    out.flush()


#: Log lines on stderr: a timestamp, the level, the logger, the message.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LOG_DATEFMT = "%Y-%m-%dT%H:%M:%S"


class _LineHandler(logging.Handler):
    """Progress as lines on stderr: the run's URL, then one line per finished item."""

    def emit(self, record: logging.LogRecord) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        sys.stderr.write(f"{stamp} {record.getMessage()}\n")
        sys.stderr.flush()


class _BarHandler(logging.Handler):
    """Progress in a terminal: the URL printed once, then a rich progress bar."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=Console(file=sys.stderr),
            transient=False,
        )
        self.task: Any = None

    def emit(self, record: logging.LogRecord) -> None:
        info = getattr(record, "progress", {}) or {}
        if "done" not in info:
            self.bar.console.print(record.getMessage(), markup=False, highlight=False)
            return
        if self.task is None:
            self.bar.start()
            self.task = self.bar.add_task("files", total=info["total"])
        self.bar.update(self.task, completed=info["done"], description=str(info.get("item", "")))


@contextmanager
def progress_on_stderr() -> Iterator[None]:
    """Show the ``autopilot.progress`` records on stderr while the block runs (a bar in a
    terminal, a line per record anywhere else); stdout stays the result's."""
    logger = logging.getLogger("autopilot.progress")
    handler: logging.Handler = _BarHandler() if is_terminal(sys.stderr) else _LineHandler()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    old_propagate, logger.propagate = logger.propagate, False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = old_propagate
        if isinstance(handler, _BarHandler) and handler.task is not None:
            handler.bar.stop()
