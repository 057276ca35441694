"""The history store on real SQLite and a real PostgreSQL server: one schema, migrations, a run
written in one transaction (and replaced, never doubled, when written again), the questions the
rules ask, the shard claims, and a store that cannot be used is one line."""

from __future__ import annotations

import datetime as dt
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.history.db import HistoryUnavailable, connect, sqlite_url
from tasks.history.records import FileVerdict, GroupRecord, Observation, RunBatch, RunRecord
from tasks.history.schema import LATEST, migrate
from tasks.history.store import HistoryStore, open_store
from tests.tasks.history.conftest import settings_for

NOW = dt.datetime(2026, 3, 1, 2, 0, tzinfo=dt.UTC)


def batch(run_id: str, at: dt.datetime, *, commit: str = "c1", status: str = "passed") -> RunBatch:
    run = RunRecord(
        run_id=run_id,
        flow="nightly",
        repo="repo",
        commit=commit,
        started_at=at,
        finished_at=at + dt.timedelta(minutes=1),
        tokens=1200,
        cost=0.0123,
        coverage=0.61,
        judge_median=0.8,
        accepted=1,
        rejected=1,
        by_kind={"python": {"accepted": 1, "rejected": 1}},
    )
    seen = [
        Observation(
            test_key="tests/t.py::a", test_id="tests/t.py:3::a", status=status, source="baseline"
        ),
        # One test seen twice in one run (two shards' reports): both kept, numbered.
        Observation(
            test_key="tests/t.py::b", test_id="tests/t.py:9::b", status="failed", source="ci-report"
        ),
        Observation(
            test_key="tests/t.py::b",
            test_id="tests/t.py:9::b#2",
            status="passed",
            source="ci-report",
        ),
    ]
    verdict = FileVerdict(
        source="src/x.py",
        kind="python",
        verdict="rejected",
        gate="judge",
        skip_key="k1",
        reasons=["judge 0.40 < 0.70"],
        tokens=900,
        coverage_before=0.2,
        coverage_after=0.9,
    )
    group = GroupRecord(
        group_id="g-1", signature="AssertionError | x", outcome="needs_human", attempts=3
    )
    return RunBatch(run=run, observations=seen, verdicts=[verdict], groups=[group])


def test_a_run_is_written_read_back_and_replaced_never_doubled(store_url: str) -> None:
    store = open_store(settings_for(store_url))
    try:
        store.write(batch("r1", NOW))
        store.write(batch("r1", NOW, status="failed"))  # the same run again (a spooled copy)
        store.write(batch("r2", NOW + dt.timedelta(days=1), commit="c2"))

        [r1, r2] = store.runs("repo", 10)
        assert (r1.run_id, r2.run_id) == ("r1", "r2")
        assert (r1.coverage, r1.tokens, r1.cost, r1.by_kind) == (
            0.61,
            1200,
            0.0123,
            {"python": {"accepted": 1, "rejected": 1}},
        )
        results = store.results(
            "repo", ["tests/t.py::a", "tests/t.py::b"], NOW - dt.timedelta(days=1)
        )
        assert [(r.run_id, r.status) for r in results["tests/t.py::a"]] == [
            ("r2", "passed"),
            ("r1", "failed"),  # newest first; r1's first copy replaced
        ]
        assert sorted(r.test_id for r in results["tests/t.py::b"] if r.run_id == "r1") == [
            "tests/t.py:9::b",
            "tests/t.py:9::b#2",
        ]
        assert store.flipped_keys("repo", NOW - dt.timedelta(days=1)) == ["tests/t.py::b"]
        [last, _] = store.verdicts("repo", ["src/x.py"], 10)["src/x.py"]
        assert (last.run_id, last.gate, last.skip_key, last.reasons) == (
            "r2",
            "judge",
            "k1",
            ["judge 0.40 < 0.70"],
        )
        assert [
            g.outcome for g in store.groups("repo", ["AssertionError | x"], 5)["AssertionError | x"]
        ] == ["needs_human", "needs_human"]
        assert [r.test_id for r in store.results_of("repo", "tests/t.py:3::a", 10)] == [
            "tests/t.py:3::a",
            "tests/t.py:3::a",
        ]
    finally:
        store.close()


