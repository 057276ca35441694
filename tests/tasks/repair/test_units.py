"""Plain repair functions: grouping, patch safety and risk, re-run judgement, routing, commits."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tasks.core.config import RepairSettings
from tasks.core.types import (
    Location,
    MappedFile,
    Mapping,
    TestCaseResult,
    ValidationResult,
)
from tasks.keep.git import BranchExistsError, commit_chain
from tasks.keep.git import NewCommit as GroupCommit
from tasks.model.replies import Alternative, Diagnosis
from tasks.repair.review import judge_rerun
from tasks.repair.risk import parse_patch, risk_reasons
from tasks.repair.routing import route_after_audit, route_after_diagnosis
from tasks.repair.scout import error_type_of, group_failures, message_shape
from tasks.repair.state import (
    Attempt,
    FailureGroup,
    GroupState,
    PatchReview,
    metrics,
)
from tasks.toolchains.registry import get_toolchain


def case(
    id: str,
    message: str,
    *,
    file: str = "spec/models/product_spec.rb",
    status: str = "failed",
    error_type: str | None = "RSpec::Expectations::ExpectationNotMetError",
    locations: list[tuple[str, int]] | None = None,
) -> TestCaseResult:
    return TestCaseResult(
        id=id,
        name=id,
        file=file,
        status=status,  # type: ignore[arg-type]
        message=message,
        error_type=error_type,
        locations=[Location(path=p, line=n) for p, n in (locations or [])],
    )


def diagnosis(wrong_side: str = "code", confidence: float = 0.9, cause: str = "x") -> Diagnosis:
    return Diagnosis(
        root_cause=cause,
        affected_code_blocks=[],
        repair_strategy="fix it",
        confidence=confidence,
        wrong_side=wrong_side,  # type: ignore[arg-type]
        alternatives=[Alternative(root_cause="alt cause", repair_strategy="alt", confidence=0.2)],
    )


RUBY = get_toolchain("ruby-rspec")
PY = get_toolchain("python-pytest")
#: The file rules of a project with no configuration of its own.
RB_RULES = RUBY.file_rules(Path("/nonexistent-project"))
PY_RULES = PY.file_rules(Path("/nonexistent-project"))

MAPPING = Mapping(
    toolchain="ruby-rspec",
    files=[
        MappedFile(
            source="app/models/product.rb",
            kind="model",
            specs=["spec/models/product_spec.rb"],
            expected_spec="spec/models/product_spec.rb",
        )
    ],
    untested=[],
)


def test_failures_with_one_cause_form_one_group_and_others_stay_apart() -> None:
    cases = [
        case("a", "expected: 100\n     got: 120", locations=[("app/models/product.rb", 7)]),
        case("b", "expected: 5\n     got: 6", locations=[("app/models/product.rb", 7)]),
        case("c", "undefined method `name' for nil", error_type="NoMethodError"),
        case("d", "passed", status="passed"),
        case("e", "expected: 1\n     got: 2", locations=[("app/models/order.rb", 3)]),
    ]
    groups = group_failures(cases, RB_RULES, MAPPING)
    assert [[t.id for t in g.tests] for g in groups] == [["a", "b"], ["c"], ["e"]]
    first = groups[0]
    assert first.source == "app/models/product.rb"
    assert first.frame == "app/models/product.rb:7"
    assert first.signature == (
        "RSpec::Expectations::ExpectationNotMetError | expected: <n> | "
        "app/models/product.rb:7 | app/models/product.rb"
    )
    assert first.id.startswith("g-") and first.id != groups[2].id


def test_message_shape_blanks_numbers_strings_and_objects() -> None:
    assert message_shape("expected 'abc' got #<User id=3> at 0xdeadbeef 12.5") == (
        "expected <str> got <obj> at <hex> <n>"
    )


def test_pytest_error_type_comes_from_the_trace_when_the_report_has_none() -> None:
    c = case("t", "assert 6 == 5", error_type=None)
    c.trace = (
        "def test_x():\n>  assert f() == 5\nE  assert 6 == 5\n\ntests/test_p.py:9: AssertionError"
    )
    assert error_type_of(c) == "AssertionError"


DIFF = """\
--- a/app/models/product.rb
+++ b/app/models/product.rb
@@ -1,3 +1,3 @@
 class Product
-  RATE = 6
+  RATE = 5
 end
