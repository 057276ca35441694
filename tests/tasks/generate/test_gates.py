from __future__ import annotations

from tasks.core.config import GateSettings
from tasks.core.types import FileCoverage, Finding, LintOffense, StaticVerdict, TestCaseResult
from tasks.core.types import ValidationResult as VR
from tasks.generate.gates import (
    Evidence,
    coverage_ceiling,
    diff_coverage_gate,
    diff_share,
    evaluate,
    execution,
)

SETTINGS = GateSettings(min_coverage=0.9, min_coverage_gain=0.2, min_judge=0.7, flaky_runs=2)


def _case(status: str = "passed", message: str | None = None) -> TestCaseResult:
    return TestCaseResult(id="spec/a_spec.rb:3", name="a", status=status, message=message)  # type: ignore[arg-type]


def _ok(covered: int = 10, executable: int = 10, uncovered: list[int] | None = None) -> VR:
    return VR(
        toolchain="ruby-rspec",
        target="app/models/a.rb",
        loaded=True,
        examples=[_case()],
        coverage=FileCoverage(
            path="app/models/a.rb",
            executable_lines=executable,
            covered_lines=covered,
            uncovered_lines=uncovered or [],
        ),
    )


def _evidence(**kw: object) -> Evidence:
    base: dict[str, object] = {"validation": _ok(), "reruns": [_ok(), _ok()], "judge_score": 0.8}
    base.update(kw)
    return Evidence.model_validate(base)


def test_all_gates_pass() -> None:
    d = evaluate(_evidence(), SETTINGS)
    assert d.accepted and d.gate is None


def test_load_failure_is_the_load_gate_with_the_error_text() -> None:
    bad = VR(toolchain="ruby-rspec", loaded=False, load_error="SyntaxError: unexpected end")
    d = evaluate(_evidence(validation=bad), SETTINGS)
    assert (d.accepted, d.gate) == (False, "load")
    assert d.reasons == ["SyntaxError: unexpected end"]


def test_failing_example_is_the_pass_gate() -> None:
    v = _ok()
    v.examples.append(_case("failed", "expected 3\n got 4"))
    d = execution(v)
    assert d.gate == "pass"
    assert d.reasons == ["spec/a_spec.rb:3: expected 3"]


def test_no_examples_is_not_a_pass() -> None:
    v = _ok()
    v.examples.clear()
    assert execution(v).gate == "pass"


def test_sandbox_reason_fails_pass_gate() -> None:
    v = _ok()
    v.reason = "timeout after 30s"
    d = execution(v)
    assert (d.gate, d.reasons) == ("pass", ["timeout after 30s"])


def test_flaky_rerun_and_missing_reruns() -> None:
    flaky = _ok()
    flaky.examples = [_case("failed", "random")]
    assert evaluate(_evidence(reruns=[_ok(), flaky]), SETTINGS).gate == "flaky"
    d = evaluate(_evidence(reruns=[_ok()]), SETTINGS)
    assert d.gate == "flaky" and "2 required" in d.reasons[0]


def test_lint_offences_reject() -> None:
    off = LintOffense(path="spec/a_spec.rb", line=4, rule="Layout/X", message="bad")
    d = evaluate(_evidence(lint=[off]), SETTINGS)
    assert d.gate == "lint" and d.reasons == ["spec/a_spec.rb:4: Layout/X: bad"]


def test_coverage_threshold_and_gain() -> None:
    low = _ok(covered=5, uncovered=[3, 4, 7, 8, 9])
    d = evaluate(_evidence(validation=low), SETTINGS)
    assert d.gate == "coverage"
    assert d.reasons[1] == "uncovered lines: 3, 4, 7, 8, 9"
    # 50% from a 20% baseline is a gain of 0.3 >= 0.2: accepted on gain, for a file with specs.
    had = {"had_specs": True}
    assert evaluate(_evidence(validation=low, coverage_before=0.2, **had), SETTINGS).accepted
    gained = evaluate(_evidence(validation=low, coverage_before=0.4, **had), SETTINGS)
    assert gained.gate == "coverage"
    assert gained.reasons[0] == "coverage 50% < 90% (baseline 40%, gain below 20%)"


