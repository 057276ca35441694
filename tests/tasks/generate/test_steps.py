"""A file job's finished steps (tasks.generate.steps), replayed by a job started again on the
same files: real rounds (ruff, pytest with coverage, bwrap) and the scripted model, counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tasks.core.config import SandboxSettings
from tasks.generate.context import build_context
from tasks.generate.loop import generate_for_file
from tasks.generate.skills import choose_skill
from tasks.generate.steps import StepMemo
from tasks.model.client import ModelClient
from tasks.model.transport import Backoff
from tasks.sandbox.make import make_runner
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.generate.test_loop import (
    GOOD,
    NOT_LOADING,
    TARGET,
    _settings,
    files_reply,
    judge_reply,
)

pytestmark = pytest.mark.slow


class CountingRunner:
    """The sandbox, counting the commands it really runs."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.commands: list[list[str]] = []

    def run(self, argv: list[str], **kwargs: Any) -> Any:
        self.commands.append(argv)
        return self.inner.run(argv, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _job(project: Path, steps: StepMemo) -> tuple[Any, CountingRunner]:
    settings = _settings(max_mutants=0)
    client = ModelClient.from_settings(settings, backoff=Backoff(initial_ms=10, max_ms=50))
    runner = CountingRunner(
        make_runner(SandboxSettings(backend="bwrap", timeout_s=120), root=project)
    )
    chain = get_toolchain("python-pytest")
    try:
        outcome = generate_for_file(
            project,
            TARGET,
            chain=chain,
            skill=choose_skill(TARGET.source, TARGET.kind),
            context=build_context(project, TARGET, chain),
            runner=runner,
            client=client,
            settings=settings,
            steps=steps,
        )
    finally:
        client.close()
    return outcome, runner


def test_a_job_started_again_replays_its_finished_steps(
    tmp_path: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(contains="# Task: fix the tests", replies=[files_reply(GOOD)]))
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(Rule(contains="# Task: test", replies=[files_reply(NOT_LOADING)]))
    steps = StepMemo(tmp_path / "steps")

    first, ran = _job(make_example_repo("py_inventory", tmp_path / "a"), steps)
    assert first.verdict == "accepted" and first.iterations == 2, first.reasons
    assert ran.commands, "the first job ran its rounds"
    sent = len(mistral_server.requests)

    # Started again on a fresh copy of the same files (a job killed after its last step).
    copy = make_example_repo("py_inventory", tmp_path / "b")
    again, reran = _job(copy, steps)
    assert reran.commands == []  # both rounds and the re-runs replayed, nothing run
    assert len(mistral_server.requests) == sent  # the replies too
    assert (again.verdict, again.iterations, again.files) == ("accepted", 2, first.files)
    assert again.validation == first.validation
    assert (copy / first.spec).read_text() == GOOD  # the copy holds the linted files


def test_a_job_goes_on_at_its_first_unfinished_step(
    tmp_path: Path, mistral_server: MistralServer
) -> None:
    mistral_server.add(Rule(contains="# Task: fix the tests", replies=[files_reply(GOOD)]))
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    mistral_server.add(Rule(contains="# Task: test", replies=[files_reply(NOT_LOADING)]))
    steps = StepMemo(tmp_path / "steps")
    _, ran = _job(make_example_repo("py_inventory", tmp_path / "a"), steps)
    kept = sorted((tmp_path / "steps").glob("*.json"), key=lambda p: p.stat().st_mtime)
    assert len(kept) >= 2
    kept[-1].unlink()  # the last step (the second round, or its re-runs) was never finished

    again, reran = _job(make_example_repo("py_inventory", tmp_path / "b"), steps)
    assert again.verdict == "accepted"
    assert 0 < len(reran.commands) < len(ran.commands)
