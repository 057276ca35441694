"""The static rubric (judge/static.py) and the rubric file (judge/rubric.md).

Every rule is shown firing on a minimal example, at the right line, and NOT firing on its
precise counterpart.
"""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from judge.rubric import RUBRIC_LEVELS, default_rubric_path, load_rubric
from judge.static import (
    FORBIDDEN_CAP,
    FORBIDDEN_RULES,
    RULES,
    check_file,
    check_spec,
    gate_passes,
    score,
)
from tasks.core.errors import BadInputError
from tasks.core.types import Finding, StaticVerdict
from tasks.toolchains.registry import get_toolchain
from tests.paths import EXAMPLES

RUBY = get_toolchain("ruby-rspec")
PYTHON = get_toolchain("python-pytest")


def ruby_example(body: str, setup: str = "") -> str:
    """One RSpec example; the first line of `body` is line 4 of the file."""
    return (
        "RSpec.describe Thing do\n"
        + textwrap.indent(textwrap.dedent(setup), "  ")
        + '  let(:thing) { Thing.new }\n  it "works" do\n'
        + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
        + "\n  end\nend\n"
    )


def py_test(body: str) -> str:
    """One pytest test; the first line of `body` is line 4 of the file."""
    return (
        "import pytest\n\ndef test_it():\n"
        + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
        + "\n"
    )


#: Rules reported on the example's own line (3), not on the offending statement (4).
EXAMPLE_LEVEL_RULES = {"no-assertion", "over-mocking"}


def expected_line(rule: str) -> int:
    return 3 if rule in EXAMPLE_LEVEL_RULES else 4


def rules_at(verdict: StaticVerdict) -> list[tuple[str, int]]:
    return [(f.rule, f.line) for f in verdict.findings]


def rules_of(verdict: StaticVerdict) -> set[str]:
    return {f.rule for f in verdict.findings}


def test_helpers_put_the_body_at_line_4() -> None:
    assert ruby_example("expect(1).to eq(1)").splitlines()[3].strip() == "expect(1).to eq(1)"
    assert py_test("assert 1 == 1").splitlines()[3].strip() == "assert 1 == 1"


# (rule, bad body, precise body): the bad body's first line is the finding's line.
RUBY_RULES = [
    ("vague-matcher", "expect(thing.total).to be_truthy", "expect(thing.total).to eq(100)"),
    ("vague-matcher", "expect(thing.total).to be_falsey", "expect(thing.total).to eq(false)"),
    ("vague-matcher", "expect(thing.name).to be_present", 'expect(thing.name).to eq("Lamp")'),
    ("vague-matcher", "expect(thing.name).to be_blank", 'expect(thing.name).to eq("")'),
    ("vague-matcher", "expect(thing.total).to be_between(1, 9)", "expect(thing.total).to eq(5)"),
    ("vague-matcher", "expect(thing.attrs).to include(:name)", "expect(thing.attrs).to eq(a: 1)"),
    (
        "vague-matcher",
        "expect(thing.attrs).to include(:a, :b)",
        "expect(thing.attrs).to include(a: 1)",
    ),
    ("vague-matcher", "expect(thing.total).to(be_truthy)", "expect(thing.total).to(eq(3))"),
    ("vague-matcher", "thing.total.should be_truthy", "thing.total.should eq(3)"),
    (
        "vague-matcher",
        "expect(thing.n).to eq(1).and be_truthy",
        "expect(thing.n).to eq(1).and be_odd",
    ),
    ("type-only", "expect(thing.items).to be_an(Array)", "expect(thing.items).to eq([1, 2])"),
    (
        "type-only",
        "expect(thing).to be_a(Thing)",
        "expect(thing).to be_a(Thing)\nexpect(thing.n).to eq(1)",
    ),
    (
        "not-raise-error",
        "expect { thing.save }.not_to raise_error",
        "expect { thing.save }.to change { thing.saved }.from(false).to(true)",
    ),
    (
        "not-raise-error",
        "expect { thing.save }.to_not raise_error",
        "expect(thing.save).to eq(true)",
    ),
    (
        "raises-without-match",
        "expect { thing.pay(-1) }.to raise_error(ArgumentError)",
        'expect { thing.pay(-1) }.to raise_error(ArgumentError, "amount must be positive")',
    ),
    (
        "raises-without-match",
        "expect { thing.pay(-1) }.to raise_error",
        "expect { thing.pay(-1) }.to raise_error(ArgumentError) { |e| expect(e.message).to eq('x') }",  # noqa: E501
    ),
    ("private-call", "expect(thing.send(:secret)).to eq(1)", "expect(thing.secret).to eq(1)"),
    (
        "private-call",
        'expect(thing.__send__("secret")).to eq(1)',
        "expect(thing.public_send(:secret)).to eq(1)",
    ),
    (
        "private-call",
        "expect(thing.instance_variable_get(:@x)).to eq(1)",
        "expect(thing.x).to eq(1)",
    ),
    ("no-assertion", "thing.save", "expect(thing.save).to eq(true)"),
    (
        "any-instance-mock",
        "allow_any_instance_of(Thing).to receive(:total).and_return(1)\nexpect(thing.n).to eq(1)",
        "allow(thing).to receive(:total).and_return(1)\nexpect(thing.n).to eq(1)",
    ),
    (
        "over-mocking",
        "a = double\nb = double\nc = instance_double(Thing)\nd = spy\nexpect(thing.n).to eq(1)",
        "a = double\nb = double\nc = instance_double(Thing)\nexpect(thing.n).to eq(1)",
    ),
    ("sleep", "sleep 1\nexpect(thing.n).to eq(1)", "thing.wait\nexpect(thing.n).to eq(1)"),
    (
        "sleep",
        "Kernel.sleep(0.1)\nexpect(thing.n).to eq(1)",
        "clock.sleep(1)\nexpect(thing.n).to eq(1)",
    ),
    ("instance-variable", "@user = 1\nexpect(@user).to eq(1)", "user = 1\nexpect(user).to eq(1)"),
]


