"""The sandbox's view of the host: what is shown, what may be declared, and how a project
declares what it needs (real bwrap for the runs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings, load_settings
from tasks.core.errors import ConfigError, SandboxError
from tasks.core.host_paths import forbidden_reason
from tasks.sandbox.base import Limits
from tasks.sandbox.bwrap import BwrapRunner
from tasks.sandbox.make import make_runner
from tasks.sandbox.view import build_view, interpreter_dirs
from tests.paths import REPO_ROOT

HAVE_BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap not installed")
HOME = os.path.realpath(Path.home())


@pytest.fixture
def planted() -> Iterator[Path]:
    """A directory outside the repository and outside /tmp, holding a file, removed after."""
    base = Path("/var/lib") if os.access("/var/lib", os.W_OK) else Path.home()
    path = base / f"autopilot-view-{uuid.uuid4().hex}"
    path.mkdir()
    (path / "fixture.txt").write_text("data the project needs\n")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def runner_for(root: Path, **settings: object) -> BwrapRunner:
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=60, **settings),  # type: ignore[arg-type]
        root,
        cache_dir=root.parent / "cache",
        limits=Limits(),
    )
    assert isinstance(runner, BwrapRunner)
    return runner


# --- the rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("relative/dir", "not an absolute path"),
        ("/", "the whole file system"),
        ("/proc/1", "the host's processes"),
        ("/tmp", "every process's temporary files"),
        ("/home/alice", "the home directory"),
        ("/home", "a parent of the home directory"),
        ("/home/alice/.ssh", "~/.ssh"),
        ("/home/alice/.aws/credentials", "~/.aws"),
        ("/home/alice/.config/gcloud", "~/.config"),
    ],
)
def test_forbidden_paths(path: str, why: str) -> None:
    reason = forbidden_reason(path, home="/home/alice")
    assert reason is not None and why in reason
    assert forbidden_reason("/home/alice/src/project-data", home="/home/alice") is None


def test_autopilot_home_is_forbidden_but_its_prepared_environments_are_bindable(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    env = state / "envs" / "py311"
    env.mkdir(parents=True)
    assert "Autopilot's own state" in (
        forbidden_reason(str(state / "cache"), autopilot_home=str(state)) or ""
    )
    assert "holds Autopilot's own state" in (
        forbidden_reason(str(tmp_path), autopilot_home=str(state)) or ""
    )
    # Declared by a project: never. Bound by Autopilot, one directory per environment: yes.
    assert forbidden_reason(str(env), autopilot_home=str(state)) is not None
    assert forbidden_reason(str(env), autopilot_home=str(state), allow_envs=True) is None
    assert forbidden_reason(str(state / "envs"), autopilot_home=str(state), allow_envs=True)


def test_a_link_into_a_forbidden_place_is_judged_by_where_it_leads(tmp_path: Path) -> None:
    link = tmp_path / "innocent"
    link.symlink_to(HOME)
    reason = forbidden_reason(str(link))
    assert reason is not None and "home directory" in reason


def test_exact_toolchain_directories_never_their_parents(tmp_path: Path) -> None:
    dirs = interpreter_dirs(sys.executable)
    # The venv and its base interpreter, by their exact prefixes; never a system tree or a home.
    assert os.path.dirname(os.path.dirname(os.path.abspath(sys.executable))) in dirs
    assert all(d not in ("/", "/usr", HOME) and not HOME.startswith(d + "/") for d in dirs)
    view = build_view(str(tmp_path), toolchain_dirs=dirs)
    assert [m.dest for m in view.extra] == sorted(dirs, key=len)
    assert view.root.dest == str(tmp_path) and view.root.kind == "rw"
    assert not view.shows(HOME + "/.bashrc")
    assert not view.shows("/run/docker.sock") and not view.shows("/home")
    assert view.shows("/usr/bin/env") and view.shows("/bin/sh") and view.shows("/etc/passwd")
    assert not view.shows("/etc/shadow")


# --- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ("/", "the whole file system"),
        (HOME, "the home directory"),
        (f"{HOME}/.ssh", "~/.ssh, which holds credentials"),
        ("relative", "not an absolute path"),
        ("/no/such/autopilot/dir", "does not exist"),
    ],
)
def test_a_forbidden_declaration_is_a_one_line_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, declared: str, message: str
) -> None:
    # Declared by the operator (the repository's own declarations are ignored: test_operator_only).
    monkeypatch.setenv("AUTOPILOT_SANDBOX__READ_ONLY", json.dumps([declared]))
    with pytest.raises(ConfigError) as err:
        load_settings(tmp_path)
    text = str(err.value)
    assert text.startswith("invalid setting sandbox.read_only: ") and message in text
    assert "\n" not in text and "Value error" not in text


def test_autopilot_home_from_the_configuration_is_forbidden_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AUTOPILOT_HOME")  # the home comes from an option alone
    state = tmp_path / "state"
    (state / "archive").mkdir(parents=True)
    monkeypatch.setenv("AUTOPILOT_SANDBOX__READ_ONLY", json.dumps([str(state / "archive")]))
    with pytest.raises(ConfigError, match=r"sandbox\.read_only: .*\$AUTOPILOT_HOME"):
        load_settings(tmp_path, {"home": str(state)})


@pytest.mark.parametrize("name", ["MISTRAL_API_KEY", "AUTOPILOT_HOME", "HOME", "1BAD", "A-B"])
def test_pass_env_refuses_our_own_and_malformed_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("AUTOPILOT_SANDBOX__PASS_ENV", json.dumps([name]))
    with pytest.raises(ConfigError, match=r"^invalid setting sandbox\.pass_env: "):
        load_settings(tmp_path)


def test_the_cli_exits_2_with_one_line_for_a_forbidden_declaration(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "spec").mkdir(parents=True)
    (repo / "Gemfile").write_text("")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    declared = json.dumps([f"{HOME}/.aws"])
    done = subprocess.run(
        [str(Path(sys.executable).parent / "autopilot"), "audit", "--repo", str(repo)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={
            **os.environ,
            "AUTOPILOT_HOME": str(tmp_path / "home"),
            "AUTOPILOT_SANDBOX__READ_ONLY": declared,
        },
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert lines[-1].endswith("~/.aws, which holds credentials") and "Traceback" not in done.stderr


# --- declared paths and variables, for real -------------------------------------------------------


@needs_bwrap
@pytest.mark.slow
def test_a_path_outside_the_view_works_only_once_declared(tmp_path: Path, planted: Path) -> None:
    root = tmp_path / "wt"
    root.mkdir()
    read = ["cat", str(planted / "fixture.txt")]
    denied = runner_for(root).run(read, cwd=root)
    assert denied.exit_code != 0 and "No such file or directory" in denied.stderr
    declared = runner_for(root, read_only=[str(planted)])
    ok = declared.run(read, cwd=root)
    assert ok.exit_code == 0 and ok.stdout == "data the project needs\n", ok.stderr
    # Declared means shown read-only: the project cannot change it.
    write = declared.run(["sh", "-c", f"echo x > {planted}/new.txt"], cwd=root)
    assert write.exit_code != 0 and "Read-only file system" in write.stderr
    assert not (planted / "new.txt").exists()


@needs_bwrap
def test_a_forbidden_declaration_made_in_code_is_refused_by_the_sandbox(tmp_path: Path) -> None:
    settings = SandboxSettings.model_construct(backend="bwrap", read_only=[HOME])
    with pytest.raises(SandboxError, match="home directory"):
        make_runner(settings, tmp_path, cache_dir=tmp_path / "cache")


@needs_bwrap
@pytest.mark.slow
def test_only_declared_variables_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROJECT_DB_URL", "sqlite:///test.db")
    monkeypatch.setenv("OTHER_TOKEN", "not-for-the-sandbox")
    root = tmp_path / "wt"
    root.mkdir()
    plain = runner_for(root).run(["env"], cwd=root)
    assert "PROJECT_DB_URL" not in plain.stdout and "OTHER_TOKEN" not in plain.stdout
    declared = runner_for(root, pass_env=["PROJECT_DB_URL"])
    seen = declared.run(["env"], cwd=root)
    # It arrives, and its value never comes back as it was (a passed value is a secret).
    assert "PROJECT_DB_URL=[REDACTED]" in seen.stdout and "sqlite:" not in seen.stdout
    same = declared.run(["sh", "-c", 'test "$PROJECT_DB_URL" = sqlite:///test.db'], cwd=root)
    assert same.exit_code == 0
    assert "OTHER_TOKEN" not in seen.stdout


@needs_bwrap
@pytest.mark.slow
def test_prepared_environment_under_autopilot_home_is_bound_by_its_own_directory(
    tmp_path: Path,
) -> None:
    state = Path(os.environ["AUTOPILOT_HOME"])  # the test's own (conftest)
    env = state / "envs" / "tools"
    (env / "bin").mkdir(parents=True)
    tool = env / "bin" / "tool"
    tool.write_text("#!/bin/sh\necho prepared\nls $AUTOPILOT_STATE 2>&1\n")
    tool.chmod(0o755)
    (state / "cache").mkdir(exist_ok=True)
    root = tmp_path / "wt"
    root.mkdir()
    runner = make_runner(
        SandboxSettings(backend="bwrap"), root, cache_dir=tmp_path / "c", toolchain_dirs=[env]
    )
    # Started through sh: only the runner's toolchain_dirs make the environment visible.
    res = runner.run(
        ["sh", "-c", str(tool)], cwd=root, env={"AUTOPILOT_STATE": str(state / "cache")}
    )
    assert res.stdout.startswith("prepared\n"), res.stderr
    assert "No such file or directory" in res.stdout  # the rest of $AUTOPILOT_HOME is not shown


def test_the_etc_snapshot_holds_only_what_programs_need_and_comes_back_if_removed() -> None:
    from tasks.sandbox.view import etc_snapshot

    first = etc_snapshot()
    assert first is not None
    names = set(os.listdir(first))
    assert {"passwd", "group", "ld.so.cache"} <= names
    assert not names & {"shadow", "gshadow", "sudoers", "ssh", "pip.conf", "npmrc", "environment"}
    if Path("/etc/ssl/private").exists():
        assert not Path(first, "ssl", "private").exists()
    shutil.rmtree(first)  # a temp cleaner on a long-running server
    again = etc_snapshot()
    assert again is not None and again != first and Path(again, "passwd").is_file()
