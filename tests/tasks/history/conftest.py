"""The stores the history's tests run on: SQLite files, and a real PostgreSQL server from the
machine's packages (tasks/services/, on a private Unix socket), one database per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import Settings, load_settings
from tasks.history.db import sqlite_url

_COUNTER = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """One throwaway PostgreSQL server for the session (its databases are the tests')."""
    from tasks.services import ServicesSettings, running_services

    services = running_services(ServicesSettings(postgres=True))
    try:
        svc = services.__enter__()
    except Exception as exc:  # a machine without PostgreSQL: `make setup` installs it
        pytest.skip(f"PostgreSQL is not installed or does not start: {exc}")
    try:
        assert svc.postgres is not None
        yield svc.postgres
    finally:
        services.__exit__(None, None, None)


def postgres_url(server: object) -> str:
    """A new, empty database on `server`, as a postgresql:// URL."""
    name = f"history_{next(_COUNTER)}"
    server.create_database(name)  # type: ignore[attr-defined]
    return str(server.url(name))  # type: ignore[attr-defined]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store of each kind."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path / "history.sqlite3")
    return postgres_url(request.getfixturevalue("postgres_server"))


def settings_for(url: str, **history: object) -> Settings:
    """Settings whose history is at `url` (and `history`'s other fields)."""
    overrides = {"history.url": url, "history.lock_timeout_s": 1.0}
    overrides |= {f"history.{k}": v for k, v in history.items()}
    return load_settings(None, overrides)