"""


def test_parse_patch_counts_changed_lines_and_files() -> None:
    info = parse_patch(DIFF)
    assert info.files == ["app/models/product.rb"]
    assert (info.added_lines, info.removed_lines, info.problems) == (1, 1, [])


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("a/../etc/passwd", "b/../etc/passwd", "'..' leaves the repository"),
        ("/etc/passwd", "/etc/passwd", "absolute path"),
        ("a/.git/config", "b/.git/config", "inside .git/"),
    ],
)
def test_unsafe_paths_are_refused(old: str, new: str, why: str) -> None:
    diff = DIFF.replace("a/app/models/product.rb", old).replace("b/app/models/product.rb", new)
    problems = parse_patch(diff).problems
    assert any(why in p for p in problems), problems


def test_symlinks_and_binary_diffs_are_refused() -> None:
    link = (
        "diff --git a/x b/x\nnew file mode 120000\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+/etc\n"
    )
    assert "symbolic links" in parse_patch(link).problems[0]
    binary = "diff --git a/x.png b/x.png\nGIT binary patch\nliteral 3\n"
    assert any("binary" in p for p in parse_patch(binary).problems)


def test_risk_reasons() -> None:
    group = group_failures([case("a", "expected 1")], RB_RULES, MAPPING)[0]
    settings = RepairSettings(max_patch_lines=3, risky_paths=["app/core/*"])
    manifest = DIFF.replace("app/models/product.rb", "Gemfile.lock")
    assert risk_reasons(parse_patch(manifest), None, group, settings, RUBY, RB_RULES) == [
        "Gemfile.lock: dependency manifest or lock file"
    ]
    migration = DIFF.replace("app/models/product.rb", "db/migrate/001_x.rb")
    assert (
        "migration"
        in risk_reasons(parse_patch(migration), None, group, settings, RUBY, RB_RULES)[0]
    )
    core = DIFF.replace("app/models/product.rb", "app/core/money.rb")
    assert "risky path" in risk_reasons(parse_patch(core), None, group, settings, RUBY, RB_RULES)[0]
    ci = DIFF.replace("app/models/product.rb", ".github/workflows/ci.yml")
    assert "CI" in risk_reasons(parse_patch(ci), None, group, settings, RUBY, RB_RULES)[0]
    # The test is wrong, yet production code is edited: a person decides.
    wrong_side = risk_reasons(parse_patch(DIFF), diagnosis("test"), group, settings, RUBY, RB_RULES)
    assert "diagnosis says the test is wrong" in wrong_side[0]
    mocked = risk_reasons(
        parse_patch(DIFF),
        diagnosis("code", cause="the stubbed client mock"),
        group,
        settings,
        RUBY,
        RB_RULES,
    )
    assert "mock" in mocked[0]
    assert risk_reasons(parse_patch(DIFF), diagnosis("code"), group, settings, RUBY, RB_RULES) == []
    big = DIFF.replace("-  RATE = 6\n+  RATE = 5\n", "-a\n-b\n+c\n+d\n")
    assert (
        "more than max_patch_lines (3)"
        in risk_reasons(parse_patch(big), None, group, settings, RUBY, RB_RULES)[0]
    )


def _run(examples: list[TestCaseResult]) -> ValidationResult:
    return ValidationResult(toolchain="ruby-rspec", loaded=True, examples=examples)


def test_judge_rerun_passed_revision_and_wrong_diagnosis() -> None:
    group = group_failures([case("a", "expected 5 got 6")], RB_RULES, MAPPING)[0]
    other_known = case("k", "known failure elsewhere")
    ok = _run([case("a", "", status="passed"), other_known])
    assert judge_rerun(group, ok, [other_known]) == (True, "", False)
    unchanged = _run([case("a", "expected 5 got 6")])
    passed, feedback, wrong = judge_rerun(group, unchanged, [])
    assert (passed, wrong) == (False, True) and "diagnosis looks wrong" in feedback
    moved = _run([case("a", "expected 5 got 7")])
    assert judge_rerun(group, moved, [])[1:] == ("1 of 1 failing examples still fail", False)
    broke = _run([case("a", "", status="passed"), case("n", "boom")])
    assert "breaks passing examples: n" in judge_rerun(group, broke, [])[1]
    not_loaded = ValidationResult(toolchain="ruby-rspec", loaded=False, load_error="SyntaxError")
    assert "could not run: SyntaxError" in judge_rerun(group, not_loaded, [])[1]


def _state() -> GroupState:
    group = FailureGroup(
        id="g-1", signature="s", error_type="E", message_shape="m", frame="", tests=[case("a", "")]
    )
    return GroupState(group=group, diagnoses=[diagnosis()])


def _audited(state: GroupState, verdict: str, wrong: bool = False) -> None:
    audit = PatchReview(verdict=verdict, feedback="fb", diagnosis_wrong=wrong)  # type: ignore[arg-type]
    state.attempts.append(
        Attempt(number=len(state.attempts) + 1, diagnosis_index=0, patch="p", audit=audit)
    )


def test_routing() -> None:
    settings = RepairSettings(max_retries=2)
    state = _state()
    assert route_after_diagnosis(state, settings) == "surgeon"
    state.diagnoses.append(diagnosis(confidence=0.4))
    assert route_after_diagnosis(state, settings) == "human"
    assert "confidence 0.40 is under 0.60" in state.handoff_reasons[0]

    state = _state()
    _audited(state, "NEEDS_REVISION")
    assert route_after_audit(state, settings) == "surgeon"
    _audited(state, "NEEDS_REVISION", wrong=True)
    assert route_after_audit(state, settings) == "diagnose"
    assert "alternative hypothesis was: alt cause" in state.feedback
    _audited(state, "NEEDS_REVISION")
    assert route_after_audit(state, settings) == "human"
    assert state.handoff_reasons == ["retries exhausted: 3 patches audited, none passed"]

    state = _state()
    _audited(state, "RISKY")
    assert route_after_audit(state, settings) == "human"
    state = _state()
    _audited(state, "PASSED")
    assert route_after_audit(state, settings) == "done"


def test_metrics() -> None:
    fixed, human, failed = _state(), _state(), _state()
    fixed.outcome = "fixed"
    human.outcome, human.handoff_reasons = "needs_human", ["risky"]
    failed.outcome = "failed"
    fixed.tokens, human.tokens = 100, 50
    m = metrics([fixed, human, failed])
    assert (m.autonomous_fix_rate, m.human_intervention_rate, m.tokens) == (0.3333, 0.3333, 150)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def test_commit_chain_makes_one_commit_per_group_on_a_new_branch(tmp_path: Path) -> None:
    from tasks.repair.branch import Applied, apply_in_order

    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    (repo / "b.txt").write_text("b\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    fix_a = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n"
    drop_b = "diff --git a/b.txt b/b.txt\ndeleted file mode 100644\n--- a/b.txt\n+++ /dev/null\n"
    drop_b += "@@ -1 +0,0 @@\n-b\n"
    steps = apply_in_order(repo, "", base, [fix_a, drop_b])
    assert all(isinstance(s, Applied) for s in steps)
    trees = [s.tree for s in steps if isinstance(s, Applied)]
    shas = commit_chain(
        repo,
        base,
        "autopilot/fix-1",
        [GroupCommit("fix a", trees[0]), GroupCommit("drop b", trees[1])],
    )
    assert len(shas) == 2
    assert _git(repo, "log", "--format=%s", "autopilot/fix-1").split("\n")[:3] == [
        "drop b",
        "fix a",
        "base",
    ]
    assert _git(repo, "show", "autopilot/fix-1:a.txt") == "A\n"
    assert _git(repo, "ls-tree", "--name-only", "autopilot/fix-1").split() == ["a.txt"]
    assert _git(repo, "rev-parse", "HEAD").strip() == base
    assert _git(repo, "status", "--porcelain") == ""
    with pytest.raises(BranchExistsError):
        commit_chain(repo, base, "autopilot/fix-1", [GroupCommit("x", trees[0])])


def test_the_diagnosis_brings_the_code_it_blames_into_the_context(tmp_path: Path) -> None:
    from tasks.model.replies import CodeBlock
    from tasks.repair.roles import extend_context
    from tasks.repair.state import CodeSnippet, GroupContext

    project = tmp_path / "p"
    (project / "app/models").mkdir(parents=True)
    (project / "app/models/product.rb").write_text("".join(f"line {n}\n" for n in range(1, 101)))
    (project / ".env").write_text("SECRET=1\n")
    (tmp_path / "outside.rb").write_text("outside\n")
    state = _state()
    state.context = GroupContext(
        path="spec/models/product_spec.rb",
        language="ruby",
        failures=[],
        code=[CodeSnippet(path="spec/models/product_spec.rb", start_line=1, end_line=3, text="x")],
        git_changes="",
        failure_output="",
    )
    d = diagnosis()
    d.affected_code_blocks = [
        CodeBlock(file_path="app/models/product.rb", start_line=50, end_line=52, description="x"),
        CodeBlock(file_path=".env", start_line=1, end_line=1, description="secret"),
        CodeBlock(file_path="../outside.rb", start_line=1, end_line=1, description="escape"),
    ]
    state.diagnoses = [d]

    assert extend_context(project, state) == 1
    added = state.context.code[-1]
    assert (added.path, added.start_line, added.end_line) == ("app/models/product.rb", 38, 64)
    assert added.text.splitlines()[0] == "line 38"
    assert extend_context(project, state) == 0  # already covered


def test_a_spec_file_that_did_not_load_is_fixed_when_its_examples_run_and_pass() -> None:
    load_error = TestCaseResult(
        id="spec/models/product_spec.rb",
        name="An error occurred while loading ./spec/models/product_spec.rb.",
        file="spec/models/product_spec.rb",
        status="error",
        error_type="SyntaxError",
        message="unexpected end-of-input",
    )
    group = group_failures([load_error], RB_RULES, MAPPING)[0]
    passing = _run([case("spec/models/product_spec.rb[1:1]", "", status="passed")])
    assert judge_rerun(group, passing, [])[0] is True
    failing = _run([case("spec/models/product_spec.rb[1:1]", "expected 1 got 2")])
    assert judge_rerun(group, failing, [])[:2] == (False, "1 of 1 failing examples still fail")
    elsewhere = _run(
        [case("spec/other_spec.rb[1:1]", "", file="spec/other_spec.rb", status="passed")]
    )
    assert (
        "examples no longer run: spec/models/product_spec.rb"
        in judge_rerun(group, elsewhere, [])[1]
    )


def test_apply_in_order_reports_conflicts_repeats_and_refuses_unsafe_patches(
    tmp_path: Path,
) -> None:
    from tasks.repair.branch import Applied, apply_in_order

    repo = tmp_path / "r"
    (repo / "app").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "app/a.rb").write_text("one\ntwo\nthree\n")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    fix = "--- a/app/a.rb\n+++ b/app/a.rb\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    clash = "--- a/app/a.rb\n+++ b/app/a.rb\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
    evil = "--- /dev/null\n+++ b/../evil.rb\n@@ -0,0 +1 @@\n+x\n"

    out = apply_in_order(repo, "", base, [fix, fix, clash, evil])

    assert isinstance(out[0], Applied)
    assert _git(repo, "cat-file", "-p", f"{out[0].tree}:app/a.rb") == "one\nTWO\nthree\n"
    assert out[1] is None  # the same fix again: already made
    assert isinstance(out[2], str) and out[2].startswith("does not apply on top")
    assert out[3] == "refused: '../evil.rb': '..' leaves the repository"
    assert not (tmp_path / "evil.rb").exists()


def test_a_test_file_is_found_for_reports_that_name_none(tmp_path: Path) -> None:
    from tasks.repair.scout import fill_test_files

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_pricing.py").write_text("")
    (tmp_path / "tests/test_units.py").write_text("")
    from_trace = case("tests.test_pricing::test_ten", "assert 6 == 5", file=None)  # type: ignore[arg-type]
    from_trace.locations = [Location(path="tests/test_pricing.py", line=9)]
    from_class = case("tests.test_units.TestParse::test_kg", "boom", file=None)  # type: ignore[arg-type]
    from_class.classname = "tests.test_units.TestParse"
    unknown = case("x::y", "boom", file=None)  # type: ignore[arg-type]
    unknown.classname = "tests.gone"
    out = fill_test_files([from_trace, from_class, unknown], tmp_path, PY)
    assert [c.file for c in out] == ["tests/test_pricing.py", "tests/test_units.py", None]


def test_parse_patch_reads_hunks_by_their_counts() -> None:
    diff = (
        "--- a/db/seeds.sql\n+++ b/db/seeds.sql\n@@ -1,2 +1,2 @@\n"
        "--- old comment\n+-- new comment\n select 1;\n"
        "--- a/app/x.rb\n+++ b/app/x.rb\n@@ -3 +3 @@\n-a\n+b\n"
    )
    info = parse_patch(diff)
    assert info.files == ["db/seeds.sql", "app/x.rb"]
    assert (info.added_lines, info.removed_lines) == (2, 2)


def test_a_patch_that_weakens_or_skips_tests_is_risky() -> None:
    group = group_failures([case("a", "expected 1")], RB_RULES, MAPPING)[0]
    settings = RepairSettings()
    weakened = (
        "--- a/spec/models/product_spec.rb\n+++ b/spec/models/product_spec.rb\n@@ -1,3 +1,2 @@\n"
        ' it "reserves" do\n-  expect(product.stock).to eq(1)\n end\n'
    )
    assert risk_reasons(
        parse_patch(weakened), diagnosis("test"), group, settings, RUBY, RB_RULES
    ) == ["spec/models/product_spec.rb: removes 1 assertion(s)"]
    skipped = (
        "--- a/tests/test_p.py\n+++ b/tests/test_p.py\n@@ -1,2 +1,3 @@\n"
        "+@pytest.mark.skip\n def test_x():\n     assert f() == 5\n"
    )
    assert risk_reasons(parse_patch(skipped), diagnosis("test"), group, settings, PY, PY_RULES) == [
        "tests/test_p.py: skips or disables a test"
    ]
    updated = (
        "--- a/tests/test_p.py\n+++ b/tests/test_p.py\n@@ -1,2 +1,2 @@\n"
        " def test_x():\n-    assert f() == 5\n+    assert f() == 6\n"
    )
    assert (
        risk_reasons(parse_patch(updated), diagnosis("test"), group, settings, PY, PY_RULES) == []
    )