def test_an_untested_file_must_reach_min_coverage_whatever_its_gain() -> None:
    low = _ok(covered=4, uncovered=[16, 17, 18, 19, 20, 21])
    d = evaluate(_evidence(validation=low, coverage_before=0.0), SETTINGS)
    assert d.gate == "coverage"
    assert d.reasons == ["coverage 40% < 90%", "uncovered lines: 16, 17, 18, 19, 20, 21"]


def test_lines_marked_no_cover_lower_the_required_coverage_to_the_files_ceiling() -> None:
    # 10 executable lines, 2 of them marked as reachable by no test and still counted.
    low = _ok(covered=8, uncovered=[9, 10])
    assert evaluate(_evidence(validation=low, no_cover=[9, 10]), SETTINGS).accepted
    assert coverage_ceiling(low.coverage, [9, 10]) == 0.8  # type: ignore[arg-type]
    # A marked line that was covered or excluded by the tool does not lower the ceiling.
    assert coverage_ceiling(low.coverage, [1, 2]) == 1.0  # type: ignore[arg-type]
    worse = _ok(covered=7, uncovered=[3, 9, 10])
    d = evaluate(_evidence(validation=worse, no_cover=[9, 10]), SETTINGS)
    assert d.gate == "coverage"
    assert d.reasons[0].startswith("coverage 70% < 80% (the file's ceiling")
    assert d.reasons[1] == "uncovered lines: 3"


def test_branch_coverage_is_reported_never_gated() -> None:
    cov = FileCoverage(
        path="a.py",
        executable_lines=10,
        covered_lines=5,
        uncovered_lines=[6, 7, 8, 9, 10],
        branches=4,
        covered_branches=1,
        partial_lines=[3],
    )
    d = evaluate(_evidence(validation=_ok().model_copy(update={"coverage": cov})), SETTINGS)
    assert d.reasons[2] == "branches: 1/4 taken; lines with a branch never taken: 3"
    full = cov.model_copy(update={"covered_lines": 10, "uncovered_lines": []})
    assert evaluate(
        _evidence(validation=_ok().model_copy(update={"coverage": full})), SETTINGS
    ).accepted


def test_static_forbidden_rule_rejects_but_other_findings_do_not() -> None:
    f = Finding(path="spec/a_spec.rb", line=2, rule="private-call", message="send(:x)")
    v = StaticVerdict(score=0.5, findings=[f])
    d = evaluate(_evidence(static=v, forbidden_rules=frozenset({"private-call"})), SETTINGS)
    assert d.gate == "static"
    assert evaluate(_evidence(static=v, forbidden_rules=frozenset()), SETTINGS).accepted


def test_judge_threshold_and_stop_before_judge() -> None:
    assert evaluate(_evidence(judge_score=0.6), SETTINGS).gate == "judge"
    assert evaluate(_evidence(judge_score=None), SETTINGS).gate == "judge"
    assert evaluate(_evidence(judge_score=None), SETTINGS, skip=("judge",)).accepted


def test_the_decision_lists_every_gate_run_in_order() -> None:
    d = evaluate(_evidence(), SETTINGS)
    assert [r.gate for r in d.results] == [
        "load",
        "pass",
        "flaky",
        "lint",
        "coverage",
        "diff_coverage",
        "static",
        "support",
        "judge",
        "mutation",
    ]
    assert all(r.passed for r in d.results) and d.gate is None and d.reasons == []
    low = evaluate(_evidence(validation=_ok(covered=5), coverage_before=0.5), SETTINGS)
    assert [r.gate for r in low.results] == ["load", "pass", "flaky", "lint", "coverage"]
    assert low.gate == "coverage" and low.results[-1].passed is False
    skipped = evaluate(_evidence(reruns=None), SETTINGS, skip=("flaky", "judge"))
    assert "flaky" not in [r.gate for r in skipped.results] and skipped.accepted


def test_support_files_that_change_other_results_fail_the_support_gate() -> None:
    broke = "tests/conftest.py changes the outcome of 1 existing test(s): t (passed -> failed)"
    d = evaluate(_evidence(support_breaks=[broke, "the tests need tests/conftest.py"]), SETTINGS)
    assert (d.gate, d.reasons) == ("support", [broke, "the tests need tests/conftest.py"])
    assert [r.gate for r in d.results][-2:] == ["static", "support"]  # never judged


