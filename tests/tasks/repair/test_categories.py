"""Issue 15: each group's category (test-side, code-side, environment-dependency, flaky,
unknown), the partial outcome, and the metrics' shares."""

from __future__ import annotations

from tasks.core.types import SuiteProblem, TestCaseResult, ValidationResult
from tasks.repair.review import fixed_tests
from tasks.repair.scout import environment_group
from tasks.repair.state import (
    Attempt,
    FailureGroup,
    GroupState,
    PatchReview,
    categorize,
    metrics,
    partial_outcome,
)
from tests.tasks.repair.test_units import case, diagnosis


def _state(n_tests: int = 2, side: str | None = "code") -> GroupState:
    tests = [case(f"t{i}", "expected 5 got 6") for i in range(n_tests)]
    group = FailureGroup(
        id="g-1", signature="s", error_type="E", message_shape="m", frame="", tests=tests
    )
    state = GroupState(group=group)
    if side is not None:
        state.diagnoses.append(diagnosis(wrong_side=side))
    return state


def _with_audit(state: GroupState, fixed: list[str]) -> GroupState:
    audit = PatchReview(verdict="NEEDS_REVISION", fixed_tests=fixed)
    state.attempts.append(Attempt(number=1, diagnosis_index=0, patch="p", audit=audit))
    return state


def test_category_follows_the_diagnosis_side_unless_known_otherwise() -> None:
    assert categorize(_state(side="code")) == "code-side"
    assert categorize(_state(side="test")) == "test-side"
    assert categorize(_state(side="both")) == "unknown"
    assert categorize(_state(side=None)) == "unknown"
    flaky = _state()
    flaky.category = "flaky"
    assert categorize(flaky) == "flaky"
    blocked = environment_group(
        SuiteProblem(tool="pytest", cause="environment", message="plugin missing")
    )
    assert categorize(blocked) == "environment-dependency"


def test_partial_is_some_not_all_tests_fixed_by_the_last_patch() -> None:
    some = _with_audit(_state(), ["t0"])
    some.outcome = "needs_human"
    assert partial_outcome(some)
    every = _with_audit(_state(), ["t0", "t1"])
    every.outcome = "failed"
    assert not partial_outcome(every)
    none = _with_audit(_state(), [])
    none.outcome = "needs_human"
    assert not partial_outcome(none)
    fixed = _with_audit(_state(), ["t0"])
    fixed.outcome = "fixed"
    assert not partial_outcome(fixed)


def test_fixed_tests_are_the_group_examples_that_ran_and_passed() -> None:
    group = _state().group
    passed: TestCaseResult = case("t0", "", status="passed")
    run = ValidationResult(toolchain="ruby-rspec", loaded=True, examples=[passed])
    assert fixed_tests(group, run) == ["t0"]  # t1 did not run: not fixed
    broken = ValidationResult(toolchain="ruby-rspec", loaded=False, examples=[passed])
    assert fixed_tests(group, broken) == []


def test_metrics_report_the_shares_of_categories_and_outcomes() -> None:
    a, b, c, d = _state(side="code"), _state(side="code"), _state(side="test"), _state()
    a.outcome, b.outcome, c.outcome, d.outcome = "fixed", "fixed", "partial", "needs_human"
    for g in (a, b, c):
        g.category = categorize(g)
    d.category = "flaky"
    m = metrics([a, b, c, d])
    assert m.category_shares == {"code-side": 0.5, "flaky": 0.25, "test-side": 0.25}
    assert m.outcome_shares == {"fixed": 0.5, "needs_human": 0.25, "partial": 0.25}