@pytest.mark.parametrize(("rule", "bad", "good"), RUBY_RULES)
def test_ruby_rule_fires_on_bad_and_not_on_precise(rule: str, bad: str, good: str) -> None:
    flagged = check_spec("spec/thing_spec.rb", ruby_example(bad), RUBY)
    assert (rule, expected_line(rule)) in rules_at(flagged), flagged.findings
    clean = check_spec("spec/thing_spec.rb", ruby_example(good), RUBY)
    assert clean.findings == [], clean.findings
    assert clean.score == 1.0
    assert flagged.score < clean.score
    assert all(f.rule in RULES and f.path == "spec/thing_spec.rb" for f in flagged.findings)


def test_ruby_precise_matchers_that_look_vague_are_accepted() -> None:
    # Decision (documented in tasks/toolchains/ruby/rubric.py): be_nil and be_empty pin one exact
    # value.
    body = "expect(thing.parent).to be_nil\nexpect(thing.items).to be_empty"
    assert check_spec("spec/t_spec.rb", ruby_example(body), RUBY).findings == []


def test_ruby_one_liners_and_helpers_count_as_expectations() -> None:
    text = textwrap.dedent(
        """\
        RSpec.describe Thing do
          subject { Thing.new.total }
          it { is_expected.to eq(3) }
          it { should eq(3) }
          its(:size) { is_expected.to eq(4) }
          it "uses a project assertion helper" do
            expect_json(response, total: 3)
          end
          it "is pending without a block"
        end
        """
    )
    verdict = check_spec("spec/t_spec.rb", text, RUBY)
    assert verdict.findings == []
    assert verdict.score == 1.0


def test_ruby_one_liner_with_vague_matcher_is_flagged() -> None:
    text = "RSpec.describe Thing do\n  subject { 1 }\n  it { should be_present }\nend\n"
    assert rules_at(check_spec("spec/t_spec.rb", text, RUBY)) == [("vague-matcher", 3)]


