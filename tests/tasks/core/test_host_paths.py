"""The host-path rule: credentials under any home, the system's secrets and the host's sockets
are never shown to a sandbox, whoever declares them; a declared directory that holds them is
refused too, with one line (exit 2 through the configuration)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core import host_paths
from tasks.core.config import load_settings
from tasks.core.errors import ConfigError
from tasks.core.host_paths import forbidden_reason

AUTOPILOT = Path(sys.executable).parent / "autopilot"
CREDENTIALS = [
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".docker/config.json",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".kube/config",
    ".gnupg/private-keys-v1.d",
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".config/gh/hosts.yml",
    ".azure/accessTokens.json",
    ".gcloud/credentials.db",
    ".prefect/profiles.toml",
    "project/.env",
    "deploy/server.pem",
]


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory with every kind of credentials file in it; HOME points at it."""
    home = tmp_path / "home" / "alice"
    for rel in CREDENTIALS:
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"secret of {rel}\n")
    (home / "data").mkdir()
    (home / "data" / "fixture.csv").write_text("a,b\n")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[Path]:
    """A directory holding a listening Unix socket two levels down, as /run holds docker.sock."""
    run = tmp_path / "fake-run"
    (run / "docker").mkdir(parents=True)
    path = run / "docker" / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    try:
        yield path
    finally:
        server.close()


@pytest.mark.parametrize("rel", CREDENTIALS)
def test_credentials_under_the_home_are_never_shown(fake_home: Path, rel: str) -> None:
    reason = forbidden_reason(str(fake_home / rel))
    assert reason is not None and "credentials" in reason, reason


def test_a_directory_holding_credentials_is_refused_when_declared(fake_home: Path) -> None:
    (fake_home / "work" / "app").mkdir(parents=True)
    (fake_home / "work" / "app" / ".git-credentials").write_text("https://u:p@host\n")
    assert forbidden_reason(str(fake_home / "work")) is None  # by place it would be fine
    reason = host_paths.declared_reason(str(fake_home / "work"))
    assert reason is not None and reason.endswith("app/.git-credentials)")
    assert host_paths.declared_reason(str(fake_home / "data")) is None  # plain data may be declared
    # A parent of a credentials entry is refused by place: ~/.docker holds config.json.
    assert "holds ~/.cargo/credentials" in (forbidden_reason(str(fake_home / ".cargo")) or "")


def test_other_users_homes_are_judged_alike(fake_home: Path) -> None:
    for path in ("/root/.docker/config.json", "/root/.netrc", "/home/bob/.git-credentials"):
        reason = forbidden_reason(path)
        assert reason is not None and "credentials" in reason, path
    assert "a home directory" in (forbidden_reason("/root") or "")
    assert "home directory" in (forbidden_reason("/home") or "")


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/etc", "holds the system's secrets (/etc/shadow)"),
        ("/etc/shadow", "the system's secrets (/etc/shadow)"),
        ("/etc/gshadow", "the system's secrets (/etc/gshadow)"),
        ("/etc/ssl", "holds the system's secrets (/etc/ssl/private)"),
        ("/", "the whole file system"),
        ("/run", "the host's sockets (/run)"),
        ("/run/docker.sock", "the host's sockets (/run)"),
        ("/var/run", "the host's sockets"),
        ("/var", "holds the host's sockets (/var/run)"),
        ("/var/lib/docker", "the system's secrets"),
        ("/dev/shm", "the host's devices"),
        ("/sys/kernel", "the host's kernel state"),
    ],
)
def test_system_secrets_and_socket_trees(path: str, words: str) -> None:
    reason = forbidden_reason(path)
    assert reason is not None and words in reason, reason
    assert forbidden_reason("/etc/ssl/certs") is None and forbidden_reason("/var/lib/gems") is None


def test_a_socket_or_a_tree_holding_one_is_refused(listening: Path, tmp_path: Path) -> None:
    assert forbidden_reason(str(listening)) == f"{listening}: a Unix socket"
    run = listening.parent.parent
    assert forbidden_reason(str(run)) is None  # by place: an ordinary directory
    assert host_paths.declared_reason(str(run)) == f"{run}: holds a Unix socket ({listening})"
    # A link to the socket, or to the tree, is judged by where it leads.
    (tmp_path / "innocent").mkdir()
    (tmp_path / "innocent" / "engine").symlink_to(listening)
    assert "a Unix socket" in (host_paths.declared_reason(str(tmp_path / "innocent")) or "")
    (tmp_path / "alias").symlink_to(run)
    assert "a Unix socket" in (host_paths.declared_reason(str(tmp_path / "alias")) or "")


def test_the_operator_declaring_a_socket_tree_is_a_config_error(
    listening: Path, fake_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = listening.parent.parent
    for declared, words in [
        (run, "holds a Unix socket"),
        (fake_home / ".netrc", "~/.netrc, which holds credentials"),
        (fake_home / ".docker", "~/.docker, which holds credentials"),
        (Path("/etc"), "/etc/shadow"),
    ]:
        monkeypatch.setenv("AUTOPILOT_SANDBOX__READ_ONLY", json.dumps([str(declared)]))
        with pytest.raises(ConfigError) as err:
            load_settings()
        text = str(err.value)
        assert text.startswith("invalid setting sandbox.read_only: ") and words in text, text
        assert "\n" not in text
    done = subprocess.run(
        [str(AUTOPILOT), "config", "show"],
        capture_output=True,
        text=True,
        env={**os.environ, "AUTOPILOT_SANDBOX__READ_ONLY": json.dumps([str(run)])},
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "holds a Unix socket" in done.stderr
