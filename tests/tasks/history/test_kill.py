"""The store survives a kill mid-write: a real process writing runs to a real store (SQLite, and
a real PostgreSQL server) is killed with SIGKILL while a run's transaction is open, with its
rows already written (SQLite: spilled into the WAL); the store then opens, passes its integrity
check, holds every run whose commit returned, none of the killed one, and takes new runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tasks.history.store import open_store
from tests.paths import REPO_ROOT
from tests.tasks.history.conftest import settings_for
from tests.tasks.history.test_store import NOW, batch

COMMITTED = 3
ROWS = 4000

WRITER = f"""
import datetime as dt, sys
from tasks.core.config import load_settings
from tasks.history.records import Observation
from tasks.history.store import open_store
from tests.tasks.history.test_store import NOW, batch

settings = load_settings(None, {{"history.url": sys.argv[1]}})
store = open_store(settings)
if store.conn.dialect == "sqlite":
    store.conn.execute("PRAGMA cache_size=8")  # uncommitted pages spill to the WAL
for n in range({COMMITTED} + 1):
    b = batch(f"run-{{n}}", NOW + dt.timedelta(hours=n))
    b.observations += [
        Observation(test_key=f"tests/t.py::t{{i}}", test_id=f"t{{i}}", status="passed",
                    source="baseline", message="x" * 200)
        for i in range({ROWS})
    ]
    if n == {COMMITTED}:  # the last run: stop in the middle of its transaction
        real = store.conn.executemany
        def paused(sql, rows):
            real(sql, rows)
            if "test_results" in sql:
                print("mid-write", flush=True)
                sys.stdin.read()  # killed here, its rows written, not committed
        store.conn.executemany = paused
    store.write(b)
    print(f"committed run-{{n}}", flush=True)
"""


def test_the_store_survives_a_kill_mid_write(store_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, store_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )
    assert writer.stdout is not None
    lines = []
    try:
        for line in writer.stdout:
            lines.append(line.strip())
            if line.strip() == "mid-write":
                break
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    assert lines == [*(f"committed run-{n}" for n in range(COMMITTED)), "mid-write"]

    store = open_store(settings_for(store_url))
    try:
        if store.conn.dialect == "sqlite":
            assert store.conn.query("PRAGMA integrity_check") == [("ok",)]
        committed = [f"run-{n}" for n in range(COMMITTED)]
        assert store.run_ids() == committed
        rows = store.conn.query("SELECT run_id, COUNT(*) FROM test_results GROUP BY run_id")
        assert dict(rows) == {run: ROWS + 3 for run in committed}  # every row, none of the killed
        store.write(batch("after", NOW))
        assert sorted(store.run_ids()) == sorted([*committed, "after"])
    finally:
        store.close()