def test_shard_claims_keep_a_signature_with_the_first_run_within_the_window(store_url: str) -> None:
    store = open_store(settings_for(store_url))
    try:
        owners, first = store.claim("repo", "c1", ["s1"], "run-a", 3600, NOW, "shard-1")
        assert (owners, first) == ({"s1": "run-a"}, None)
        later = NOW + dt.timedelta(minutes=10)
        owners, first = store.claim("repo", "c1", ["s1", "s2"], "run-b", 3600, later, "shard-2")
        assert (owners, first) == ({"s1": "run-a", "s2": "run-b"}, "run-a")
        # The first run's reports again: the same run tried again, it repairs them itself.
        owners, first = store.claim("repo", "c1", ["s1"], "run-r", 3600, later, "shard-1")
        assert (owners, first) == ({"s1": "run-r"}, "run-b")
        # Another commit is another run; past the window, a signature is taken over.
        assert store.claim("repo", "c2", ["s1"], "run-c", 3600, later) == ({"s1": "run-c"}, None)
        much_later = NOW + dt.timedelta(hours=3)
        assert store.claim("repo", "c1", ["s1"], "run-d", 3600, much_later) == (
            {"s1": "run-d"},
            None,
        )
    finally:
        store.close()


def test_a_store_at_version_1_is_migrated_keeping_its_rows(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "old.sqlite3")
    conn = connect(url, 1.0)
    assert migrate(conn, upto=1) == 1
    old = HistoryStore(conn)
    with conn.transaction():  # what version 1 could write
        conn.execute(
            "INSERT INTO runs (run_id, flow, repo, commit_sha, started_at, finished_at) "
            "VALUES ('old', 'nightly', 'repo', 'c0', '2026-01-01T00:00:00.000000Z', "
            "'2026-01-01T00:01:00.000000Z')"
        )
    with pytest.raises(HistoryUnavailable, match="no such table: repair_claims"):
        old.claim("repo", "c0", ["s"], "x", 60, NOW)
    old.close()

    store = open_store(settings_for(url))
    try:
        assert store.run_ids() == ["old"]
        assert store.claim("repo", "c0", ["s"], "x", 60, NOW) == ({"s": "x"}, None)
        versions = store.conn.query("SELECT version FROM schema_version ORDER BY version")
        assert [v for (v,) in versions] == list(range(1, LATEST + 1))
    finally:
        store.close()


def test_a_store_from_a_newer_autopilot_is_never_touched(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    open_store(settings_for(sqlite_url(path))).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO schema_version VALUES (99, 'from the future', 'x')")

    with pytest.raises(HistoryUnavailable) as info:
        open_store(settings_for(sqlite_url(path)))

    assert str(info.value) == (
        f"sqlite:///{path}: schema version 99 is newer than this Autopilot's ({LATEST}): "
        "upgrade Autopilot to use it"
    )


def test_a_corrupted_store_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    path.write_bytes(b"this is not a database, it was overwritten\n" * 200)

    with pytest.raises(HistoryUnavailable) as info:
        open_store(settings_for(sqlite_url(path)))

    assert str(info.value) == f"sqlite:///{path}: file is not a database"
    assert path.read_bytes().startswith(b"this is not a database")  # never "repaired" away


HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_store_another_process_holds_is_one_line_after_the_lock_timeout(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    settings = settings_for(sqlite_url(path), lock_timeout_s=0.3)
    open_store(settings).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(HistoryUnavailable) as info:
            store = open_store(settings)
            store.write(batch("r1", NOW))
        assert str(info.value) == f"sqlite:///{path}: database is locked"
    finally:
        holder.communicate("")
    store = open_store(settings)  # the lock released: the store is whole and writable
    store.write(batch("r1", NOW))
    assert store.run_ids() == ["r1"]
    store.close()


def test_an_unreachable_postgresql_server_is_one_line_without_the_password() -> None:
    url = "postgresql://autopilot:s3cret-pass@127.0.0.1:1/history"

    with pytest.raises(HistoryUnavailable) as info:
        open_store(settings_for(url))

    line = str(info.value)
    assert line.startswith("postgresql://127.0.0.1:1/history: ") and "\n" not in line
    assert "s3cret-pass" not in line
