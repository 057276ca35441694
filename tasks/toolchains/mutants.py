"""Mutations of source lines: the type and the operators every stack's mutation finder uses.

A mutation flips a comparison (``<`` / ``>=``, ``==`` / ``!=``, ...), swaps ``+`` and ``-`` or adds
one to an integer constant, on one line (``autopilot eval`` injects them as regressions).
"""

from __future__ import annotations

from pydantic import BaseModel

SWAPS = {
    "<": ">=",
    ">=": "<",
    ">": "<=",
    "<=": ">",
    "==": "!=",
    "!=": "==",
    "+": "-",
    "-": "+",
}


class Mutation(BaseModel):
    """One token replaced on one line (1-based line, 0-based column)."""

    path: str
    line: int
    col: int
    before: str
    after: str

    def describe(self) -> str:
        """`path:line: before -> after`."""
        return f"{self.path}:{self.line}: {self.before} -> {self.after}"


def apply(text: str, mutation: Mutation) -> str:
    """`text` with `mutation` applied (the token must be where the mutation says)."""
    lines = text.splitlines(keepends=True)
    line = lines[mutation.line - 1]
    end = mutation.col + len(mutation.before)
    if line[mutation.col : end] != mutation.before:
        raise ValueError(f"{mutation.describe()}: token not found at column {mutation.col}")
    lines[mutation.line - 1] = line[: mutation.col] + mutation.after + line[end:]
    return "".join(lines)


def bump(number: str) -> str:
    """An integer literal plus one."""
    return str(int(number) + 1)