def test_ruby_over_mocking_counts_setup_hooks_that_run_for_the_example() -> None:
    setup = """\
        before do
          allow(repo).to receive(:find).and_return(1)
          allow(repo).to receive(:save)
          allow(mailer).to receive(:deliver)
        end
        """
    two_stubs = "allow(clock).to receive(:now)\nexpect(thing.n).to eq(1)"
    verdict = check_spec("spec/t_spec.rb", ruby_example(two_stubs, setup), RUBY)
    assert rules_of(verdict) == {"over-mocking"}
    # The same three stubs in a sibling group do not run for this example.
    sibling = "describe 'other' do\n" + textwrap.indent(textwrap.dedent(setup), "  ") + "end\n"
    verdict = check_spec("spec/t_spec.rb", ruby_example(two_stubs, sibling), RUBY)
    assert verdict.findings == []


def test_ruby_ivar_in_before_hook_is_flagged_but_not_in_helper_method() -> None:
    text = textwrap.dedent(
        """\
        RSpec.describe Thing do
          before { @thing = Thing.new }
          def helper
            @memo ||= Thing.new
          end
          it "works" do
            expect(@thing.n).to eq(helper.n)
          end
        end
        """
    )
    assert rules_at(check_spec("spec/t_spec.rb", text, RUBY)) == [("instance-variable", 2)]


def test_ruby_send_with_computed_name_is_not_a_private_call() -> None:
    body = "%i[name price].each { |attr| expect(thing.send(attr)).to eq(1) }"
    assert check_spec("spec/t_spec.rb", ruby_example(body), RUBY).findings == []


def test_ruby_syntax_error_scores_zero_and_fails_the_gate() -> None:
    text = ruby_example("expect(thing.total.to eq(100)")
    verdict = check_spec("spec/t_spec.rb", text, RUBY)
    assert [f.rule for f in verdict.findings] == ["syntax"]
    assert verdict.score == 0.0
    assert not gate_passes(verdict)


def test_ruby_missing_end_is_a_syntax_finding() -> None:
    text = 'RSpec.describe Thing do\n  it "x" do\n    expect(1).to eq(1)\n  end\n'
    assert [f.rule for f in check_spec("spec/t_spec.rb", text, RUBY).findings] == ["syntax"]


def test_ruby_file_without_examples_fails_the_gate() -> None:
    verdict = check_spec("spec/t_spec.rb", "RSpec.describe Thing do\nend\n", RUBY)
    assert [f.rule for f in verdict.findings] == ["no-examples"]
    assert verdict.score == 0.0
    assert not gate_passes(verdict)


PY_RULES = [
    ("bare-assert", "assert total(1)", "assert total(1) == 3"),
    ("bare-assert", "assert not result", "assert result == []"),
    ("bare-assert", "assert result.ok", "assert result.ok is True"),
    ("not-none-only", "assert total(1) is not None", "assert total(1) is None"),
    (
        "not-none-only",
        "assert total(1) is not None",
        "result = total(1)\nassert result is not None\nassert result == 3",
    ),
    ("type-only", "assert isinstance(total(1), int)", "assert total(1) == 3"),
    ("no-assertion", "total(1)", "assert total(1) == 3"),
    (
        "raises-without-match",
        "with pytest.raises(ValueError):\n    total(-1)",
        'with pytest.raises(ValueError, match="must be positive"):\n    total(-1)',
    ),
    (
        "raises-without-match",
        "pytest.raises(ValueError, total, -1)",
        'with pytest.raises(ValueError) as err:\n    total(-1)\nassert str(err.value) == "bad"',
    ),
    ("private-call", "assert thing._secret() == 1", "assert thing.secret() == 1"),
    ("private-call", "assert mod._LIMIT == 3", "assert mod.LIMIT == 3"),
    (
        "over-mocking",
        "a = mock.MagicMock()\nb = mock.Mock()\nc = MagicMock()\n"
        "with mock.patch('m.f'):\n    assert total(a, b, c) == 1",
        "a = mock.MagicMock()\nb = mock.Mock()\nc = MagicMock()\nassert total(a, b, c) == 1",
    ),
    ("sleep", "time.sleep(1)\nassert total(1) == 3", "clock.sleep(1)\nassert total(1) == 3"),
]


