"""The store's one schema, for SQLite and PostgreSQL alike, and its migrations.

Types are those both read the same way: TEXT, INTEGER, BIGINT (SQLite: integer affinity) and
DOUBLE PRECISION (SQLite: real affinity); times are ISO-8601 UTC text (:func:`stamp`), which
sort as they read. No auto-increment keys: every row is keyed by what it is about (the run, the
test and its source, the file, the group), so a run written twice (a spooled batch written by a
later run, a run resumed) replaces its own rows and never doubles them.

:data:`MIGRATIONS` only ever grows: each one runs once, in order, in the transaction that records
it in ``schema_version`` (DDL is transactional on both), so two processes opening a new store
at once cannot apply one twice. A store whose version is newer than this Autopilot knows is
never touched (:class:`~tasks.history.db.HistoryUnavailable`: upgrade Autopilot).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from tasks.history.db import Connection, HistoryUnavailable


@dataclass(frozen=True)
class Migration:
    """One step of the schema: its version, what it does, its statements."""

    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "runs, test results, file verdicts, repair groups",
        (
            """CREATE TABLE runs (
                run_id TEXT PRIMARY KEY,
                flow TEXT NOT NULL,
                repo TEXT NOT NULL,
                commit_sha TEXT NOT NULL,
                started_at TEXT NOT NULL,
                finished_at TEXT NOT NULL,
                merged_into TEXT,
                tokens BIGINT NOT NULL DEFAULT 0,
                cost DOUBLE PRECISION,
                coverage DOUBLE PRECISION,
                judge_median DOUBLE PRECISION,
                accepted INTEGER NOT NULL DEFAULT 0,
                rejected INTEGER NOT NULL DEFAULT 0,
                groups_total INTEGER NOT NULL DEFAULT 0,
                fixed_autonomously INTEGER NOT NULL DEFAULT 0,
                handed_off INTEGER NOT NULL DEFAULT 0,
                by_kind TEXT NOT NULL DEFAULT '{}'
            )""",
            "CREATE INDEX runs_by_repo ON runs (repo, flow, started_at)",
            """CREATE TABLE test_results (
                run_id TEXT NOT NULL,
                repo TEXT NOT NULL,
                test_key TEXT NOT NULL,
                source TEXT NOT NULL,
                seq INTEGER NOT NULL,
                test_id TEXT NOT NULL,
                commit_sha TEXT NOT NULL,
                status TEXT NOT NULL,
                duration DOUBLE PRECISION NOT NULL DEFAULT 0,
                file TEXT,
                message TEXT,
                observed_at TEXT NOT NULL,
                PRIMARY KEY (run_id, test_key, source, seq)
            )""",
            "CREATE INDEX test_results_by_test ON test_results (repo, test_key, observed_at)",
            """CREATE TABLE file_verdicts (
                run_id TEXT NOT NULL,
                repo TEXT NOT NULL,
                source TEXT NOT NULL,
                commit_sha TEXT NOT NULL,
                kind TEXT NOT NULL,
                verdict TEXT NOT NULL,
                gate TEXT,
                reasons TEXT NOT NULL DEFAULT '[]',
                coverage_before DOUBLE PRECISION,
                coverage_after DOUBLE PRECISION,
                judge_score DOUBLE PRECISION,
                static_score DOUBLE PRECISION,
                mutation_score DOUBLE PRECISION,
                tokens BIGINT NOT NULL DEFAULT 0,
                cost DOUBLE PRECISION,
                iterations INTEGER NOT NULL DEFAULT 0,
                skip_key TEXT,
                memory_skip INTEGER NOT NULL DEFAULT 0,
                cached INTEGER NOT NULL DEFAULT 0,
                observed_at TEXT NOT NULL,
                PRIMARY KEY (run_id, source)
            )""",
            "CREATE INDEX file_verdicts_by_file ON file_verdicts (repo, source, observed_at)",
            """CREATE TABLE repair_groups (
                run_id TEXT NOT NULL,
                repo TEXT NOT NULL,
                group_id TEXT NOT NULL,
                commit_sha TEXT NOT NULL,
                signature TEXT NOT NULL,
                outcome TEXT,
                category TEXT,
                attempts INTEGER NOT NULL DEFAULT 0,
                tokens BIGINT NOT NULL DEFAULT 0,
                cost DOUBLE PRECISION,
                human TEXT,
                handed_off INTEGER NOT NULL DEFAULT 0,
                reasons TEXT NOT NULL DEFAULT '[]',
                observed_at TEXT NOT NULL,
                PRIMARY KEY (run_id, group_id)
            )""",
            "CREATE INDEX repair_groups_by_signature ON repair_groups (repo, signature)",
        ),
    ),
    Migration(
        2,
        "repair claims: the shards of one commit repair each signature once",
        (
            """CREATE TABLE repair_claims (
                repo TEXT NOT NULL,
                commit_sha TEXT NOT NULL,
                signature TEXT NOT NULL,
                run_id TEXT NOT NULL,
                claimed_at TEXT NOT NULL,
                reports TEXT NOT NULL DEFAULT '',
                PRIMARY KEY (repo, commit_sha, signature)
            )""",
            "CREATE INDEX repair_claims_by_run ON repair_claims (run_id)",
        ),
    ),
)
LATEST = MIGRATIONS[-1].version
#: The advisory lock PostgreSQL migrations hold (any constant no other program uses).
_PG_LOCK = 727_274_001


def stamp(moment: dt.datetime) -> str:
    """A time as the store keeps it: UTC, microseconds, ``Z`` (sorts as it reads)."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_stamp(text: str) -> dt.datetime:
    """A stored time back as an aware datetime."""
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)


def version_of(conn: Connection) -> int:
    """The store's schema version (0: a new, empty store)."""
    with conn.transaction():
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            "version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
    rows = conn.query("SELECT MAX(version) FROM schema_version")
    return int(rows[0][0] or 0)


def migrate(conn: Connection, upto: int = LATEST) -> int:
    """Apply every migration the store lacks, up to `upto`, each in its own transaction.

    Returns:
        The store's version afterwards.

    Raises:
        HistoryUnavailable: the store is newer than this Autopilot, or a statement failed.
    """
    current = version_of(conn)
    if current > LATEST:
        raise HistoryUnavailable(
            f"{conn.where}: schema version {current} is newer than this Autopilot's "
            f"({LATEST}): upgrade Autopilot to use it"
        )
    for migration in MIGRATIONS:
        if migration.version <= current or migration.version > upto:
            continue
        with conn.transaction():
            if conn.dialect == "postgresql":
                conn.execute("SELECT pg_advisory_xact_lock(?)", (_PG_LOCK,))
            done = conn.query(
                "SELECT 1 FROM schema_version WHERE version = ?", (migration.version,)
            )
            if done:  # another process applied it while we waited for the lock
                continue
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.description, stamp(dt.datetime.now(dt.UTC))),
            )
        current = migration.version
    return current
