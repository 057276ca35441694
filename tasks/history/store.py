"""The history store: one run's records written in one transaction, and the questions the rules
and the operator's view ask.

:func:`open_store` opens (and migrates) the store the settings name: ``history.url``, else SQLite
at ``<home>/history.sqlite3``. Every method raises only
:class:`~tasks.history.db.HistoryUnavailable`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

from tasks.core.config import Settings
from tasks.history.db import Connection, HistoryUnavailable, connect, sqlite_url
from tasks.history.records import (
    FAILING,
    GroupRecord,
    RunBatch,
    RunRecord,
    SeenGroup,
    SeenResult,
    SeenVerdict,
)
from tasks.history.schema import migrate, parse_stamp, stamp

__all__ = ["HistoryStore", "HistoryUnavailable", "open_store", "store_url"]

#: Rows read per question at most, so a store of years stays quick to ask.
MAX_ROWS = 5_000
_RUN_COLUMNS = (
    "run_id, flow, repo, commit_sha, started_at, finished_at, merged_into, tokens, cost, "
    "coverage, judge_median, accepted, rejected, groups_total, fixed_autonomously, handed_off, "
    "by_kind"
)
_VERDICT_COLUMNS = (
    "source, kind, verdict, gate, reasons, coverage_before, coverage_after, judge_score, "
    "static_score, mutation_score, tokens, cost, iterations, skip_key, memory_skip, cached"
)
_GROUP_COLUMNS = (
    "group_id, signature, outcome, category, attempts, tokens, cost, human, handed_off, reasons"
)


def store_url(settings: Settings) -> str:
    """The store's URL: ``history.url``, else SQLite at ``<home>/history.sqlite3``."""
    url = settings.history.url
    if url is not None:
        return url.get_secret_value()
    return sqlite_url(settings.home / "history.sqlite3")


def open_store(settings: Settings) -> HistoryStore:
    """The store of `settings`, migrated to the latest schema.

    Raises:
        HistoryUnavailable: it cannot be used (one line).
    """
    conn = connect(store_url(settings), settings.history.lock_timeout_s)
    try:
        migrate(conn)
    except HistoryUnavailable:
        conn.close()
        raise
    return HistoryStore(conn)


def _placeholders(n: int) -> str:
    return ", ".join("?" * n)


