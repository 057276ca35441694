"""Memory across runs, as the flows use it: the run history store opened once per run, asked
before the work (skips, quarantine, shards, signatures seen before) and written once after it,
and the run's history artifact.

The store never stops a run. When it cannot be opened or answered (corrupted, locked,
unreachable, newer), the run logs one line, ``history: <store>: <why>; this run goes on without
memory``, and works as if nothing had been remembered; what it would have written is spooled
under ``<home>/history-spool`` and written by the next run that reaches the store
(:mod:`tasks.history.spool`). Everything a run writes goes in one transaction.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from tasks.core.config import Settings
from tasks.core.types import TestCaseResult
from tasks.history.db import HistoryUnavailable, shown
from tasks.history.records import (
    Observation,
    Quarantine,
    RunBatch,
    RunRecord,
    SeenGroup,
    SeenResult,
    SeenVerdict,
    Skip,
    Source,
    utc_now,
)
from tasks.history.rules import merge_cases, quarantined, skip_of
from tasks.history.spool import replay, spool
from tasks.history.store import HistoryStore, open_store, store_url
from tasks.history.trend import HistoryDocument, TestHistory, TrendPoint, trend
from tasks.keep.git import subdir_in_repo
from tasks.keep.git_safe import git_text

log = logging.getLogger(__name__)
T = TypeVar("T")
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")
#: Verdicts of one file read per decision at most.
VERDICTS_READ = 20
#: Earlier outcomes of one signature shown at most.
EARLIER_SHOWN = 3


def repo_key(root: Path, sub: str = "") -> str:
    """How the history names a repository: its ``origin`` URL without credentials (so every
    worker's clone of it shares one history), else the path of its work tree; a project inside
    a larger repository adds its directory."""
    try:
        url = git_text(["config", "--get", "remote.origin.url"], cwd=root, check=False)
    except Exception:  # no git, not a repository: the path names it
        url = ""
    base = _USERINFO.sub("", url.strip()) or str(root.resolve())
    return f"{base}#{sub}" if sub else base


class Memory:
    """The run's view of the history: every question answers "nothing remembered" when the
    store is not available, and the first failure closes it for the rest of the run."""

    def __init__(
        self, settings: Settings, repo: str, store: HistoryStore | None, strict: bool = False
    ) -> None:
        """`strict`: a failing question raises instead of answering "nothing remembered"."""
        self.settings = settings
        self.strict = strict
        self.repo = repo
        self.store = store
        self.started_at = utc_now()
        self.where = store.where if store is not None else shown(store_url(settings))
        #: What this run observed (written with its records at the end).
        self.observed: list[Observation] = []
        #: The tests this run found quarantined.
        self.flagged: dict[str, Quarantine] = {}
        #: A nightly's skip keys (source -> digest) and the targets it skips tonight.
        self.skip_keys: dict[str, str | None] = {}
        self.skipped: dict[str, Skip] = {}
        #: The earlier outcomes of this run's repair signatures (asked before it repairs).
        self.seen_before: dict[str, list[SeenGroup]] = {}

    @classmethod
    def open(cls, settings: Settings, root: Path, sub: str = "") -> Memory:
        """The store of `settings` for the repository at `root` (never raises)."""
        repo = repo_key(root, sub)
        if not settings.history.enabled:
            return cls(settings, repo, None)
        try:
            store = open_store(settings)
        except HistoryUnavailable as exc:
            _warn(exc)
            return cls(settings, repo, None)
        memory = cls(settings, repo, store)
        memory.ask(lambda s: replay(settings.home, s), 0)
        return memory

    @property
    def available(self) -> bool:
        """Whether the store answers."""
        return self.store is not None

    def ask(self, question: Callable[[HistoryStore], T], default: T) -> T:
        """`question` of the store, or `default` when there is none or it fails."""
        if self.store is None:
            return default
        try:
            return question(self.store)
        except HistoryUnavailable as exc:
            if self.strict:
                raise
            self._lost(exc)
            return default

    def _lost(self, exc: HistoryUnavailable) -> None:
        _warn(exc)
        if self.store is not None:
            self.store.close()
        self.store = None

    def write(self, batch: RunBatch) -> bool:
        """Write the run's records in one transaction (spooled when the store fails)."""
        if not self.settings.history.enabled:
            return False
        if self.store is not None:
            try:
                self.store.write(batch)
                return True
            except HistoryUnavailable as exc:
                self._lost(exc)
        kept = spool(self.settings.home, batch)
        if kept is not None:
            log.info("history: run %s kept in %s for a later run", batch.run.run_id, kept)
        return False

    def close(self) -> None:
        """Close the store."""
        if self.store is not None:
            self.store.close()
            self.store = None

    def observe(self, cases: list[TestCaseResult], source: Source) -> list[TestCaseResult]:
        """Keep `cases` as this run's observations; returns them merged, one per test (the
        shards of one commit: a failure wins, repeats are one; see
        :func:`tasks.history.rules.merge_cases`)."""
        self.observed += [Observation.of(c, source) for c in cases if c.status != "skipped"]
        return merge_cases(cases)

    # -- what is remembered ----------------------------------------------------------------

    def since(self) -> dt.datetime:
        """The start of the flaky window."""
        return utc_now() - dt.timedelta(days=self.settings.history.flaky_window_days)

    def quarantine(
        self, observations: list[Observation], run_id: str, commit: str, keys: list[str]
    ) -> dict[str, Quarantine]:
        """The tests of `keys` quarantined as flaky, this run's `observations` counting too."""
        if not self.available or not keys:
            return {}
        past: dict[str, list[SeenResult]] = self.ask(
            lambda s: s.results(self.repo, keys, self.since()), {}
        )
        now = utc_now()
        mine: dict[str, list[SeenResult]] = {}
        for o in observations:
            seen = SeenResult(**o.model_dump(), run_id=run_id, commit=commit, observed_at=now)
            mine.setdefault(o.test_key, []).append(seen)
        out: dict[str, Quarantine] = {}
        h = self.settings.history
        for key in keys:
            results = [*mine.get(key, []), *past.get(key, [])]
            found = quarantined(results, h.flaky_runs, self.since())
            if found is not None:
                out[key] = found
        return out

    def all_quarantined(self) -> list[Quarantine]:
        """Every test of the repository in quarantine now (the operator's list)."""
        keys: list[str] = self.ask(lambda s: s.flipped_keys(self.repo, self.since()), [])
        return list(self.quarantine([], "", "", keys).values())

    def skips(self, keys: dict[str, str]) -> dict[str, Skip]:
        """The targets the nightly skips tonight, from their skip keys (source -> key)."""
        h = self.settings.history
        if not self.available or h.skip_nights <= 0 or not keys:
            return {}
        verdicts: dict[str, list[SeenVerdict]] = self.ask(
            lambda s: s.verdicts(self.repo, list(keys), VERDICTS_READ), {}
        )
        out: dict[str, Skip] = {}
        for source, key in keys.items():
            found = skip_of(verdicts.get(source, []), key, h.skip_after, h.skip_nights)
            if found is not None:
                out[source] = found
        return out

    def earlier(self, signatures: list[str]) -> dict[str, list[SeenGroup]]:
        """Each signature's earlier outcomes in this repository, newest first."""
        if not signatures:
            return {}
        empty: dict[str, list[SeenGroup]] = {}
        found = self.ask(lambda s: s.groups(self.repo, signatures, EARLIER_SHOWN), empty)
        self.seen_before.update(found)
        return found

    def points(self) -> list[TrendPoint]:
        """The trend of the last runs (this one included once written)."""
        limit = self.settings.history.trend_runs * 4  # shards fold into their first run
        runs: list[RunRecord] = self.ask(lambda s: s.runs(self.repo, limit), [])
        return trend(runs)[-self.settings.history.trend_runs :]


def history_document(
    settings: Settings, repo: Path, runs: int | None = None, test: str | None = None
) -> HistoryDocument:
    """What the history holds about the repository at `repo`: the trend of its last `runs`
    runs, its quarantine, the files its last nightly skipped, and one `test`'s results.

    Raises:
        HistoryUnavailable: the store cannot be used (one line).
    """
    root, sub = subdir_in_repo(repo)
    h = settings.history
    if runs is not None:
        settings = settings.model_copy(
            update={"history": h.model_copy(update={"trend_runs": runs})}
        )
    memory = Memory(settings, repo_key(root, sub), open_store(settings), strict=True)
    try:
        store = memory.store
        assert store is not None
        points = memory.points()
        quarantined = memory.all_quarantined()
        latest = store.latest_verdicts(memory.repo, 500)
        night = latest[0].run_id if latest else ""
        skipped = [v for v in latest if v.run_id == night and v.memory_skip]
        asked = None
        if test is not None:
            results = store.results_of(memory.repo, test, 200)
            key = results[0].test_key if results else test
            found = memory.quarantine([], "", "", [key]) if results else {}
            asked = TestHistory(test=key, results=results, quarantine=found.get(key))
    finally:
        memory.close()
    return HistoryDocument(
        store=memory.where,
        repo=memory.repo,
        runs=points,
        quarantined=quarantined,
        skipped=skipped,
        test=asked,
    )


def _warn(exc: HistoryUnavailable) -> None:
    log.warning("history: %s; this run goes on without memory", str(exc).splitlines()[0])