@pytest.mark.parametrize(("rule", "bad", "good"), PY_RULES)
def test_python_rule_fires_on_bad_and_not_on_precise(rule: str, bad: str, good: str) -> None:
    flagged = check_spec("tests/test_x.py", py_test(bad), PYTHON)
    assert (rule, expected_line(rule)) in rules_at(flagged), flagged.findings
    clean = check_spec("tests/test_x.py", py_test(good), PYTHON)
    assert clean.findings == [], clean.findings
    assert clean.score == 1.0
    assert flagged.score < clean.score
    assert all(f.rule in RULES and f.path == "tests/test_x.py" for f in flagged.findings)


def test_python_private_import_and_from_time_import_sleep() -> None:
    text = textwrap.dedent(
        """\
        from time import sleep as nap
        from shop.pricing import _round, total


        def test_total():
            nap(1)
            assert total(1) == _round(1)
        """
    )
    verdict = check_spec("tests/test_x.py", text, PYTHON)
    assert rules_at(verdict) == [("private-call", 2), ("sleep", 6)]


def test_python_allowed_underscore_uses() -> None:
    text = textwrap.dedent(
        """\
        class TestThing:
            def _make(self):
                return Thing()

            def test_len(self):
                point = self._make().point()
                assert point._replace(x=1) == (1, 2)
                assert point.__len__() == 2
        """
    )
    assert check_spec("tests/test_x.py", text, PYTHON).findings == []


def test_python_over_mocking_counts_patch_decorators() -> None:
    text = textwrap.dedent(
        """\
        from unittest import mock


        @mock.patch("shop.a")
        @mock.patch("shop.b")
        @mock.patch.object(Shop, "c")
        def test_checkout(a, b, c, mocker):
            mocker.patch("shop.d")
            assert checkout() == 1
        """
    )
    assert rules_at(check_spec("tests/test_x.py", text, PYTHON)) == [("over-mocking", 7)]


def test_python_collects_like_pytest() -> None:
    text = textwrap.dedent(
        """\
        import unittest


        def helper():
            compute()


        class TestA:
            def test_a(self):
                assert f() == 1


        class Checks(unittest.TestCase):
            def test_b(self):
                self.assertEqual(f(), 1)


        class NotATest:
            def test_ignored(self):
                pass


        def test_mock_assertion_counts(m):
            m.assert_called_once_with(1)
        """
    )
    verdict = check_spec("tests/test_x.py", text, PYTHON)
    assert verdict.findings == []
    assert verdict.score == 1.0


def test_python_syntax_error_scores_zero_and_fails_the_gate() -> None:
    verdict = check_spec("tests/test_x.py", py_test("assert total(1 == 3"), PYTHON)
    assert [f.rule for f in verdict.findings] == ["syntax"]
    assert verdict.findings[0].line == 4
    assert verdict.score == 0.0
    assert not gate_passes(verdict)


def test_python_file_without_tests_fails_the_gate() -> None:
    verdict = check_spec("tests/test_x.py", "def helper():\n    return 1\n", PYTHON)
    assert [f.rule for f in verdict.findings] == ["no-examples"]
    assert not gate_passes(verdict)


def test_precise_specs_score_higher_than_vague_ones() -> None:
    precise = ["expect(t.total).to eq(100)", 'expect(t.name).to eq("Lamp")', "expect(t.n).to eq(2)"]
    vague = ["expect(t.total).to be_truthy", "expect(t.name).to be_present", "expect(t.n).to eq(2)"]
    all_vague = ["expect(t.total).to be_truthy", "expect(t.name).to be_present"]

    def spec(bodies: list[str]) -> str:
        examples = "".join(f'  it "e{i}" do\n    {b}\n  end\n' for i, b in enumerate(bodies))
        return f"RSpec.describe T do\n{examples}end\n"

    scores = [
        check_spec("spec/t_spec.rb", spec(s), RUBY).score for s in (precise, vague, all_vague)
    ]
    assert scores[0] == 1.0
    assert scores[0] > scores[1] > scores[2]
    assert scores[1] == pytest.approx(1 - 2 / 3, abs=1e-3)
    assert scores[2] == 0.0


