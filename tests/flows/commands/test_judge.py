"""`autopilot judge`: execution first, then the static rubric and the LLM judge (scripted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judge.llm import ExecutionGateError, LLMVerdict, combined_score, judge_with_model
from tasks.core.types import StaticVerdict, ValidationResult
from tasks.model.client import ModelClient
from tests.examples_repo import make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server

AUTOPILOT = str(Path(sys.executable).with_name("autopilot"))
VERDICT = json.dumps({"score": 0.8, "reasons": ["exact values"], "missing": ["nil amount"]})
HELPER_SPEC = "spec/helpers/price_helper_spec.rb"


def _judge(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AUTOPILOT, "judge", *args, "--repo", str(repo), "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=300,
    )


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_example_repo("rails_shop", tmp_path_factory.mktemp("judge") / "shop")


@pytest.mark.slow
def test_passing_spec_is_judged_with_three_samples(
    shop: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(replies=[VERDICT], schema_name="judge_verdict"))
    done = _judge(shop, HELPER_SPEC)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["spec"] == HELPER_SPEC
    assert doc["source"] == "app/helpers/price_helper.rb"  # found through the mapping
    assert doc["validation"]["loaded"] is True and doc["passed"] is True
    assert doc["static"]["score"] == 1.0
    assert doc["llm"]["samples"] == [0.8, 0.8, 0.8]
    assert doc["llm"]["missing"] == ["nil amount"]
    assert doc["score"] == 0.8
    assert len(mistral_server.requests) == 3
    for req in mistral_server.requests:
        assert req.schema_name == "judge_verdict"
        assert HELPER_SPEC in req.text and "format_price" in req.text  # spec and source sent


@pytest.mark.slow
def test_spec_that_does_not_load_is_never_sent_to_the_judge(
    shop: Path, mistral_server: MistralServer, tmp_path: Path
) -> None:
    mistral_server.add(Rule(replies=[VERDICT], schema_name="judge_verdict"))
    spec = shop / "spec/helpers/broken_price_spec.rb"
    spec.write_text(
        'require "rails_helper"\nRSpec.describe PriceHelper, type: :helper do\n'
        '  it "formats" do\n    expect(helper.format_price(100).to eq("1.00 EUR")\n  end\nend\n'
    )
    try:
        done = _judge(shop, str(spec), "--source", "app/helpers/price_helper.rb")
    finally:
        spec.unlink()
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["passed"] is False and doc["validation"]["loaded"] is False
    assert (
        "SyntaxError" in doc["validation"]["load_error"]
        or "syntax" in doc["validation"]["load_error"].lower()
    )
    assert doc["score"] == 0.0 and doc["llm"] is None and doc["static"] is None
    assert mistral_server.requests == []


@pytest.mark.slow
def test_without_a_model_the_static_rubric_scores(shop: Path) -> None:
    done = _judge(shop, "spec/models/product_spec.rb")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["llm"] is None
    assert doc["score"] == doc["static"]["score"] < 1.0  # the weak example spec is flagged
    assert doc["static"]["findings"]


@pytest.mark.parametrize(
    "args", [["spec/nope_spec.rb"], [".env"], ["spec/models/product_spec.rb", "--source", "x.rb"]]
)
def test_bad_input_is_one_line_exit_2(shop: Path, args: list[str]) -> None:
    (shop / ".env").write_text("SECRET=1\n")
    done = _judge(shop, *args)
    assert done.returncode == 2, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autopilot: error:")


def test_judge_api_refuses_a_failing_validation_without_calling(
    mistral_server: MistralServer,
) -> None:
    from tasks.core.config import load_settings

    client = ModelClient.from_settings(load_settings())
    failed = ValidationResult(toolchain="ruby-rspec", loaded=False, load_error="SyntaxError")
    with pytest.raises(ExecutionGateError, match="did not pass execution"):
        judge_with_model(
            client, proof=failed, spec_path="spec/a_spec.rb", spec_text="", source_path="a.rb",
            source_text="", language="ruby",
        )  # fmt: skip
    assert mistral_server.requests == []


def test_combined_score() -> None:
    llm = LLMVerdict(score=0.8, samples=[0.8], spread=0)
    assert combined_score(StaticVerdict(score=1.0), llm, passed=True) == 0.8
    assert combined_score(StaticVerdict(score=0.2), llm, passed=True) == 0.2  # forbidden cap
    assert combined_score(StaticVerdict(score=0.5), llm, passed=True) == 0.8
    assert combined_score(StaticVerdict(score=0.5), None, passed=True) == 0.5
    assert combined_score(StaticVerdict(score=1.0), llm, passed=False) == 0.0


@pytest.mark.slow
def test_calibrate_with_a_scripted_judge(mistral_server: MistralServer) -> None:
    # The scripted judge answers 1.0 for everything: the precise cases agree, the others not,
    # and the case that does not load is never sent.
    mistral_server.add(Rule(replies=['{"score": 1.0, "reasons": [], "missing": []}']))
    done = subprocess.run(
        [AUTOPILOT, "judge", "--calibrate", "--json"],
        capture_output=True, text=True, env=dict(os.environ), timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    rows = {r["id"]: r for r in doc["rows"]}
    assert rows["ruby-does-not-load"]["passed"] is False
    assert rows["ruby-does-not-load"]["llm_score"] is None
    assert rows["ruby-precise"]["llm_score"] == 1.0 and rows["ruby-precise"]["agrees"]
    assert rows["ruby-private"]["score"] == 0.0  # static forbidden findings cap the judge
    judged = sum(1 for r in doc["rows"] if r["passed"])
    assert len(mistral_server.requests) == 3 * judged
    assert doc["mean_spread"] == 0.0
