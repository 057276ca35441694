"""The mutation score of an accepted file: real mutants of a py_inventory source, the new test
file run against each in bwrap, the result cache, and the source always restored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.generate.mutation import (
    MutationRecord,
    Survivor,
    choose_mutants,
    mutant_lines,
    mutation_score,
    survivors_feedback,
)
from tasks.sandbox.make import make_runner
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import make_example_repo

PRICING = "src/inventory/pricing.py"
SPEC = "tests/test_pricing.py"
PY = get_toolchain("python-pytest")

WEAK = """\
import pytest

from inventory.errors import InventoryError
from inventory.pricing import format_cents, line_total, volume_discount


def test_volume_discount_tiers():
    assert volume_discount(5) == 0
    assert volume_discount(200) == 15


def test_volume_discount_refuses_zero():
    with pytest.raises(InventoryError, match="quantity must be positive, got 0"):
        volume_discount(0)


def test_line_total_of_three_units_with_tax():
    assert line_total(1000, 3) == 3600


def test_line_total_refuses_negative_price_and_bad_tax():
    with pytest.raises(InventoryError, match="unit price must not be negative"):
        line_total(-1, 1)
    with pytest.raises(InventoryError, match="tax percent out of range: 101"):
        line_total(1, 1, tax_percent=101)


def test_format_cents():
    assert format_cents(1999) == "19.99 EUR"
    assert format_cents(-5) == "-0.05 EUR"
"""
# WEAK plus the assertions its surviving mutants asked for.
STRONG = (
    WEAK
    + """

def test_line_total_applies_the_volume_discount():
    assert line_total(1000, 10) == 11400


def test_line_total_of_a_free_item_is_zero():
    assert line_total(0, 1) == 0


def test_format_cents_of_zero_has_no_sign():
    assert format_cents(0) == "0.00 EUR"
"""
)


@pytest.mark.slow
def test_score_survivors_cache_and_the_source_restored(tmp_path: Path) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "repo")
    (repo / SPEC).write_text(WEAK, encoding="utf-8")
    runner = make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=repo)
    run = PY.run_specs(repo, [SPEC], PRICING, runner)
    assert run.passed and run.coverage is not None
    original = (repo / PRICING).read_bytes()
    cache = tmp_path / "cache"

    first = mutation_score(
        repo,
        PRICING,
        run.coverage,
        {SPEC: WEAK},
        chain=PY,
        runner=runner,
        limit=4,
        cache_dir=cache,
    )

    assert first.made == 4 and first.cached == 0
    assert first.killed + len(first.survivors) == 4
    assert first.score == round(first.killed / 4, 4)
    assert (repo / PRICING).read_bytes() == original
    for s in first.survivors:  # a survivor is a real one-token change of that line
        assert s.before == original.decode().splitlines()[s.line - 1] and s.after != s.before
    again = mutation_score(
        repo,
        PRICING,
        run.coverage,
        {SPEC: WEAK},
        chain=PY,
        runner=runner,
        limit=4,
        cache_dir=cache,
    )
    assert again.cached == 4 and again.score == first.score
    assert again.survivors == first.survivors
    # Other tests are another key: nothing cached for them.
    other = mutation_score(
        repo,
        PRICING,
        run.coverage,
        {SPEC: STRONG},
        chain=PY,
        runner=runner,
        limit=1,
        cache_dir=cache,
    )
    assert other.cached == 0


@pytest.mark.slow
def test_a_pull_requests_mutants_go_on_its_changed_lines_only(tmp_path: Path) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "repo")
    (repo / SPEC).write_text(WEAK, encoding="utf-8")
    runner = make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=repo)
    run = PY.run_specs(repo, [SPEC], PRICING, runner)
    assert run.coverage is not None
    text = (repo / PRICING).read_text()
    lines = mutant_lines(PY, PRICING, text, run.coverage)
    changed = sorted({m.line for m in PY.mutations(PRICING, text, lines)})[-2:]
    record = mutation_score(
        repo,
        PRICING,
        run.coverage,
        {SPEC: WEAK},
        chain=PY,
        runner=runner,
        limit=10,
        cache_dir=None,
        only=changed,
    )
    assert record.made == 2
    assert {s.line for s in record.survivors} <= set(changed)


def test_choice_is_bounded_one_per_line_and_deterministic() -> None:
    text = (Path(__file__).parents[3] / "examples/py_inventory" / PRICING).read_text()
    lines = set(range(1, 40))
    chosen = choose_mutants(PY, PRICING, text, lines, 5)
    assert len(chosen) == 5 and len({m.line for m in chosen}) == 5
    assert chosen == choose_mutants(PY, PRICING, text, lines, 5)
    assert choose_mutants(PY, PRICING, text, set(), 5) == []
    assert choose_mutants(PY, PRICING, text, lines, 0) == []


def test_survivors_become_concrete_missing_assertions() -> None:
    record = MutationRecord(
        score=0.5,
        made=2,
        killed=1,
        survivors=[
            Survivor(
                line=37,
                before='    sign = "-" if cents < 0 else ""',
                after='    sign = "-" if cents < 1 else ""',
            )
        ],
    )
    text = survivors_feedback(record, PRICING, 0.8)
    assert "kill 1 of 2 small changes" in text and "at least 0.80" in text
    assert '- line 37:\n    as written: sign = "-" if cents < 0 else ""' in text
    assert 'changed to: sign = "-" if cents < 1 else ""' in text
