"""Hostile RSpec specs run through the real bwrap sandbox: each failure is recorded with a reason
and the host is left untouched."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.core.types import CommandResult
from tasks.sandbox.base import Limits, Runner
from tasks.sandbox.make import make_runner
from tests.tasks.sandbox.test_sandbox import limit_mode, procs_with, tcp_server, wait_gone

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("bwrap") is None or shutil.which("rspec") is None,
        reason="bubblewrap or rspec not installed",
    ),
]
__all__ = ["limit_mode", "tcp_server"]  # fixtures re-used from the sandbox tests

SPECS = {
    "good_spec.rb": """
RSpec.describe "good" do
  it("adds") { expect(1 + 2).to eq(3) }
end
""",
    "network_spec.rb": """
require "socket"
RSpec.describe "network" do
  it "phones home" do
    TCPSocket.new("127.0.0.1", Integer(ENV.fetch("HOST_PORT"))).close
  end
end
""",
    "write_etc_spec.rb": """
RSpec.describe "system files" do
  it "tampers with /etc" do
    File.write(ENV.fetch("ETC_TARGET"), "pwned")
  end
end
""",
    "fork_spec.rb": """
RSpec.describe "fork bomb" do
  it "forks endlessly" do
    loop { fork { sleep 60 } }
  end
end
""",
    "alloc_spec.rb": """
RSpec.describe "memory" do
  it "allocates endlessly" do
    hog = []
    loop { hog << ("x" * 50_000_000) }
  end
end
""",
    "sleep_spec.rb": """
RSpec.describe "sleeper" do
  it "sleeps forever, with a child doing the same" do
    fork { sleep }
    sleep
  end
end
""",
}


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A tiny RSpec project whose path carries a unique marker (visible in every cmdline)."""
    marker = f"autopilot-hostile-{uuid.uuid4().hex}"
    root = tmp_path / marker
    (root / "spec").mkdir(parents=True)
    for name, body in SPECS.items():
        (root / "spec" / name).write_text(body)
    yield root, marker
    # Whatever happened, nothing of the run may survive it.
    assert wait_gone(marker) == []


def runner_for(root: Path, **limits: int) -> Runner:
    return make_runner(
        SandboxSettings(backend="bwrap", timeout_s=60),
        root,
        cache_dir=root.parent / "cache",
        limits=Limits(**{"memory_mb": 1024, "max_processes": 64, **limits}),
    )


def rspec(runner: Runner, root: Path, spec: str, **kw: object) -> tuple[CommandResult, dict]:
    out = root / f"{spec}.json"
    # Progress on stdout (where the sandbox reads failure messages) and JSON to a file.
    argv = [
        "rspec",
        str(root / "spec" / spec),
        "--format",
        "progress",
        "--format",
        "json",
        "--out",
        str(out),
    ]
    env = {str(k): str(v) for k, v in kw.pop("env", {}).items()}  # type: ignore[attr-defined]
    res = runner.run(argv, cwd=root, env=env, **kw)  # type: ignore[arg-type]
    report = json.loads(out.read_text()) if out.is_file() and out.stat().st_size else {}
    return res, report


def host_still_fine(runner: Runner, root: Path) -> None:
    res, report = rspec(runner, root, "good_spec.rb")
    assert res.exit_code == 0 and res.reason is None, res.stderr
    assert report["summary"]["example_count"] == 1 and report["summary"]["failure_count"] == 0


def test_network_spec(project: tuple[Path, str], tcp_server: tuple[int, list[str]]) -> None:
    root, _ = project
    port, accepted = tcp_server
    runner = runner_for(root)
    res, report = rspec(runner, root, "network_spec.rb", env={"HOST_PORT": port})
    assert res.exit_code == 1
    assert res.reason == "network unreachable: the sandbox has no network"
    [example] = report["examples"]
    assert example["status"] == "failed"
    assert example["exception"]["class"] == "Errno::ECONNREFUSED"
    assert accepted == []  # the host's server never saw a connection
    host_still_fine(runner, root)


def test_write_etc_spec(project: tuple[Path, str]) -> None:
    root, _ = project
    target = Path("/etc") / f"autopilot-pwned-{uuid.uuid4().hex}"
    runner = runner_for(root)
    res, report = rspec(runner, root, "write_etc_spec.rb", env={"ETC_TARGET": target})
    assert res.exit_code == 1
    assert res.reason == "write outside the worktree refused: read-only file system"
    assert report["examples"][0]["exception"]["class"] == "Errno::EROFS"
    assert not target.exists()
    host_still_fine(runner, root)


def test_fork_bomb_spec(project: tuple[Path, str], limit_mode: str) -> None:
    root, marker = project
    runner = runner_for(root, max_processes=32)
    # Ruby retries a refused fork for about 100 s instead of raising, so the run hangs until
    # the timeout; a cgroup still says what happened (a pid namespace cannot).
    res, report = rspec(runner, root, "fork_spec.rb", timeout_s=4)
    assert res.timed_out and report == {}
    if limit_mode == "cgroup":
        assert res.reason == "process limit reached (32 processes), then timeout after 4s"
    else:
        assert res.reason == "timeout after 4s"
    assert wait_gone(marker) == []
    host_still_fine(runner, root)


def test_memory_hog_spec(project: tuple[Path, str]) -> None:
    root, _ = project
    runner = runner_for(root)
    res, _report = rspec(runner, root, "alloc_spec.rb")
    assert res.exit_code != 0
    assert "NoMemoryError" in res.stderr
    assert res.reason == "memory limit reached (1024 MB)"
    host_still_fine(runner, root)


def test_sleep_forever_spec(project: tuple[Path, str]) -> None:
    root, marker = project
    runner = runner_for(root)
    res, report = rspec(runner, root, "sleep_spec.rb", timeout_s=3)
    assert res.timed_out and res.exit_code == 137
    assert res.reason == "timeout after 3s"
    assert report == {}  # killed before RSpec could write its report
    assert wait_gone(marker) == []
    assert procs_with(marker) == []
    host_still_fine(runner, root)