def test_score_formula_and_forbidden_cap() -> None:
    def finding(rule: str) -> Finding:
        return Finding(path="p", line=1, rule=rule, message="m")

    assert score([], 4) == 1.0
    assert score([finding("sleep")], 4) == pytest.approx(1 - 0.25 / 4, abs=1e-3)
    assert score([finding("vague-matcher")] * 10, 4) == 0.0
    # One forbidden pattern in a big file cannot look good.
    assert score([finding("private-call")], 20) == FORBIDDEN_CAP
    assert score([finding("some-future-rule")], 2) == 0.5
    assert score([], 0) == 0.0


def test_gate_passes_only_without_forbidden_findings() -> None:
    vague = check_spec("spec/t_spec.rb", ruby_example("expect(t.a).to be_truthy"), RUBY)
    assert vague.findings and gate_passes(vague)
    broken = check_spec("spec/t_spec.rb", ruby_example("t.send(:secret)"), RUBY)
    assert rules_of(broken) == {"private-call", "no-assertion"}
    assert not gate_passes(broken)
    assert broken.score <= FORBIDDEN_CAP


def test_forbidden_rules_are_the_structural_ones() -> None:
    assert {
        "syntax",
        "no-examples",
        "no-assertion",
        "private-call",
        "not-raise-error",
        "any-instance-mock",
        "result-hook",
        "hidden-tests",
    } == FORBIDDEN_RULES
    assert all(r.weight > 0 for r in RULES.values())


def test_check_file_parses_with_the_projects_toolchain(tmp_path: Path) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "spec" / "a_spec.rb").write_text(ruby_example("expect(t.a).to be_truthy"))
    (tmp_path / "tests" / "test_a.py").write_text(py_test("assert total(1)"))
    ruby = check_file(tmp_path, "spec/a_spec.rb", RUBY)
    assert rules_at(ruby) == [("vague-matcher", 4)]
    assert ruby.findings[0].path == "spec/a_spec.rb"
    assert rules_at(check_file(tmp_path, "tests/test_a.py", PYTHON)) == [("bare-assert", 4)]


def test_check_file_rejects_bad_input_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "a.js").write_text("test()")
    (tmp_path / "bin_spec.rb").write_bytes(b"\xff\xfe\x00 not utf-8")
    outside = tmp_path.parent / f"{tmp_path.name}_outside_spec.rb"
    outside.write_text(ruby_example("expect(1).to eq(1)"))
    cases = {
        "a.js": "not a ruby test file",
        "bin_spec.rb": "not UTF-8",
        "missing_spec.rb": "cannot read",
        f"../{outside.name}": "outside the repository",
    }
    for rel, reason in cases.items():
        with pytest.raises(BadInputError) as err:
            check_file(tmp_path, rel, RUBY)
        assert rel in str(err.value) and reason in str(err.value)
        assert "\n" not in str(err.value)


def test_an_unknown_language_has_no_toolchain_to_parse_it() -> None:
    from tasks.core.errors import ConfigError
    from tasks.toolchains.registry import by_language

    with pytest.raises(ConfigError, match="no toolchain for language 'java'"):
        by_language("java")


def test_rubric_levels_are_exactly_the_contract() -> None:
    rubric = load_rubric()
    assert set(rubric.levels) == {1.0, 0.8, 0.6, 0.4, 0.2, 0.0} == RUBRIC_LEVELS
    assert rubric.levels[0.8] == "Precise everywhere tested, but one or two edge cases missing."
    assert "private methods" in rubric.levels[0.0]
    assert rubric.version == "1.2"
    assert rubric.sha256 == hashlib.sha256(default_rubric_path().read_bytes()).hexdigest()
    assert not rubric.text.startswith("---")
    for bad in ("be_truthy", "not_to raise_error", "send", "eq(100)", "change { User.count }"):
        assert bad in rubric.text


def test_rubric_static_gate_list_is_known_rules_with_the_forbidden_and_vague_ones() -> None:
    gate = load_rubric().static_gate
    assert set(gate) <= set(RULES)
    assert set(gate) == FORBIDDEN_RULES | {"vague-matcher"}
    for rule in gate:  # each is described where the judge reads the rubric
        assert f"- `{rule}`:" in load_rubric().text


def test_rubric_without_a_static_gate_list_is_rejected(tmp_path: Path) -> None:
    broken = tmp_path / "rubric.md"
    broken.write_text(default_rubric_path().read_text().replace("- `", "* `"))
    with pytest.raises(BadInputError, match="'Static gate' section lists no rule"):
        load_rubric(broken)


