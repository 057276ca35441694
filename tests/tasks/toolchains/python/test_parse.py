"""Parsing Python from many threads at once: no spurious SystemError (python/cpython#106905).

A 300-file nightly met "AST constructor recursion depth mismatch" once, and it cost a file its
outcome: a garbage collection running Python code in the middle of a tree's construction lets
another thread's parse change the depth the interpreter shares. On CPython 3.11.7 the stress
below made plain ``ast.parse`` fail in each of three tries (1-2 of its 240 parses).
"""

from __future__ import annotations

import gc
import sys
import threading
from pathlib import Path

import pytest

from tasks.toolchains.python.parse import parse

SOURCE = (Path(__file__).resolve().parents[4] / "tasks" / "generate" / "loop.py").read_text()


class _Finalised:
    """Garbage whose collection runs Python code (a thread switch can happen there)."""

    other: _Finalised | None = None

    def __del__(self) -> None:
        sum(range(200))


def _churn() -> None:
    for _ in range(3000):
        a, b = _Finalised(), _Finalised()
        a.other, b.other = b, a


def test_threads_parsing_at_once_never_meet_the_depth_error() -> None:
    errors: list[str] = []

    def work() -> None:
        for _ in range(40):
            try:
                parse(SOURCE, "loop.py")
            except SystemError as exc:  # pragma: no cover - the failure this test catches
                errors.append(str(exc))

    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(50, 5, 5)
    sys.setswitchinterval(1e-5)
    churn = threading.Thread(target=_churn)
    workers = [threading.Thread(target=work) for _ in range(6)]
    try:
        churn.start()
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:
        churn.join()
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(interval)
    assert errors == []


def test_parse_raises_what_ast_parse_raises() -> None:
    assert parse("x = 1\n").body
    with pytest.raises(SyntaxError):
        parse("def broken(:\n", "broken.py")
    with pytest.raises((SyntaxError, ValueError)):  # null bytes: ValueError before 3.12
        parse(b"x = 1\0")