class HistoryStore:
    """Reads and writes of one open store."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @property
    def where(self) -> str:
        """The store as messages name it (no password)."""
        return self.conn.where

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    # -- writing ---------------------------------------------------------------------------

    def write(self, batch: RunBatch) -> None:
        """Write one run's records in one transaction; a run written before is replaced."""
        run = batch.run
        at = stamp(run.finished_at)
        with self.conn.transaction():
            for table in ("test_results", "file_verdicts", "repair_groups", "runs"):
                self.conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run.run_id,))
            self.conn.execute(
                f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES ({_placeholders(17)})", _run_row(run)
            )
            seq: dict[tuple[str, str], int] = {}
            rows = []
            for o in batch.observations:
                n = seq[(o.test_key, o.source)] = seq.get((o.test_key, o.source), 0) + 1
                where = (run.run_id, run.repo, o.test_key, o.source, n, o.test_id, run.commit)
                rows.append((*where, o.status, o.duration, o.file, o.message, at))
            self.conn.executemany(
                "INSERT INTO test_results (run_id, repo, test_key, source, seq, test_id, "
                "commit_sha, status, duration, file, message, observed_at) "
                f"VALUES ({_placeholders(12)})",
                rows,
            )
            self.conn.executemany(
                f"INSERT INTO file_verdicts (run_id, repo, commit_sha, observed_at, "
                f"{_VERDICT_COLUMNS}) VALUES ({_placeholders(20)})",
                [(run.run_id, run.repo, run.commit, at, *_verdict_row(v)) for v in batch.verdicts],
            )
            self.conn.executemany(
                f"INSERT INTO repair_groups (run_id, repo, commit_sha, observed_at, "
                f"{_GROUP_COLUMNS}) VALUES ({_placeholders(14)})",
                [(run.run_id, run.repo, run.commit, at, *_group_row(g)) for g in batch.groups],
            )

    # -- test results ----------------------------------------------------------------------

    def results(
        self, repo: str, keys: Iterable[str], since: dt.datetime
    ) -> dict[str, list[SeenResult]]:
        """Every result of `keys` observed since `since`, newest first, by key."""
        out: dict[str, list[SeenResult]] = {}
        wanted = sorted(set(keys))
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            rows = self.conn.query(
                "SELECT test_key, test_id, status, source, duration, file, message, run_id, "
                "commit_sha, observed_at FROM test_results WHERE repo = ? AND observed_at >= ? "
                f"AND test_key IN ({_placeholders(len(chunk))}) ORDER BY observed_at DESC",
                (repo, stamp(since), *chunk),
            )
            for r in rows:
                out.setdefault(r[0], []).append(_seen_result(r))
        return out

    def results_of(self, repo: str, test: str, limit: int) -> list[SeenResult]:
        """The last `limit` results of one test, by its key or by any id it was reported as."""
        rows = self.conn.query(
            "SELECT test_key, test_id, status, source, duration, file, message, run_id, "
            "commit_sha, observed_at FROM test_results WHERE repo = ? AND test_key IN "
            "(SELECT test_key FROM test_results WHERE repo = ? AND (test_key = ? OR test_id = ?)) "
            "ORDER BY observed_at DESC LIMIT ?",
            (repo, repo, test, test, limit),
        )
        return [_seen_result(r) for r in rows]

    def flipped_keys(self, repo: str, since: dt.datetime) -> list[str]:
        """Tests that both passed and failed at one commit since `since` (candidates for the
        quarantine; the rule then looks at their last runs)."""
        failing = ", ".join(f"'{s}'" for s in FAILING)
        rows = self.conn.query(
            "SELECT test_key FROM test_results WHERE repo = ? AND observed_at >= ? "
            "GROUP BY test_key, commit_sha "
            "HAVING SUM(CASE WHEN status = 'passed' THEN 1 ELSE 0 END) > 0 "
            f"AND SUM(CASE WHEN status IN ({failing}) THEN 1 ELSE 0 END) > 0",
            (repo, stamp(since)),
        )
        return sorted({r[0] for r in rows})[:MAX_ROWS]

    # -- file verdicts ---------------------------------------------------------------------

    def verdicts(
        self, repo: str, sources: Sequence[str], limit: int
    ) -> dict[str, list[SeenVerdict]]:
        """The last `limit` verdicts of each of `sources`, newest first."""
        out: dict[str, list[SeenVerdict]] = {}
        for source in sorted(set(sources)):
            rows = self.conn.query(
                f"SELECT {_VERDICT_COLUMNS}, run_id, commit_sha, observed_at FROM file_verdicts "
                "WHERE repo = ? AND source = ? ORDER BY observed_at DESC LIMIT ?",
                (repo, source, limit),
            )
            out[source] = [_seen_verdict(r) for r in rows]
        return out

    def latest_verdicts(self, repo: str, limit: int) -> list[SeenVerdict]:
        """The newest verdicts of the repository (the memory skips of the last nights)."""
        rows = self.conn.query(
            f"SELECT {_VERDICT_COLUMNS}, run_id, commit_sha, observed_at FROM file_verdicts "
            "WHERE repo = ? ORDER BY observed_at DESC LIMIT ?",
            (repo, limit),
        )
        return [_seen_verdict(r) for r in rows]

    # -- repair groups and shards ----------------------------------------------------------

    def groups(
        self, repo: str, signatures: Iterable[str], limit: int
    ) -> dict[str, list[SeenGroup]]:
        """The last `limit` outcomes of each signature, newest first."""
        out: dict[str, list[SeenGroup]] = {}
        for signature in sorted(set(signatures)):
            rows = self.conn.query(
                f"SELECT {_GROUP_COLUMNS}, run_id, commit_sha, observed_at FROM repair_groups "
                "WHERE repo = ? AND signature = ? ORDER BY observed_at DESC LIMIT ?",
                (repo, signature, limit),
            )
            if rows:
                out[signature] = [_seen_group(r) for r in rows]
        return out

    def claim(
        self,
        repo: str,
        commit: str,
        signatures: Sequence[str],
        run_id: str,
        window_s: float,
        now: dt.datetime,
        reports: str = "",
    ) -> tuple[dict[str, str], str | None]:
        """Claim `signatures` of `commit` for `run_id`, atomically: a signature another run
        claimed within `window_s` with other reports stays that run's (a shard of the commit
        took it); one claimed earlier, or with the same reports (`reports`: their digest; the
        same run tried again), is taken over.

        Returns:
            (signature -> the run that repairs it, the first run of the commit within the
            window with other reports, when there is one: the run this one is a shard of).
        """
        since = stamp(now - dt.timedelta(seconds=window_s))
        owners: dict[str, str] = {}
        with self.conn.transaction():
            for signature in signatures:
                self.conn.execute(
                    "INSERT INTO repair_claims (repo, commit_sha, signature, run_id, claimed_at, "
                    "reports) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (repo, commit_sha, signature) "
                    "DO UPDATE SET run_id = excluded.run_id, claimed_at = excluded.claimed_at, "
                    "reports = excluded.reports WHERE repair_claims.claimed_at < ? "
                    "OR repair_claims.reports = excluded.reports",
                    (repo, commit, signature, run_id, stamp(now), reports, since),
                )
                rows = self.conn.query(
                    "SELECT run_id FROM repair_claims WHERE repo = ? AND commit_sha = ? "
                    "AND signature = ?",
                    (repo, commit, signature),
                )
                owners[signature] = rows[0][0]
            first = self.conn.query(
                "SELECT run_id FROM repair_claims WHERE repo = ? AND commit_sha = ? "
                "AND claimed_at >= ? AND run_id <> ? AND reports <> ? "
                "ORDER BY claimed_at LIMIT 1",
                (repo, commit, since, run_id, reports),
            )
        return owners, (first[0][0] if first else None)

    # -- runs ------------------------------------------------------------------------------

    def runs(self, repo: str, limit: int) -> list[RunRecord]:
        """The last `limit` runs of `repo` (shards included), oldest first."""
        rows = self.conn.query(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE repo = ? ORDER BY started_at DESC LIMIT ?",
            (repo, limit),
        )
        return [_run(r) for r in reversed(rows)]

    def repos(self) -> list[str]:
        """Every repository the store knows."""
        return [r[0] for r in self.conn.query("SELECT DISTINCT repo FROM runs ORDER BY repo")]

    def run_ids(self) -> list[str]:
        """Every run id kept (for checks)."""
        return [r[0] for r in self.conn.query("SELECT run_id FROM runs ORDER BY started_at")]


