"""The quality loops of generate_for_file (issue 15): what a gate found goes back to the
generator. Real pytest/rspec, coverage and linters in bwrap on copies of the example apps, the
real model client against the scripted Mistral server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings, Settings, load_settings
from tasks.generate.context import build_context
from tasks.generate.loop import generate_for_file
from tasks.generate.skills import choose_skill
from tasks.generate.targets import Target
from tasks.generate.types import FileOutcome
from tasks.model.client import ModelClient
from tasks.model.transport import Backoff
from tasks.sandbox.make import make_runner
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import make_example_repo
from tests.fakes.mistral_server import MistralServer, RecordedRequest, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_nightly_rails import GOOD_SPEC, ORDERS_FACTORY
from tests.tasks.generate.test_loop import GOOD, PARTIAL, SPEC, TARGET, files_reply
from tests.tasks.generate.test_mutation import STRONG, WEAK

pytestmark = pytest.mark.slow

RB_SOURCE = "app/models/customer.rb"
RB_SPEC = "spec/models/customer_spec.rb"
RB_FACTORY = "spec/factories/orders.rb"
RB_TARGET = Target(
    source=RB_SOURCE, kind="model", spec=RB_SPEC, reason="untested", coverage_before=0.0
)
# Passes and covers, but proves validity with a vague matcher (rejected by the static gate).
TRUTHY_SPEC = GOOD_SPEC.replace(
    """      customer = create(:customer, email: "  Ada@Example.COM ")
      expect(customer.email).to eq("ada@example.com")""",
    """      customer = create(:customer, email: "  Ada@Example.COM ")
      expect(customer.email).to be_truthy""",
)


def verdict(score: float, reasons: list[str], missing: list[str] | None = None) -> str:
    return json.dumps({"score": score, "reasons": reasons, "missing": missing or []})


def rb_reply(spec: str) -> str:
    body = "\n".join(
        f"{p}\n```ruby\n{t}```\n" for p, t in ((RB_SPEC, spec), (RB_FACTORY, ORDERS_FACTORY))
    )
    return "The spec and an orders factory.\n\n" + body


def settings(**gates: object) -> Settings:
    overrides = {"model.judge_samples": 1, "gates.flaky_runs": 1, "model.max_reasks": 1}
    overrides |= {f"gates.{k}": v for k, v in gates.items()}
    return load_settings(None, overrides)


def run(
    project: Path,
    target: Target,
    stack: str,
    config: Settings,
    iterations: int = 4,
) -> FileOutcome:
    client = ModelClient.from_settings(config, backoff=Backoff(initial_ms=10, max_ms=50))
    runner = make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=project)
    chain = get_toolchain(stack)
    try:
        return generate_for_file(
            project,
            target,
            chain=chain,
            skill=choose_skill(target.source, target.kind),
            context=build_context(project, target, chain),
            runner=runner,
            client=client,
            settings=config,
            max_iterations=iterations,
        )
    finally:
        client.close()


def generator(server: MistralServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.schema_name is None]


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    return make_example_repo("py_inventory", tmp_path / "repo")


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    return make_example_repo("rails_shop", tmp_path / "shop")


def test_judge_reasons_go_back_and_the_rewrite_is_accepted(
    inventory: Path, mistral_server: MistralServer
) -> None:
    first = verdict(0.4, ["summary is only checked by its keys"], ["render_table of empty stock"])
    mistral_server.add(
        Rule(name="judge", schema_name="judge_verdict", replies=[first, verdict(0.8, ["exact"])])
    )
    mistral_server.add(
        Rule(name="fix", contains="# Task: fix the tests", replies=[files_reply(GOOD)])
    )
    mistral_server.add(Rule(name="generate", replies=[files_reply(PARTIAL)]))

    outcome = run(inventory, TARGET, "python-pytest", settings(min_coverage=0.0))

    assert outcome.verdict == "accepted", outcome.reasons
    assert outcome.judge_scores == [0.4, 0.8] and outcome.judge_score == 0.8
    assert outcome.iterations == 2 and outcome.files == {SPEC: GOOD}
    assert [e.prompt_name for e in outcome.exchanges] == ["generate", "judge", "fix", "judge"]
    fix = generator(mistral_server)[1].text
    assert "scored them 0.40" in fix and "at least 0.70" in fix
    assert "summary is only checked by its keys" in fix
    assert "render_table of empty stock" in fix


def test_judge_round_never_passes_max_iterations(
    inventory: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[verdict(0.4, ["vague"])]))
    mistral_server.add(Rule(replies=[files_reply(GOOD)]))

    outcome = run(inventory, TARGET, "python-pytest", settings(), iterations=2)

    assert outcome.verdict == "rejected" and outcome.gate == "judge"
    assert outcome.judge_scores == [0.4, 0.4] and outcome.iterations == 2
    assert len(generator(mistral_server)) == 2


def test_be_truthy_is_rejected_fed_back_with_its_line_and_corrected(
    shop: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[verdict(0.8, ["exact"])]))
    mistral_server.add(
        Rule(name="fix", contains="# Task: fix the tests", replies=[rb_reply(GOOD_SPEC)])
    )
    mistral_server.add(Rule(name="generate", replies=[rb_reply(TRUTHY_SPEC)]))

    outcome = run(shop, RB_TARGET, "ruby-rspec", settings())

    assert outcome.verdict == "accepted", outcome.reasons
    assert outcome.iterations == 2
    assert outcome.files[RB_SPEC] == GOOD_SPEC
    fix = generator(mistral_server)[1].text
    line = TRUTHY_SPEC.splitlines().index("      expect(customer.email).to be_truthy") + 1
    assert f"{RB_SPEC}:{line} vague-matcher" in fix, fix
    assert "rejected patterns" in fix


def test_static_reject_setting_overrides_the_rubric_list(
    shop: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[verdict(0.8, ["exact"])]))
    mistral_server.add(Rule(replies=[rb_reply(TRUTHY_SPEC)]))

    # Without vague-matcher in the list, be_truthy only lowers the static score.
    outcome = run(shop, RB_TARGET, "ruby-rspec", settings(static_reject=["no-assertion"]))

    assert outcome.verdict == "accepted", outcome.reasons
    assert outcome.iterations == 1
    assert outcome.static_score is not None and outcome.static_score < 1.0


def test_settings_reject_an_empty_rule_id() -> None:
    from tasks.core.errors import ConfigError

    with pytest.raises(ConfigError):
        settings(static_reject=[""])


CSV_SOURCE = "src/inventory/csv_import.py"
CSV_SPEC = "tests/test_csv_import.py"
CSV_TARGET = Target(
    source=CSV_SOURCE, kind="python", spec=CSV_SPEC, reason="untested", coverage_before=0.0
)
# Loads the module and checks a constant: 7 of csv_import's 19 lines (37%), load_csv never run.
CSV_40 = """\
from inventory.csv_import import REQUIRED


