"""The run history: memory across runs.

One store (SQLite under ``$AUTOPILOT_HOME`` by default, PostgreSQL through ``history.url`` for a
team's shared server; one schema, versioned migrations: :mod:`.schema`) keeps, per repository:
every observed result of every test (by the parser's stable id, with run, commit, duration and
source: a CI report, a baseline suite, a repeat), every nightly verdict of every file (gate,
scores, coverage, tokens, cost) and every repair group's outcome and attempts by signature.

What reads it (:mod:`.rules`): the flaky quarantine (a test that flipped at one commit within its
last N runs is never sent to repair), the nightly's skips (a file rejected at the same gate with
unchanged source and prompts waits K nights), the repair's shard merge (the runs of one commit
within a window are one run; a signature another shard took is not repaired twice) and the
earlier outcomes of a signature seen before; the operator's view (:mod:`.trend`, :mod:`.chart`):
the trend table and PNG chart of the Prefect artifact and ``autopilot history``.

A store that cannot be used (corrupted, locked, unreachable, from a newer Autopilot) is one
:class:`~tasks.history.db.HistoryUnavailable` line: the flows go on without memory, and what
they would have written waits in a spool (:mod:`.spool`) for a later run. Every run's records
are written in one transaction.

May import: tasks.core.
"""