def _run_row(run: RunRecord) -> tuple[Any, ...]:
    return (
        run.run_id,
        run.flow,
        run.repo,
        run.commit,
        stamp(run.started_at),
        stamp(run.finished_at),
        run.merged_into,
        run.tokens,
        run.cost,
        run.coverage,
        run.judge_median,
        run.accepted,
        run.rejected,
        run.groups,
        run.fixed_autonomously,
        run.handed_off,
        json.dumps(run.by_kind, sort_keys=True),
    )


def _run(r: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        run_id=r[0],
        flow=r[1],
        repo=r[2],
        commit=r[3],
        started_at=parse_stamp(r[4]),
        finished_at=parse_stamp(r[5]),
        merged_into=r[6],
        tokens=int(r[7]),
        cost=r[8],
        coverage=r[9],
        judge_median=r[10],
        accepted=int(r[11]),
        rejected=int(r[12]),
        groups=int(r[13]),
        fixed_autonomously=int(r[14]),
        handed_off=int(r[15]),
        by_kind=json.loads(r[16] or "{}"),
    )


def _verdict_row(v: Any) -> tuple[Any, ...]:
    return (
        v.source,
        v.kind,
        v.verdict,
        v.gate,
        json.dumps(v.reasons[:3]),
        v.coverage_before,
        v.coverage_after,
        v.judge_score,
        v.static_score,
        v.mutation_score,
        v.tokens,
        v.cost,
        v.iterations,
        v.skip_key,
        int(v.memory_skip),
        int(v.cached),
    )


def _seen_verdict(r: tuple[Any, ...]) -> SeenVerdict:
    names = [c.strip() for c in _VERDICT_COLUMNS.split(",")]
    data: dict[str, Any] = dict(zip(names, r[: len(names)], strict=True))
    data["reasons"] = json.loads(data["reasons"] or "[]")
    data["memory_skip"], data["cached"] = bool(data["memory_skip"]), bool(data["cached"])
    run_id, commit, at = r[len(names) :]
    return SeenVerdict(**data, run_id=run_id, commit=commit, observed_at=parse_stamp(at))


def _group_row(g: GroupRecord) -> tuple[Any, ...]:
    return (
        g.group_id,
        g.signature,
        g.outcome,
        g.category,
        g.attempts,
        g.tokens,
        g.cost,
        g.human,
        int(g.handed_off),
        json.dumps(g.reasons[:5]),
    )


def _seen_group(r: tuple[Any, ...]) -> SeenGroup:
    names = [c.strip() for c in _GROUP_COLUMNS.split(",")]
    data: dict[str, Any] = dict(zip(names, r[: len(names)], strict=True))
    data["reasons"] = json.loads(data["reasons"] or "[]")
    data["handed_off"] = bool(data["handed_off"])
    run_id, commit, at = r[len(names) :]
    return SeenGroup(**data, run_id=run_id, commit=commit, observed_at=parse_stamp(at))


def _seen_result(r: tuple[Any, ...]) -> SeenResult:
    return SeenResult(
        test_key=r[0],
        test_id=r[1],
        status=r[2],
        source=r[3],
        duration=float(r[4] or 0.0),
        file=r[5],
        message=r[6],
        run_id=r[7],
        commit=r[8],
        observed_at=parse_stamp(r[9]),
    )