def test_required_columns_in_order():
    assert REQUIRED == ("sku", "name", "price_cents", "quantity")
"""


def test_untested_file_at_about_40_percent_is_rejected_with_the_uncovered_lines_marked(
    inventory: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(replies=[files_reply(CSV_40, CSV_SPEC)]))

    # A gain of 0.37 over the baseline of 0 no longer passes: the file had no spec.
    outcome = run(inventory, CSV_TARGET, "python-pytest", settings(), iterations=2)

    assert outcome.verdict == "rejected" and outcome.gate == "coverage"
    assert outcome.coverage_after == round(7 / 19, 4)
    assert outcome.reasons[0] == "coverage 37% < 90%"
    assert outcome.reasons[1] == "uncovered lines: 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27"
    first, fix = (r.text for r in generator(mistral_server))
    # The first prompt numbers the source; the fix prompt marks what the run missed, in place.
    # (the target has no baseline run, so nothing is marked yet).
    assert "   16 |     stock = stock if stock is not None else Stock()" in first
    assert ">> " not in first
    assert ">> 16 |     stock = stock if stock is not None else Stock()" in fix
    assert ">> 27 |     return stock" in fix
    assert "   14 | def load_csv(text: str, stock: Stock | None = None) -> Stock:" in fix
    assert "coverage 37% < 90%" in fix


PRICING_TARGET = Target(
    source="src/inventory/pricing.py",
    kind="python",
    specs=["tests/test_pricing.py"],
    spec="tests/test_pricing.py",
    reason="low-coverage",
    coverage_before=0.8,
)


def test_mutation_score_is_reported_for_an_accepted_file(
    inventory: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[verdict(0.8, ["exact"])]))
    mistral_server.add(Rule(replies=[files_reply(WEAK, "tests/test_pricing.py")]))

    # The gate is off by default: the score is measured and reported, never decides.
    outcome = run(inventory, PRICING_TARGET, "python-pytest", settings(max_mutants=10))

    assert outcome.verdict == "accepted", outcome.reasons
    assert outcome.mutation is not None and outcome.mutation.made == 10
    assert outcome.mutation_score == 0.7 == outcome.public().mutation_score
    assert [s.line for s in outcome.mutation.survivors] == [26, 30, 37]
    assert [g.gate for g in outcome.gates][-1] == "mutation" and outcome.gates[-1].passed
    assert (inventory / "src/inventory/pricing.py").read_text() == (
        Path(__file__).parents[3] / "examples/py_inventory/src/inventory/pricing.py"
    ).read_text()


def test_surviving_mutants_are_fed_back_and_the_stronger_tests_accepted(
    inventory: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[verdict(0.8, ["exact"])]))
    mistral_server.add(
        Rule(
            name="fix",
            contains="# Task: fix the tests",
            replies=[files_reply(STRONG, "tests/test_pricing.py")],
        )
    )
    mistral_server.add(Rule(name="generate", replies=[files_reply(WEAK, "tests/test_pricing.py")]))

    outcome = run(
        inventory, PRICING_TARGET, "python-pytest", settings(max_mutants=10, min_mutation=0.9)
    )

    assert outcome.verdict == "accepted", outcome.reasons
    assert outcome.iterations == 2 and outcome.mutation_score == 1.0
    fix = generator(mistral_server)[1].text
    assert "kill 7 of 10 small changes" in fix and "at least 0.90" in fix
    assert "- line 30:" in fix
    assert (
        "changed to: net = unit_price_cents * quantity * (100 + volume_discount(quantity))" in fix
    )


def test_min_mutation_rejects_when_no_round_is_left(
    inventory: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[verdict(0.8, ["exact"])]))
    mistral_server.add(Rule(replies=[files_reply(WEAK, "tests/test_pricing.py")]))

    outcome = run(
        inventory,
        PRICING_TARGET,
        "python-pytest",
        settings(max_mutants=10, min_mutation=0.9),
        iterations=1,
    )

    assert outcome.verdict == "rejected" and outcome.gate == "mutation"
    assert outcome.reasons == ["mutation score 0.70 < 0.90 (3 of 10 mutants survived)"]
