"""The install step attacked by the repository it installs, for real (bwrap, uv, Bundler): a
local package's in-tree build backend and a Gemfile that run code at install time. Nothing of
the host's secrets is read, nothing outside the environment being built is written, and no
host service is reached, directly or through the install's proxy."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.envs import EnvSettings, PreparedEnv, prepare_environment
from tasks.toolchains.registry import get_toolchain
from tests.docker_images import built_image, require_engine
from tests.tasks.envs.attackers import Targets, cleanup, python_attacker, rot13, ruby_attacker

pytestmark = [pytest.mark.slow]


@pytest.fixture(
    params=[
        pytest.param("bwrap", marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="")),
        pytest.param("docker", marks=pytest.mark.docker),
    ]
)
def sandbox(request: pytest.FixtureRequest) -> SandboxSettings:
    """The install step's sandbox: bwrap, or a container of the worker image."""
    if request.param == "docker":
        require_engine()
        image = built_image("test-autopilot-worker")
        return SandboxSettings(backend="docker", docker_image=image)
    return SandboxSettings(backend="bwrap")


@pytest.fixture
def secret() -> str:
    return f"planted-secret-{uuid.uuid4().hex}"


@pytest.fixture
def host_secrets(secret: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The secret where an attacker looks: Autopilot's own environment, another host process's
    environment (as a CI agent's), and a credentials file in the home directory."""
    monkeypatch.setenv("MISTRAL_API_KEY", secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    agent = subprocess.Popen(["sleep", "120"], env={**os.environ, "CI_AGENT_TOKEN": secret})
    planted = Path.home() / f".autopilot-attack-{uuid.uuid4().hex}" / "credentials"
    planted.parent.mkdir()
    planted.write_text(f"aws_secret_access_key = {secret}\n")
    try:
        yield [planted]
    finally:
        agent.kill()
        agent.wait()
        shutil.rmtree(planted.parent, ignore_errors=True)


@pytest.fixture
def home() -> Iterator[Path]:
    """$AUTOPILOT_HOME where it usually is, in the home directory (not under /tmp, which
    every sandbox replaces with its own)."""
    path = Path.home() / f".autopilot-attack-home-{uuid.uuid4().hex}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def host_service() -> Iterator[tuple[int, list[str]]]:
    """A TCP service on every host address (a Prefect API, an S3 server), counting visitors."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen()
    srv.settimeout(0.2)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, addr = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            seen.append(str(addr))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield srv.getsockname()[1], seen
    stop.set()
    thread.join()
    srv.close()


def _own_address() -> str:
    """An address of this host other than loopback (the service listens there too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: only the route is chosen
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


def _targets(home: Path, planted: list[Path], port: int) -> tuple[Targets, list[str]]:
    other_env = home / "envs" / "python-0123456789abcdef0123"
    other_env.mkdir(parents=True)
    (other_env / "marker").write_text("clean")
    writes = [
        str(home / "archive" / "pwned"),
        str(home / "cache" / "pwned"),
        str(other_env / "marker"),
        str(Path.home() / f"pwned-{uuid.uuid4().hex}"),
    ]
    targets = Targets(
        read=[*map(str, planted), "/etc/shadow", str(other_env / "marker")],
        write=writes,
        connect=[("127.0.0.1", port), (_own_address(), port), ("169.254.169.254", 80)],
    )
    return targets, writes


def _assert_contained(
    log: str, secret: str, writes: list[str], seen: list[str], sandbox: SandboxSettings
) -> None:
    assert "attack ran" in log, log[-3000:]  # the attack really ran...
    assert rot13(secret) not in log  # ...and read no secret of the host's
    assert rot13("aws_secret_access_key") not in log
    if sandbox.backend == "bwrap":  # (a container has the image's own /etc)
        assert "read refused /etc/shadow" in log
    for path in writes:
        if path.endswith("marker"):
            assert Path(path).read_text() == "clean"
        else:
            assert not Path(path).exists(), path
    assert seen == []  # no host service was reached
    assert "connected" not in log


def test_a_local_build_backend_runs_sandboxed(
    tmp_path: Path,
    home: Path,
    secret: str,
    host_secrets: list[Path],
    host_service: tuple[int, list[str]],
    sandbox: SandboxSettings,
) -> None:
    port, seen = host_service
    targets, writes = _targets(home, host_secrets, port)
    project = python_attacker(tmp_path, targets)
    before = sorted(p.relative_to(project).as_posix() for p in project.rglob("*"))
    try:
        got = prepare_environment(
            project,
            get_toolchain("python-pytest").env_builder(),
            home=home,
            sandbox=sandbox,
        )
    finally:
        cleanup(writes[-1:])
    assert isinstance(got, PreparedEnv), got
    reports = list(Path(got.path).glob("venv/lib/python*/site-packages/evilpkg/report.txt"))
    log = _build_log(home, got) + "".join(r.read_text() for r in reports)
    _assert_contained(log, secret, writes, seen, sandbox)
    # Through the proxy: the host's services and the metadata service are refused by name.
    assert f"egress 127.0.0.1:{port} refused" in log
    assert "169.254.169.254:80 refused" in log
    # The build wrote nothing into the project it was given (its copy took the egg-info).
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*")) == before


def test_a_gemfile_runs_sandboxed(
    tmp_path: Path,
    home: Path,
    secret: str,
    host_secrets: list[Path],
    host_service: tuple[int, list[str]],
    sandbox: SandboxSettings,
) -> None:
    port, seen = host_service
    targets, writes = _targets(home, host_secrets, port)
    project = ruby_attacker(tmp_path, targets)
    try:
        got = prepare_environment(
            project,
            get_toolchain("ruby-rspec").env_builder(),
            home=home,
            settings=EnvSettings(network=False),
            sandbox=sandbox,
        )
    finally:
        cleanup(writes[-1:])
    log = _build_log(home, got)
    _assert_contained(log, secret, writes, seen, sandbox)
    assert isinstance(got, PreparedEnv), got


def _build_log(home: Path, got: object) -> str:
    if isinstance(got, PreparedEnv):
        return Path(got.log).read_text()
    logs = sorted((home / "envs" / ".logs").glob("*.log"))
    assert logs, got
    return logs[-1].read_text()
