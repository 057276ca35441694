"""The install step's sandbox (tasks.envs.space), run for real in bwrap: what it writes, what it
sees, its variables, its time limit."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.envs.classify import classify
from tasks.envs.space import InstallSpace, copy_project, install_environment
from tasks.toolchains.ruby.bundle_errors import bundler_rules

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.fixture
def space(tmp_path: Path) -> Iterator[InstallSpace]:
    home = tmp_path / "home"
    (home / "archive").mkdir(parents=True)
    (home / "archive" / "run.json").write_text("{}")
    tmp = home / "envs" / ".build-python-0123456789abcdef"
    tmp.mkdir(parents=True)
    final = home / "envs" / "python-0123456789abcdef"
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text("inflection\n")
    built = InstallSpace(
        project,
        tmp,
        final,
        tmp / "build.log",
        sandbox=SandboxSettings(backend="bwrap"),
        allow_hosts=None,
        tool_dirs=[],
    )
    yield built
    built.close()
    assert not built.scratch.exists()


def test_install_environment_keeps_only_the_package_tools_settings() -> None:
    host = {
        "MISTRAL_API_KEY": "k1",
        "AWS_SECRET_ACCESS_KEY": "k2",
        "GITHUB_TOKEN": "k3",
        "DATABASE_URL": "postgres://u:p@db/x",
        "GEM_HOME": "/elsewhere",
        "PIP_INDEX_URL": "https://user:s3cret@mirror.example/simple",
        "UV_INDEX_TOKEN": "k4",
        "UV_HTTP_TIMEOUT": "60",
        "UV_PROJECT_ENVIRONMENT": "/elsewhere",
        "LANG": "C.UTF-8",
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    }
    env = install_environment(host, drop=("UV_PROJECT_ENVIRONMENT",))
    assert env == {
        "PIP_INDEX_URL": "https://mirror.example/simple",  # credentials taken out
        "UV_HTTP_TIMEOUT": "60",
        "LANG": "C.UTF-8",
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    }


def test_the_copy_keeps_links_as_links_and_leaves_out_the_rest(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]")
    (project / "node_modules" / "x").mkdir(parents=True)
    (project / "pkg").mkdir()
    (project / "pkg" / "a.py").write_text("A = 1\n")
    secret = tmp_path / "host-secret"
    secret.write_text("not for the sandbox")
    (project / "pkg" / "link").symlink_to(secret)
    os.mkfifo(project / "pkg" / "fifo")
    dest = tmp_path / "copy"
    copy_project(project, dest)
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == [
        "pkg",
        "pkg/a.py",
        "pkg/link",
    ]
    assert (dest / "pkg" / "link").is_symlink()
    assert os.readlink(dest / "pkg" / "link") == str(secret)


@needs_bwrap
@pytest.mark.slow
def test_a_step_writes_only_its_environment_and_its_copy(space: InstallSpace) -> None:
    home = space.final.parents[1]
    script = (
        f"echo built > {space.path('marker')} && cat requirements.txt && "
        "echo changed > requirements.txt && echo $HOME $TMPDIR; "
        f"ls {home / 'archive'}; touch {home / 'archive' / 'pwned'}; "
        f"touch {space.final.parent / 'other'}; echo done"
    )
    done = space.run(["sh", "-c", script], env={}, timeout_s=60, network=False)
    assert done.ok, done.output
    assert (space.tmp / "marker").read_text() == "built\n"  # at its final path, inside
    assert (space.project / "requirements.txt").read_text() == "inflection\n"
    assert "inflection" in done.output and str(space.scratch) in done.output
    assert "run.json" not in done.output  # the rest of $AUTOPILOT_HOME is not there
    assert not (home / "archive" / "pwned").exists()
    assert not (space.final.parent / "other").exists()
    text = space.log_path.read_text()
    assert "$ sh -c" in text and "offline" in text and "# exit 0" in text


@needs_bwrap
@pytest.mark.slow
def test_a_step_without_network_has_none(space: InstallSpace) -> None:
    code = (
        "import os, socket\n"
        "print('proxy', os.environ.get('HTTPS_PROXY'))\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 443), timeout=3); print('connected')\n"
        "except OSError as e:\n"
        "    print('refused', type(e).__name__)\n"
    )
    done = space.run(["python3", "-c", code], env={}, timeout_s=60, network=False)
    assert "proxy None" in done.output and "refused" in done.output, done.output


@needs_bwrap
@pytest.mark.slow
def test_a_step_is_killed_whole_at_its_time_limit(space: InstallSpace) -> None:
    done = space.run(
        ["sh", "-c", "echo started; sleep 61 & sleep 61"], env={}, timeout_s=1, network=False
    )
    assert done.timed_out and not done.ok
    text = space.log_path.read_text()
    assert "started" in text and "timed out" in text
    assert classify(done, bundler_rules, network=False)[0] == "timeout"
    ps = subprocess.run(["pgrep", "-f", "sleep 61"], capture_output=True, text=True)
    assert ps.stdout.strip() == ""
