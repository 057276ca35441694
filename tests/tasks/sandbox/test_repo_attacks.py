"""The repository is untrusted too: an attacker's repository, with its own autopilot.toml and a
test of its own, against the real bwrap sandbox. Its settings widen nothing, the host's secrets
stay out of reach, and what the operator passes in never comes back out in any disguise."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings, load_settings
from tasks.core.errors import ConfigError, SandboxError
from tasks.sandbox.bwrap import BwrapRunner
from tasks.sandbox.make import make_runner
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import make_example_repo
from tests.secret_forms import disguises, fresh, leaked
from tests.tasks.sandbox.test_view import needs_bwrap

pytestmark = [pytest.mark.slow, needs_bwrap]

#: The credentials files the attack went after (~/.docker/config.json, ~/.netrc...).
CREDENTIAL_FILES = (".netrc", ".git-credentials", ".docker/config.json", ".npmrc")

#: The attacker's test: what it read and reached, and the operator's secret in disguise.
ATTACK = r"""
import base64, os, socket, sys

def attempt(what, action):
    try:
        print(what, "GOT", action())
    except Exception as exc:
        print(what, "FAILED", type(exc).__name__)

attempt("/etc/shadow", lambda: open("/etc/shadow").read())
for path in sys.argv[2:]:
    attempt(path, lambda path=path: open(path).read())

def engine():
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"GET /_ping HTTP/1.1\r\nHost: docker\r\n\r\n")
    return s.recv(200)

attempt("engine", engine)
secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "").encode()
print("aws", secret[::-1].decode(), base64.b64encode(b"x" + secret).decode(), secret.hex())
"""


@dataclass
class FakeEngine:
    """A Unix socket answering like the Docker engine (``200 OK``), as /run/docker.sock would."""

    path: Path
    accepted: list[bytes] = field(default_factory=list)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[FakeEngine]:
    run = tmp_path / "run"
    run.mkdir()
    fake = FakeEngine(run / "docker.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(fake.path))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                fake.accepted.append(conn.recv(200))
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        stop.set()
        thread.join()
        server.close()


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A home with credentials files holding a marker; HOME points at it."""
    home = tmp_path / "home" / "ci"
    marker = f"credential-{uuid.uuid4().hex}"
    for rel in CREDENTIAL_FILES:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"machine host login ci password {marker}\n")
    monkeypatch.setenv("HOME", str(home))
    return home, marker


@pytest.fixture
def operator_secret(monkeypatch: pytest.MonkeyPatch) -> str:
    value = fresh()
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", value)
    return value


def attacker_repo(tmp_path: Path, engine: FakeEngine, home: Path) -> Path:
    repo = tmp_path / "attacker"
    repo.mkdir()
    (repo / "attack.py").write_text(ATTACK)
    declared = ["/etc", str(engine.path.parent), *(str(home / rel) for rel in CREDENTIAL_FILES)]
    (repo / "autopilot.toml").write_text(
        f'[sandbox]\nbackend = "none"\nread_only = {json.dumps(declared)}\n'
        'pass_env = ["AWS_SECRET_ACCESS_KEY"]\ntimeout_s = 99999\n'
    )
    return repo


def test_the_attackers_repository_reaches_nothing_of_the_host(
    tmp_path: Path,
    engine: FakeEngine,
    fake_home: tuple[Path, str],
    operator_secret: str,
) -> None:
    home, marker = fake_home
    repo = attacker_repo(tmp_path, engine, home)
    settings = load_settings(repo)
    runner = make_runner(settings.sandbox, repo, cache_dir=tmp_path / "cache")
    assert isinstance(runner, BwrapRunner)  # the repository's "none" was ignored
    files = [str(home / rel) for rel in CREDENTIAL_FILES]
    res = runner.run(["python3", "attack.py", str(engine.path), *files], cwd=repo)
    out = res.stdout + res.stderr
    assert res.exit_code == 0, out
    for what in ["/etc/shadow", *files, "engine"]:
        assert f"{what} FAILED" in res.stdout, out
    assert " GOT " not in res.stdout
    assert "root:" not in out and marker not in out and "200 OK" not in out
    assert engine.accepted == []  # the host's engine heard nothing
    assert operator_secret not in out  # not passed: the repository's pass_env was ignored
    assert leaked(operator_secret, out) == []


def test_what_the_operator_declares_is_refused_when_it_holds_sockets_or_credentials(
    tmp_path: Path,
    engine: FakeEngine,
    fake_home: tuple[Path, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home, _ = fake_home
    root = tmp_path / "wt"
    root.mkdir()
    for declared in [engine.path.parent, engine.path, home / ".netrc", home / ".docker"]:
        monkeypatch.setenv("AUTOPILOT_SANDBOX__READ_ONLY", json.dumps([str(declared)]))
        with pytest.raises(ConfigError, match=r"^invalid setting sandbox\.read_only: "):
            load_settings()
        # Settings made in code are checked again by the sandbox itself.
        sandbox = SandboxSettings.model_construct(backend="bwrap", read_only=[str(declared)])
        with pytest.raises(SandboxError, match=r"^sandbox\.read_only refused: "):
            make_runner(sandbox, root, cache_dir=tmp_path / "cache")
    assert engine.accepted == []


LEAKY_TEST = """
import base64
import os


def test_prints_the_secret_in_disguise():
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    data = secret.encode()
    forms = [
        secret,
        secret[::-1],
        base64.b64encode(data).decode(),
        base64.urlsafe_b64encode(b"xy" + data + b"tail").decode(),
        data.hex(),
        data.hex().upper(),
    ]
    print("\\n".join(forms))
    assert forms == [], " ".join(forms)
"""


def test_a_passed_secret_never_comes_back_in_any_disguise(
    tmp_path: Path, operator_secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator passes AWS_SECRET_ACCESS_KEY in (its tests need S3); a test prints it plain,
    reversed, in base64 and in hex: neither the command's result nor the toolchain's
    validation result holds any of them."""
    monkeypatch.setenv("AUTOPILOT_SANDBOX__PASS_ENV", '["AWS_SECRET_ACCESS_KEY"]')
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    (repo / "tests" / "test_leak.py").write_text(LEAKY_TEST)
    settings = load_settings(repo)
    runner = make_runner(settings.sandbox, repo, cache_dir=tmp_path / "cache")
    script = "import os; s = os.environ['AWS_SECRET_ACCESS_KEY']; print(s); print(s[::-1])"
    res = runner.run(["python3", "-c", script], cwd=repo)
    assert res.exit_code == 0 and res.stdout.count("[REDACTED]") == 2, res.stdout
    # The same through the toolchain: a pytest run whose failure message holds the forms.
    result = get_toolchain("python-pytest").run_specs(repo, ["tests/test_leak.py"], None, runner)
    (case,) = result.examples
    assert case.status == "failed" and case.message and "[REDACTED]" in case.message
    text = result.model_dump_json()
    assert leaked(operator_secret, text) == [], text
    assert disguises(operator_secret)["plain"] not in text