def test_a_support_file_left_out_passes_the_support_gate_with_the_note() -> None:
    note = "tests/conftest.py: left out, the tests pass with the project's own support files"
    d = evaluate(_evidence(support_notes=[note]), SETTINGS)
    assert d.accepted and d.reasons == []
    support = next(r for r in d.results if r.gate == "support")
    assert support.passed and support.reasons == [note]


def test_mutation_gate_is_off_by_default_and_gates_when_set() -> None:
    weak = {"mutation_score": 0.4, "mutants": (4, 10)}
    assert evaluate(_evidence(**weak), SETTINGS).accepted  # off: reported, never decides
    strict = SETTINGS.model_copy(update={"min_mutation": 0.6})
    d = evaluate(_evidence(**weak), strict)
    assert d.gate == "mutation"
    assert d.reasons == ["mutation score 0.40 < 0.60 (6 of 10 mutants survived)"]
    assert evaluate(_evidence(mutation_score=0.6, mutants=(6, 10)), strict).accepted
    # No mutant could be made: nothing to gate on.
    assert evaluate(_evidence(mutation_score=None), strict).accepted


# --- diff_coverage: a pull request's changed lines ----------------------------------------------


def _measured(executed: list[int], uncovered: list[int]) -> FileCoverage:
    """Coverage of a 20-line file whose measured lines are `executed` and `uncovered` (the
    others are blank, comments, `end`s no tool counts)."""
    return FileCoverage(
        path="app/models/a.rb",
        executable_lines=len(executed) + len(uncovered),
        covered_lines=len(executed),
        uncovered_lines=uncovered,
        executed_lines=executed,
    )


def test_a_nightly_target_without_changed_lines_passes_diff_coverage() -> None:
    assert diff_coverage_gate(_measured([1], [2, 3]), [], SETTINGS).passed
    assert diff_share(_measured([1], [2, 3]), []) is None


def test_diff_coverage_counts_only_the_changed_lines_the_tool_measures() -> None:
    # Changed: 4 (ran), 5 (a comment: not measured), 6 (never ran), 7 (ran).
    coverage = _measured([1, 4, 7], [2, 6])
    result = diff_coverage_gate(coverage, [4, 5, 6, 7], SETTINGS)
    assert not result.passed
    assert result.reasons == [
        "changed lines covered 2/3 (67%) < 90%",
        "changed lines no test runs: 6",
    ]
    assert diff_share(coverage, [4, 5, 6, 7]) == 0.6667
    assert diff_coverage_gate(coverage, [4, 5, 7], SETTINGS).passed
    lenient = SETTINGS.model_copy(update={"min_diff_coverage": 0.6})
    assert diff_coverage_gate(coverage, [4, 5, 6, 7], lenient).passed


def test_changed_lines_no_tool_measures_or_marked_no_cover_pass() -> None:
    coverage = _measured([1], [2, 6])
    assert diff_coverage_gate(coverage, [5, 8], SETTINGS).passed  # blank or comment lines
    assert diff_share(coverage, [5, 8]) is None
    assert diff_coverage_gate(coverage, [6], SETTINGS, no_cover=[6]).passed
    assert not diff_coverage_gate(None, [6], SETTINGS).passed


def test_without_a_record_of_the_lines_that_ran_every_changed_line_counts() -> None:
    coverage = _measured([1], [2, 6]).model_copy(update={"executed_lines": None})
    assert diff_share(coverage, [5, 6]) == 0.5


def test_a_pre_merge_target_is_gated_on_its_changed_lines_not_on_the_whole_file() -> None:
    half = _measured(list(range(1, 11)), list(range(11, 21)))  # 50% of the file
    evidence = _evidence(validation=_ok().model_copy(update={"coverage": half}))
    assert evaluate(evidence, SETTINGS).gate == "coverage"  # a nightly target: 50% < 90%
    premerge = evidence.model_copy(update={"changed_lines": [3, 4], "coverage_before": 0.4})
    assert evaluate(premerge, SETTINGS).accepted  # its changed lines ran, nothing was lost
    missed = premerge.model_copy(update={"changed_lines": [3, 12]})
    decision = evaluate(missed, SETTINGS)
    assert decision.gate == "diff_coverage"
    assert decision.reasons[1] == "changed lines no test runs: 12"
    lost = premerge.model_copy(update={"coverage_before": 0.6})
    assert evaluate(lost, SETTINGS).gate == "coverage"  # the file lost coverage
