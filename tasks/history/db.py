"""One connection to the store, the same on both backends: SQLite from the standard library
(no URL, or ``sqlite:///path``) or PostgreSQL through psycopg 3 (``postgresql://...``).

Statements use ``?`` placeholders on both (turned into psycopg's ``%s``). Writes happen only
inside :meth:`Connection.transaction` (SQLite: ``BEGIN IMMEDIATE``, so the write lock is taken
before anything is read; PostgreSQL: one transaction): a process killed in the middle leaves
the store as it was before the transaction began. SQLite runs in WAL mode with
``synchronous=FULL``: a committed run survives the process and the machine.

Every failure of the database (a file that is not a database, a lock held longer than the
timeout, a server that does not answer) is :class:`HistoryUnavailable`, one line naming the
store without its password.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

Dialect = Literal["sqlite", "postgresql"]
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")


class HistoryUnavailable(Exception):
    """The history store cannot be used now; the message is one line saying why."""


def shown(url: str) -> str:
    """A store's URL as messages show it: never its user or password."""
    return _USERINFO.sub("", url).split("?", 1)[0]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class Connection:
    """A DB-API connection in autocommit mode, with explicit transactions."""

    def __init__(self, raw: Any, dialect: Dialect, where: str) -> None:
        self.raw = raw
        self.dialect = dialect
        self.where = where
        self._depth = 0

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement."""
        try:
            self.raw.execute(self._sql(sql), tuple(params))
        except Exception as exc:
            raise HistoryUnavailable(f"{self.where}: {_one_line(exc)}") from exc

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for every row."""
        if not rows:
            return
        try:
            cursor = self.raw.cursor()
            cursor.executemany(self._sql(sql), [tuple(r) for r in rows])
        except Exception as exc:
            raise HistoryUnavailable(f"{self.where}: {_one_line(exc)}") from exc

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query."""
        try:
            cursor = self.raw.cursor()
            cursor.execute(self._sql(sql), tuple(params))
            return [tuple(r) for r in cursor.fetchall()]
        except Exception as exc:
            raise HistoryUnavailable(f"{self.where}: {_one_line(exc)}") from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything inside is committed together, or not at all."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        begin = "BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN"
        self.execute(begin)
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            with suppress(Exception):  # a connection gone: the server rolls back itself
                self.raw.execute("ROLLBACK")
            raise
        self._depth = 0
        self.execute("COMMIT")

    def close(self) -> None:
        """Close the connection (never raises)."""
        with suppress(Exception):
            self.raw.close()


def sqlite_path(url: str) -> Path:
    """The file of a ``sqlite:///path`` URL: ``sqlite:////abs/file`` is absolute,
    ``sqlite:///rel/file`` relative to the current directory."""
    return Path(unquote(url.removeprefix("sqlite:///"))).expanduser()


def sqlite_url(path: Path) -> str:
    """The URL of an SQLite file (absolute paths get the fourth slash)."""
    return f"sqlite:///{path}"


def connect(url: str, timeout_s: float) -> Connection:
    """Open the store at `url` (``sqlite:///path`` or ``postgresql://...``).

    Raises:
        HistoryUnavailable: the store cannot be opened (one line).
    """
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        return _sqlite(sqlite_path(url), timeout_s)
    if scheme in ("postgresql", "postgres"):
        return _postgres(url, timeout_s)
    raise HistoryUnavailable(f"{shown(url)}: not a postgresql:// or sqlite:/// URL")


def _sqlite(path: Path, timeout_s: float) -> Connection:
    where = sqlite_url(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = sqlite3.connect(
            str(path), timeout=timeout_s, isolation_level=None, check_same_thread=False
        )
    except (OSError, sqlite3.Error) as exc:
        raise HistoryUnavailable(f"{where}: {_one_line(exc)}") from exc
    conn = Connection(raw, "sqlite", where)
    try:
        # WAL: readers never wait for the writer; FULL: a commit is on disk when it returns.
        conn.query("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        conn.query("SELECT COUNT(*) FROM sqlite_master")  # a corrupted file fails here
    except HistoryUnavailable:
        conn.close()
        raise
    return conn


def _postgres(url: str, timeout_s: float) -> Connection:
    where = shown(url)
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise HistoryUnavailable(f"{where}: psycopg is not installed") from exc
    try:
        raw = psycopg.connect(url, autocommit=True, connect_timeout=max(1, round(timeout_s)))
        ms = int(timeout_s * 1000)
        raw.execute(f"SET lock_timeout = {ms}")
        raw.execute(f"SET statement_timeout = {max(ms * 6, 30_000)}")
    except Exception as exc:
        raise HistoryUnavailable(f"{where}: {_one_line(exc)}") from exc
    return Connection(raw, "postgresql", where)