def test_rubric_nearest_level() -> None:
    rubric = load_rubric()
    assert rubric.nearest_level(0.74) == 0.8
    assert rubric.nearest_level(0.7) == 0.8  # a tie goes up: 0.7 reaches min_judge 0.7
    assert rubric.nearest_level(0.69) == 0.6 and rubric.nearest_level(0.5) == 0.6
    assert rubric.nearest_level(-3) == 0.0
    assert rubric.nearest_level(1.2) == 1.0


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda t: t.replace("| 0.2 |", "| 0.3 |"), "levels must be exactly"),
        (lambda t: t.replace("| 0.4 | Some", "| 0.6 | Some"), "level 0.6 defined twice"),
        (lambda t: t.replace('version: "1.2"\n', ""), "needs a version"),
        (lambda t: t.split("---", 2)[2], "no YAML front matter"),
    ],
)
def test_broken_rubric_is_rejected_naming_the_file(tmp_path: Path, edit, reason: str) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "rubric.md"
    broken.write_text(edit(default_rubric_path().read_text()))
    with pytest.raises(BadInputError) as err:
        load_rubric(broken)
    assert str(broken) in str(err.value) and reason in str(err.value)


def test_rubric_hash_changes_with_the_text(tmp_path: Path) -> None:
    copy = tmp_path / "rubric.md"
    copy.write_text(default_rubric_path().read_text() + "\nOne more sentence.\n")
    assert load_rubric(copy).sha256 != load_rubric().sha256


def test_smoke_over_the_example_projects() -> None:
    files = [
        (EXAMPLES / "rails_shop", p) for p in (EXAMPLES / "rails_shop").glob("spec/**/*_spec.rb")
    ] + [
        (EXAMPLES / "py_inventory", p)
        for p in (EXAMPLES / "py_inventory").glob("tests/**/test_*.py")
    ]
    assert files
    for repo, path in files:
        chain = RUBY if repo.name == "rails_shop" else PYTHON
        verdict = check_file(repo, str(path.relative_to(repo)), chain)
        assert "syntax" not in rules_of(verdict), (path, verdict.findings)
        assert 0.0 <= verdict.score <= 1.0
        assert rules_of(verdict) <= set(RULES)


def test_hostile_input_becomes_a_syntax_finding_not_a_crash() -> None:
    deep_python = "def test_a():\n    assert " + "+".join(["a"] * 20000) + " == 1\n"
    null_python = "\x00def test_a():\n    assert 1 == 1\n"
    for text in (deep_python, null_python):
        verdict = check_spec("tests/test_x.py", text, PYTHON)
        assert [f.rule for f in verdict.findings] == ["syntax"]
        assert verdict.score == 0.0
    long_chain = ruby_example("expect(t.n).to " + ".and ".join(["be_truthy"] * 3000))
    verdict = check_spec("spec/t_spec.rb", long_chain, RUBY)
    assert len(verdict.findings) == 3000
    assert {f.rule for f in verdict.findings} == {"vague-matcher"}


def test_ruby_expectations_in_a_helper_method_count() -> None:
    text = textwrap.dedent(
        """\
        RSpec.describe Thing do
          def check_total(thing)
            expect(thing.total).to eq(3)
          end

          def check_all(thing)
            check_total(thing)
          end

          def build_thing
            Thing.new
          end

          it "delegates its check" do
            check_all(Thing.new)
          end

          it "only builds" do
            build_thing
          end
        end
        """
    )
    verdict = check_spec("spec/t_spec.rb", text, RUBY)
    assert rules_at(verdict) == [("no-assertion", 18)]


def test_python_assertions_in_a_helper_function_count() -> None:
    text = textwrap.dedent(
        """\
        def check_total(result):
            assert result.total == 3


        def check_all(result):
            check_total(result)


        def make():
            return compute()


        def test_delegates():
            check_all(compute())


        def test_only_builds():
            make()
        """
    )
    assert rules_at(check_spec("tests/test_x.py", text, PYTHON)) == [("no-assertion", 17)]
