"""`autopilot demo` with no model configured: the whole job on the scripted demo model."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from uuid import UUID

import pytest

from flows.commands.demo import run
from flows.demo.replies import CUSTOMER_SPEC, SERIALIZER, answer
from tests.paths import REPO_ROOT


async def _tags(flow_run_id: str) -> list[str]:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return list((await client.read_flow_run(UUID(flow_run_id))).tags)


def test_the_scripted_model_only_knows_the_example() -> None:
    assert "no reply written" in answer("# Task: test `app/models/other.rb`", None)
    verdict = json.loads(answer("judge spec/serializers/order_serializer_spec.rb", "judge_verdict"))
    assert verdict["score"] < 0.7 and verdict["missing"]


@pytest.mark.slow
def test_demo_shows_the_whole_job_on_the_scripted_demo_model(
    tmp_path: Path,
    prefect_harness: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    monkeypatch.setenv("AUTOPILOT_MODEL_URL", "")  # empty means unset
    monkeypatch.setenv("AUTOPILOT_HOME", str(tmp_path / "home"))
    before = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "branch", "--list"], capture_output=True, text=True
    ).stdout

    code = run(REPO_ROOT / "examples" / "rails_shop")

    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("Model: scripted demo model")
    assert "(every reply above came from the scripted demo model)" in out
    # A first draft that does not load, the error fed back, then a passing spec.
    assert "round 1: generate" in out
    assert "round 2: fix, the error fed back:" in out and "syntax error" in out
    assert "lint autocorrect rewrote the spec" in out
    lines = out.splitlines()
    table = [line for line in lines if " -> " not in line]
    [customer] = [line for line in table if line.startswith("app/models/customer.rb ")]
    [serializer] = [line for line in table if line.startswith(f"{SERIALIZER} ")]
    assert "accepted" in customer and "rejected" in serializer and "judge" in serializer
    assert any("coverage ok" in line and "-> accepted" in line for line in lines), out
    assert any("judge FAILED -> rejected" in line for line in lines), out
    # The three lines to look at: the branch (with the spec), the archive (with a manifest), the UI.
    look = lines[lines.index("Look at:") + 1 :]
    assert len(look) == 3
    repo, branch = look[0].split("git -C ")[1].split(" log -p ")
    spec = subprocess.run(
        ["git", "-C", repo, "show", f"{branch}:{CUSTOMER_SPEC}"], capture_output=True, text=True
    )
    assert spec.returncode == 0 and "total_spent_cents).to eq(2200)" in spec.stdout
    archive = Path(look[1].split("the archive: ")[1].split(" ")[0])
    manifest = json.loads((archive / "manifest.json").read_text())
    keys = {o["key"] for o in manifest["objects"]}
    assert "files/app__models__customer.rb/round-2-fix-prompt.md" in keys
    assert "prefect server start" in look[2]  # no UI here: how to get one
    # Labelled in the UI too: the flow run's tags.
    assert "scripted-demo-model" in asyncio.run(_tags(archive.name))
    # The checkout the example ships in got no branch.
    after = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "branch", "--list"], capture_output=True, text=True
    ).stdout
    assert after == before
