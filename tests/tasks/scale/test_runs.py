"""A run's context on whichever process its jobs land: in the flow's own process the jobs get
the flow's context as it is (nothing made twice); in another process the first job makes the
run there once (the environment found or built by its key, the services started on this
process's own servers, one database per job), and the flow's release closes it, leaving
nothing running."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tasks.audit.prepared import prepared_run
from tasks.core.config import load_settings
from tasks.core.run_context import current_run_context, job_context
from tasks.scale import ShippedRun, hosting, on_worker, open_runs, release_run, shipped_settings
from tasks.services import processes_in
from tests.envs_projects import py_words
from tests.examples_repo import git, make_example_repo

pytestmark = pytest.mark.slow


def _gone(base: Path) -> bool:
    deadline = time.monotonic() + 30
    while (base.exists() or processes_in(str(base))) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not base.exists() and not processes_in(str(base))


@pytest.fixture
def pg_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "bwrap")
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    (repo / "autopilot.toml").write_text("[services]\npostgres = true\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "services")
    return repo


def _ship(token: str, repo: Path, settings) -> tuple[ShippedRun, object]:  # type: ignore[no-untyped-def]
    shipped, refs = shipped_settings(settings)
    run = ShippedRun(
        token=token, toolchain="python-pytest", project=repo, worktree=repo, secrets=refs
    )
    return run, shipped


def test_a_worker_makes_the_run_once_each_job_on_its_own_database(pg_project: Path) -> None:
    settings = load_settings(pg_project)
    run, shipped = _ship("worker-run-1", pg_project, settings)
    seen: dict[str, str] = {}
    made: list[str] = []
    errors: list[BaseException] = []

    def job(name: str) -> None:
        try:
            with on_worker(run, shipped) as (_, problem), job_context(name) as ctx:  # type: ignore[arg-type]
                assert problem is None
                seen[name] = ctx.env["PGDATABASE"]
                made.append(ctx.dirs[-1])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(f"src/m{i}.py",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)

    assert not errors, errors
    assert len(set(seen.values())) == 3 and settings.services.database not in seen.values()
    assert len(set(made)) == 1  # one socket directory: the run was made once
    assert open_runs().get("worker-run-1") is True
    assert current_run_context().dirs == ()  # nothing of it leaks into the caller

    base = Path(made[0]).parent
    assert release_run("worker-run-1") == "closed"
    assert "worker-run-1" not in open_runs() and _gone(base)
    assert release_run("worker-run-1") == "none"


def test_the_flow_process_jobs_use_the_flow_context_and_release_never_closes_it(
    pg_project: Path,
) -> None:
    settings = load_settings(pg_project)
    run, shipped = _ship("flow-run-1", pg_project, settings)
    with prepared_run(settings, pg_project, pg_project, "python-pytest") as ready:
        assert ready.services is not None and ready.services.dirs is not None
        with hosting("flow-run-1", settings, ready.problem):
            flow_dirs = current_run_context().dirs
            with on_worker(run, shipped) as (job_settings, problem):  # type: ignore[arg-type]
                assert problem is None and current_run_context().dirs == flow_dirs
                assert job_settings.services == settings.services
            assert release_run("flow-run-1") == "none"
            assert open_runs().get("flow-run-1") is False
            assert ready.services.dirs.base.exists()
    assert "flow-run-1" not in open_runs()


def test_a_worker_without_the_environment_builds_it_from_the_same_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another machine: its home has none of the flow's environments."""
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "bwrap")
    project = py_words(tmp_path)
    git(tmp_path, "init", "-q", "-b", "main", str(project))
    git(project, "add", "-A")
    git(project, "commit", "-qm", "base")
    monkeypatch.setenv("AUTOPILOT_HOME", str(tmp_path / "flow-home"))
    flow_settings = load_settings(project)
    with prepared_run(flow_settings, project, project, "python-pytest") as ready:
        assert ready.env is not None
        flow_env = ready.env.name

    worker = flow_settings.model_copy(update={"home": tmp_path / "worker-home"})
    run, shipped = _ship("worker-run-2", project, worker)
    with on_worker(run, shipped) as (_, problem):  # type: ignore[arg-type]
        assert problem is None
        prepared = current_run_context().prepared
        assert prepared is not None and prepared.path.startswith(str(tmp_path / "worker-home"))
        assert Path(prepared.path).name == flow_env
    assert release_run("worker-run-2") == "closed"


def test_a_worker_that_cannot_see_the_project_says_so_in_one_line(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    run, shipped = _ship("worker-run-3", tmp_path / "elsewhere", settings)
    with on_worker(run, shipped) as (_, problem):  # type: ignore[arg-type]
        assert problem is not None and "\n" not in problem
        assert str(tmp_path / "elsewhere") in problem and "same path" in problem
    assert release_run("worker-run-3") == "closed"
