"""Declared services as containers next to the docker sandbox's: PostgreSQL and Redis from
the worker image, with no network at all, reached by the sandbox's containers through the
run's socket directory; one database per job; nothing left (containers, directories) after a
run, or after the process that started them is killed. Then the PostgreSQL example audited
and a Jest project run wholly under the docker backend."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.core.run_context import RunContext, job_context, run_context
from tasks.core.run_settings import ServicesSettings
from tasks.sandbox.make import make_runner
from tasks.services import processes_in, running_services
from tasks.services.launch import LABEL
from tests.conftest import REPO_ROOT
from tests.docker_images import built_image, docker, require_engine
from tests.examples_repo import make_example_repo

pytestmark = [pytest.mark.slow, pytest.mark.docker]


@pytest.fixture(scope="module")
def image() -> str:
    require_engine()
    return built_image("test-autopilot-worker")


def _containers(base: Path | None = None) -> list[str]:
    label = f"{LABEL}={base}" if base is not None else LABEL
    return docker("ps", "-aq", "--filter", f"label={label}").stdout.split()


def _gone(base: Path) -> bool:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not base.exists() and not processes_in(str(base)) and not _containers(base):
            return True
        time.sleep(0.2)
    return False


def test_postgres_and_redis_containers_reached_only_through_the_socket(
    image: str, tmp_path: Path
) -> None:
    declared = ServicesSettings(postgres=True, redis=True)
    root = tmp_path / "worktree"
    root.mkdir()
    sandbox = SandboxSettings(backend="docker", docker_image=image, timeout_s=120)
    with running_services(declared, image=image) as services:
        assert services.dirs is not None
        base = services.dirs.base
        [pg] = _containers(base)[:1]
        attrs = json.loads(docker("inspect", pg).stdout)[0]
        assert attrs["HostConfig"]["NetworkMode"] == "none"
        assert attrs["HostConfig"]["ReadonlyRootfs"] is True
        assert attrs["Config"]["User"] != "0:0" and attrs["HostConfig"]["CapDrop"] == ["ALL"]
        needs = services.needs()
        context = RunContext(dirs=needs.dirs, env=needs.env, for_job=services.job_env)
        seen = {}
        with run_context(context):
            for job in ("spec/a_spec.rb", "spec/b_spec.rb"):
                with job_context(job):
                    runner = make_runner(sandbox, root, cache_dir=tmp_path / "cache")
                    done = runner.run(["psql", "-XtAc", "select current_database()"], cwd=root)
                    assert done.exit_code == 0, done.stderr
                    seen[job] = done.stdout.strip()
                    ping = runner.run(
                        ["redis-cli", "-s", str(services.redis.socket), "ping"], cwd=root
                    )  # type: ignore[union-attr]
                    assert ping.stdout.strip() == "PONG", ping.stderr
                    # The sandbox has no network: only the socket reaches the servers.
                    tcp = runner.run(["psql", "-h", "127.0.0.1", "-XtAc", "select 1"], cwd=root)
                    assert tcp.exit_code != 0
        assert len(set(seen.values())) == 2 and declared.database not in seen.values()
    assert _gone(base), _containers(base)


_KILLED = """
import sys, time
from tasks.core.run_settings import ServicesSettings
from tasks.services import running_services
with running_services(ServicesSettings(postgres=True), image=sys.argv[1]) as s:
    print(s.dirs.base, flush=True)
    time.sleep(600)
"""


def test_a_killed_run_leaves_no_container(image: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED, image],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert proc.stdout is not None
    base = Path(proc.stdout.readline().strip())
    assert _containers(base)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert _gone(base), _containers(base)


def test_the_postgres_example_audited_under_the_docker_backend(
    image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasks.audit.run import audit_repo

    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "docker")
    monkeypatch.setenv("AUTOPILOT_SANDBOX__DOCKER_IMAGE", image)
    repo = make_example_repo("rails_pg", tmp_path / "library")
    before = set(_containers())

    report = audit_repo(repo)

    assert report.suite.ran and report.summary.tests.failed == 0, report.suite
    assert report.summary.tests.passed == 7
    deadline = time.monotonic() + 30
    while set(_containers()) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert set(_containers()) <= before


def test_a_jest_project_under_the_docker_backend_counts_as_under_bwrap(
    image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasks.audit.run import audit_repo

    repo = make_example_repo("node_orders", tmp_path / "orders")
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "bwrap")
    bwrap = audit_repo(repo)
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "docker")
    monkeypatch.setenv("AUTOPILOT_SANDBOX__DOCKER_IMAGE", image)

    under_docker = audit_repo(repo)

    assert under_docker.suite.ran, under_docker.suite
    counts = ("tests", "passed", "failed", "errors", "skipped")
    assert [getattr(under_docker.summary.tests, c) for c in counts] == [
        getattr(bwrap.summary.tests, c) for c in counts
    ]
    assert under_docker.summary.tests.passed > 0
    cover = {f.source: f.coverage for f in under_docker.files}
    assert cover == {f.source: f.coverage for f in bwrap.files}
