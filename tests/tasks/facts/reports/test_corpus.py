"""The report corpus: real and dialect-shaped reports whose counts were computed independently.

tests/data/reports/expected.json gives, per file, the counts the framework itself reported and
how they convert to one status per case (the rules are stated there). Every dialect the README
lists is in the corpus, and each case the parser once got wrong: disabled tests, several
results in one case, colliding ids, Kotlin frames, an entity from a local external DTD.
"""

from __future__ import annotations

import json

import pytest

from tasks.facts.reports.read import parse_report, parse_reports
from tests.paths import TESTS

CORPUS = TESTS / "data" / "reports"
EXPECTED: dict[str, dict[str, object]] = {
    k: v for k, v in json.loads((CORPUS / "expected.json").read_text()).items() if k[0] != "_"
}
COUNTS = ("tests", "passed", "failed", "errors", "skipped", "duplicates")


def test_every_report_in_the_corpus_has_expected_counts() -> None:
    files = {p.name for p in CORPUS.iterdir() if p.suffix in (".xml", ".json")}
    assert files - {"expected.json"} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_counts_match_the_reference(name: str) -> None:
    expected = EXPECTED[name]
    run = parse_reports([CORPUS / name])
    if "error" in expected:
        assert run.cases == [] and len(run.errors) == 1
        assert str(expected["error"]) in run.errors[0].error
        return
    assert run.errors == []
    got = {k: getattr(run.summary, k) for k in COUNTS}
    assert got == {k: expected[k] for k in COUNTS}, expected["source"]
    assert len({c.id for c in run.cases}) == len(run.cases)


def test_surefire_reruns_across_files_are_duplicates_and_the_last_outcome_is_mavens() -> None:
    run = parse_reports(
        [CORPUS / "surefire-CartTest-WhenEmpty.xml", CORPUS / "surefire-CartTest.xml"]
    )
    assert (run.summary.tests, run.summary.duplicates) == (14, 4)
    last: dict[str, str] = {}
    for case in run.cases:
        last[case.duplicate_of or case.id] = case.status
    final = [last[k] for k in last]
    # Maven: "Tests run: 10, Failures: 2, Errors: 1, Skipped: 2, Flakes: 1" (a flake passed).
    assert (len(final), final.count("failed"), final.count("error"), final.count("skipped")) == (
        10,
        2,
        1,
        2,
    )
    rerun = next(c for c in run.cases if c.name == "totalIncludesTax" and c.duplicate_of)
    assert rerun.id == "com.example.shop.CartTest::totalIncludesTax#2"
    assert [o.kind for o in rerun.other_results] == ["rerunFailure"]


def test_pytest_ids_keep_class_and_number_true_duplicates() -> None:
    cases = parse_report(CORPUS / "pytest-xunit1.xml")
    shared = [c.id for c in cases if c.name == "test_shared"]
    assert shared == [
        "tests/test_shop.py:33::TestPositive::test_shared",
        "tests/test_shop.py:33::TestNegative::test_shared",
    ]
    twice = [c for c in cases if c.name == "test_fails_then_teardown_errors"]
    assert [(c.status, c.duplicate_of) for c in twice] == [
        ("failed", None),
        ("error", twice[0].id),
    ]
    assert twice[1].id == twice[0].id + "#2"


def test_several_results_keep_the_most_severe_and_the_rest_as_detail() -> None:
    cases = {c.name: c for c in parse_report(CORPUS / "jenkins-multi-result.xml")}
    refunds = cases["refunds"]
    assert (refunds.status, refunds.error_type) == ("error", "java.net.SocketException")
    assert refunds.message == "connection reset during teardown"
    assert [(o.kind, o.message) for o in refunds.other_results] == [
        ("failure", "refund total mismatch")
    ]
    assert cases["cancels"].status == "failed"
    assert [o.kind for o in cases["cancels"].other_results] == ["skipped"]
    assert cases["ships"].status == "error"
    assert (cases["gift wrap"].status, cases["gift wrap"].message) == ("skipped", "disabled")
    scale = {c.name: c for c in parse_report(CORPUS / "googletest.xml")}["Scale"]
    assert scale.status == "failed" and len(scale.other_results) == 1
    assert "Which is: 2" in (scale.other_results[0].message or "")


def test_disabled_and_not_run_cases_are_skipped_with_their_reason() -> None:
    gtest = {c.name: c for c in parse_report(CORPUS / "googletest.xml")}
    assert (gtest["DISABLED_Rotate"].status, gtest["DISABLED_Rotate"].message) == (
        "skipped",
        "notrun",
    )
    ctest = {c.name: c for c in parse_report(CORPUS / "ctest.xml")}
    assert (ctest["slow_report"].status, ctest["slow_report"].message) == ("skipped", "Disabled")


def test_kotlin_backticked_frame_gives_its_source_location() -> None:
    case = {c.name: c for c in parse_report(CORPUS / "gradle-kotlin.xml")}["scales by two()"]
    locations = [(loc.path, loc.line) for loc in case.locations]
    # Innermost last: the test's frame, then the code it called, then the assertion library.
    test_at = locations.index(("org/acme/CalculatorTest.kt", 15))
    assert locations[test_at + 1] == ("org/acme/Calculator.kt", 9)
    assert locations[-1] == ("org/junit/jupiter/api/AssertionFailureBuilder.java", 151)
    assert ("java/lang/reflect/Method.java", 569) in locations  # java.base@17/ prefix


def test_phpunit_class_attribute_and_file_give_ids() -> None:
    cases = parse_report(CORPUS / "phpunit.xml")
    assert cases[0].id == "/srv/app/tests/Unit/CartTest.php:12::Tests.Unit.CartTest::testTotal"
