"""The attacker's repository of test_repo_attacks.py under the docker backend, on a real engine
and the worker image: its autopilot.toml widens nothing, the host's files and sockets stay out
of the container, and a secret the operator passes in never comes back out in any disguise."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings, load_settings
from tasks.core.errors import SandboxError
from tasks.sandbox.docker import DockerRunner
from tasks.sandbox.make import make_runner
from tests.docker_images import built_image, docker, require_engine
from tests.secret_forms import leaked
from tests.tasks.sandbox.test_repo_attacks import (
    CREDENTIAL_FILES,
    FakeEngine,
    attacker_repo,
    engine,
    fake_home,
    operator_secret,
)

pytestmark = [pytest.mark.slow, pytest.mark.docker]
__all__ = ["engine", "fake_home", "operator_secret"]  # fixtures, re-used
LABEL = "org.test-autopilot.sandbox=1"


@pytest.fixture(scope="module")
def image() -> str:
    require_engine()
    return built_image("test-autopilot-worker")


@pytest.fixture
def operator(image: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The operator chose the docker backend and its image."""
    monkeypatch.setenv("AUTOPILOT_SANDBOX__BACKEND", "docker")
    monkeypatch.setenv("AUTOPILOT_SANDBOX__DOCKER_IMAGE", image)
    yield
    left = docker("ps", "-aq", "--filter", f"label={LABEL}").stdout.split()
    assert left == [], f"containers left behind: {left}"


def test_the_attackers_repository_reaches_nothing_of_the_host(
    operator: None,
    tmp_path: Path,
    engine: FakeEngine,
    fake_home: tuple[Path, str],
    operator_secret: str,
) -> None:
    home, marker = fake_home
    repo = attacker_repo(tmp_path, engine, home)
    settings = load_settings(repo)
    runner = make_runner(settings.sandbox, repo, cache_dir=tmp_path / "cache")
    assert isinstance(runner, DockerRunner)  # the repository's "none" was ignored
    assert "/etc" not in runner.read_only_dirs("python3")
    files = [str(home / rel) for rel in CREDENTIAL_FILES]
    res = runner.run(["python3", "attack.py", str(engine.path), *files], cwd=repo)
    out = res.stdout + res.stderr
    assert res.exit_code == 0, out
    for what in [*files, "engine"]:
        assert f"{what} FAILED" in res.stdout, out
    # The image's own /etc, never the host's (the repository's read_only was ignored).
    host_shadow = Path("/etc/shadow").read_text() if Path("/etc/shadow").exists() else ""
    assert not host_shadow or host_shadow not in out
    assert marker not in out and "200 OK" not in out and engine.accepted == []
    assert operator_secret not in out and leaked(operator_secret, out) == []


def test_a_declared_socket_tree_is_refused_by_the_docker_backend(
    tmp_path: Path, engine: FakeEngine, fake_home: tuple[Path, str]
) -> None:
    home, _ = fake_home
    root = tmp_path / "wt"
    root.mkdir()
    for declared in [engine.path.parent, home / ".netrc", home / ".docker"]:
        sandbox = SandboxSettings.model_construct(backend="docker", read_only=[str(declared)])
        with pytest.raises(SandboxError, match=r"^sandbox\.read_only refused: "):
            make_runner(sandbox, root, cache_dir=tmp_path / "cache")


def test_a_passed_secret_never_comes_back_in_any_disguise(
    operator: None, tmp_path: Path, operator_secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOPILOT_SANDBOX__PASS_ENV", '["AWS_SECRET_ACCESS_KEY"]')
    root = tmp_path / f"wt-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    runner = make_runner(load_settings().sandbox, root, cache_dir=tmp_path / "cache")
    code = (
        "import base64, os\n"
        "s = os.environ['AWS_SECRET_ACCESS_KEY']; d = s.encode()\n"
        "print(s); print(s[::-1]); print(d.hex()); print(d.hex().upper())\n"
        "print(base64.b64encode(d).decode()); print(base64.urlsafe_b64encode(b'x' + d).decode())\n"
        "print(json.dumps(base64.b64encode(b'yz' + d + b'tail').decode()))\n"
    ).replace("import base64, os", "import base64, json, os")
    res = runner.run(["python3", "-c", code], cwd=root)
    assert res.exit_code == 0, res.stderr
    assert res.stdout.count("[REDACTED]") == 7, res.stdout
    assert leaked(operator_secret, json.dumps(res.model_dump())) == [], res.stdout
