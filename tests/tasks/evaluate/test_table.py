"""The quality table (issue 15): tokens of cached outcomes are counted apart, never as spent;
the repair's category and outcome shares are in the table; first-draft rates come from the
structured round records (never prompt text); the mutation score column."""

from __future__ import annotations

from tasks.core.types import Exchange
from tasks.evaluate.table import Before, quality_table, rows
from tasks.generate.types import FileOutcome, RoundRecord
from tasks.repair.state import Metrics, RepairSummary


def _outcome(source: str, tokens: int, cached: bool) -> FileOutcome:
    return FileOutcome(
        source=source,
        kind="python",
        spec=f"tests/test_{source}",
        verdict="accepted",
        iterations=1,
        tokens=tokens,
        cached=cached,
        judge_score=0.8,
    )


def _repair() -> RepairSummary:
    metrics = Metrics(
        autonomous_fix_rate=0.5,
        human_intervention_rate=0.5,
        mean_time_to_fix_s=1.0,
        tokens=100,
        category_shares={"code-side": 0.5, "flaky": 0.5},
        outcome_shares={"fixed": 0.5, "needs_human": 0.5},
    )
    return RepairSummary(
        run_id="r",
        repo="x",
        base_commit="c",
        branch=None,
        archive_uri=None,
        failures=2,
        report_errors=[],
        groups=[],
        metrics=metrics,
    )


def test_cached_tokens_are_counted_apart_from_the_spent_ones() -> None:
    outcomes = [_outcome("a.py", 300, cached=True), _outcome("b.py", 200, cached=False)]
    table = quality_table(
        outcomes, before={}, nightly_tokens=200, generator_model="codestral-latest"
    )
    assert (table.tokens, table.cached_tokens) == (200, 300)
    assert ("tokens cached (not spent)", "300") in rows(table)


def test_repair_shares_are_in_the_table_when_the_repair_had_groups() -> None:
    repair = _repair()
    empty = quality_table([], before={}, nightly_tokens=0, generator_model="x", repair=repair)
    assert empty.repair_categories == {}  # no group: nothing to share out
    repair.groups = [None]  # type: ignore[list-item]  # only the count is read
    table = quality_table([], before={}, nightly_tokens=0, generator_model="x", repair=repair)
    assert table.repair_categories == {"code-side": 0.5, "flaky": 0.5}
    assert table.repair_outcomes == {"fixed": 0.5, "needs_human": 0.5}
    assert ("repair categories", "code-side 50%, flaky 50%") in rows(table)


def test_first_draft_rates_come_from_the_round_records_not_the_prompts() -> None:
    # a: its first draft did not load, though round 2's prompt text says nothing of it.
    a = _outcome("a.py", 0, cached=False)
    a.iterations = 2
    a.rounds = [
        RoundRecord(round=1, loaded=False, passed=False, gate="load"),
        RoundRecord(round=2, loaded=True, passed=True),
    ]
    a.exchanges = [
        Exchange(
            iteration=2,
            prompt_name="fix",
            prompt_version="1",
            prompt_sha256="s",
            messages=[{"role": "user", "content": "ok"}],
        )
    ]
    # b: loaded but failed, although its prompts carry a load-error text.
    b = _outcome("b.py", 0, cached=False)
    b.rounds = [RoundRecord(round=1, loaded=True, passed=False, gate="pass")]
    b.exchanges = [
        Exchange(
            iteration=2,
            prompt_name="fix",
            prompt_version="1",
            prompt_sha256="s",
            messages=[
                {"role": "user", "content": "Load error (the test file could not be loaded):"}
            ],
        )
    ]
    c = _outcome("c.py", 0, cached=False)  # never measured (no round): left out
    table = quality_table([a, b, c], before={}, nightly_tokens=0, generator_model="x")
    assert (table.first_draft_load_rate, table.first_draft_pass_rate) == (0.5, 0.0)


def test_mutation_score_is_the_mean_over_accepted_files_that_have_one() -> None:
    a, b, c, d = (_outcome(f"{n}.py", 0, cached=False) for n in "abcd")
    a.mutation_score, b.mutation_score = 0.5, 1.0
    c.mutation_score = None  # accepted, not scored: left out
    d.mutation_score, d.verdict = 0.0, "rejected"  # not accepted: left out
    table = quality_table([a, b, c, d], before={}, nightly_tokens=0, generator_model="x")
    assert table.mutation_score == 0.75
    assert ("mutation score (accepted)", "75%") in rows(table)
    none = quality_table([c], before={}, nightly_tokens=0, generator_model="x")
    assert none.mutation_score is None


def test_judge_before_and_after_are_the_same_instrument_on_the_same_files() -> None:
    a = _outcome("a.py", 0, cached=False)  # accepted: judged 0.8 after, static 1.0
    a.static_score = 1.0
    b = _outcome("b.py", 0, cached=False)  # rejected: its existing spec stays, so does its score
    b.verdict, b.judge_score, b.static_score = "rejected", 0.2, 0.4
    c = _outcome("c.py", 0, cached=False)  # its existing spec could not be judged: left out
    before = {
        "a.py": Before(judge=0.0, static=0.0),
        "b.py": Before(spec="tests/test_b.py", judge=0.6, static=0.8),
    }
    table = quality_table([a, b, c], before=before, nightly_tokens=0, generator_model="x")
    [kind] = table.judge
    assert kind.files == 3
    assert (kind.judge_before, kind.judge_after) == (0.3, 0.7)
    assert (kind.static_before, kind.static_after) == (0.4, 0.9)
    assert ("judge python (3 files)", "0.30 -> 0.70 (static 0.40 -> 0.90)") in rows(table)
