"""``ast.parse`` safe to call from the run's threads.

CPython 3.11 keeps the AST constructor's recursion depth in state the whole interpreter shares:
two threads building trees at once (one switched out in the middle, e.g. by a garbage
collection that runs Python code) can fail with ``SystemError: AST constructor recursion depth
mismatch`` (python/cpython#106905). A nightly parses sources, tests and mutants in many file jobs
at once, and one such error cost a file its outcome. Every parse of Autopilot's takes one lock;
one that still meets the error (another library parsing in another thread) is tried once more.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse"]

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, one thread at a time.

    Raises:
        SyntaxError, ValueError: as ``ast.parse`` does.
    """
    for attempt in (1, 2):
        with _LOCK:
            try:
                return ast.parse(source, filename=filename)
            except SystemError as exc:
                if attempt == 2 or "recursion depth mismatch" not in str(exc):
                    raise
    raise AssertionError("unreachable")
