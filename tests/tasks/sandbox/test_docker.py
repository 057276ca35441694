"""The docker sandbox backend against a real engine and the worker image built from infra/:
the attacks tests/tasks/sandbox/test_sandbox.py and tests/tasks/sandbox/test_containment.py make on
bwrap, made on docker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.core.errors import SandboxError
from tasks.sandbox.base import Limits, Runner
from tasks.sandbox.cache import cache_key
from tasks.sandbox.docker import DockerRunner
from tasks.sandbox.make import make_runner
from tests.docker_images import built_image, docker, require_engine
from tests.tasks.sandbox.test_containment import SPECS, host_still_fine, rspec
from tests.tasks.sandbox.test_sandbox import TREE, procs_with, tcp_server, wait_gone

pytestmark = [pytest.mark.slow, pytest.mark.docker]
__all__ = ["tcp_server"]  # the fixture, re-used from the sandbox tests
LABEL = "org.test-autopilot.sandbox=1"


@pytest.fixture(scope="module")
def image() -> str:
    require_engine()
    return built_image("test-autopilot-worker")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    wt = tmp_path / f"worktree-{uuid.uuid4().hex[:8]}"
    wt.mkdir()
    return wt


def docker_runner(
    image: str, root: Path, settings: dict[str, object] | None = None, **limits: int
) -> Runner:
    sandbox = SandboxSettings(
        backend="docker", timeout_s=120, docker_image=image, **(settings or {})
    )  # type: ignore[arg-type]
    return make_runner(sandbox, root, cache_dir=root.parent / "cache", limits=Limits(**limits))


@pytest.fixture
def runner(image: str, root: Path) -> Iterator[Runner]:
    yield docker_runner(image, root)
    # Every container the runner made is gone, whatever the test did.
    left = docker("ps", "-aq", "--filter", f"label={LABEL}").stdout.split()
    assert left == [], f"containers left behind: {left}"


# --- isolation -------------------------------------------------------------------------------


def test_command_runs_and_writes_only_to_root(runner: Runner, root: Path) -> None:
    res = runner.run(["sh", "-c", "echo hello > out.txt && cat out.txt && id -u"], cwd=root)
    assert isinstance(runner, DockerRunner)
    assert res.exit_code == 0, res.stderr
    assert res.stdout == f"hello\n{os.getuid()}\n"  # the worktree's owner
    assert res.backend == "docker" and res.reason is None and not res.cached
    assert (root / "out.txt").read_text() == "hello\n"
    assert (root / "out.txt").stat().st_uid == root.stat().st_uid


def test_system_is_read_only_and_host_files_are_invisible(runner: Runner, root: Path) -> None:
    name = f"autopilot-probe-{uuid.uuid4().hex}"
    host_secret = Path.home() / f"{name}-secret"
    host_secret.write_text("host secret")
    try:
        script = (
            f"touch /usr/{name} /etc/{name} /var/tmp/{name}; "
            f"cat {host_secret} 2>&1; ls {root.parent} 2>&1; exit 1"
        )
        res = runner.run(["sh", "-c", script], cwd=root)
    finally:
        host_secret.unlink()
    assert res.stderr.count("Read-only file system") == 3, res.stderr
    assert "No such file or directory" in res.stdout and "host secret" not in res.stdout
    # Only the worktree of its parent directory is mounted.
    assert res.stdout.strip().splitlines()[-1] == root.name
    assert res.reason == "write outside the worktree refused: read-only file system"
    for target in (Path("/usr") / name, Path("/etc") / name, Path("/var/tmp") / name):
        assert not target.exists()


def test_tmp_and_home_are_private(runner: Runner, root: Path) -> None:
    name = f"autopilot-tmp-{uuid.uuid4().hex}"
    host_file = Path("/tmp") / f"{name}-host"
    host_file.write_text("host secret")
    try:
        res = runner.run(
            [
                "sh",
                "-c",
                f'echo in > /tmp/{name}; echo h > "$HOME/f"; cat "$HOME/f"; '
                f"ls /tmp/{name}-host 2>&1; echo HOME=$HOME",
            ],
            cwd=root,
        )
    finally:
        host_file.unlink()
    assert res.exit_code == 0, res.stderr
    assert "No such file or directory" in res.stdout
    assert "HOME=/tmp/home" in res.stdout and res.stdout.startswith("h\n")
    assert not (Path("/tmp") / name).exists()


def test_environment_is_cleared(
    runner: Runner, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOPILOT_TEST_SECRET", "hunter2")
    res = runner.run(["env"], cwd=root, env={"RAILS_ENV": "test"})
    assert res.exit_code == 0, res.stderr
    names = {line.split("=", 1)[0] for line in res.stdout.splitlines()}
    assert "hunter2" not in res.stdout
    assert "RAILS_ENV" in names
    # Nothing of the host's nor of the image's own environment (AUTOPILOT_HOME, PREFECT_*...).
    assert names <= {"PATH", "LANG", "HOME", "TMPDIR", "RAILS_ENV", "PWD"}, names


def test_declared_variables_and_paths_only(
    image: str, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared-data"
    shared.mkdir()
    (shared / "fixture.txt").write_text("shared fixture\n")
    other = tmp_path / "not-declared"
    other.mkdir()
    monkeypatch.setenv("PROJECT_DB_URL", "sqlite://test")
    runner = docker_runner(
        image, root, {"read_only": [str(shared)], "pass_env": ["PROJECT_DB_URL"]}
    )
    res = runner.run(
        [
            "sh",
            "-c",
            f"cat {shared}/fixture.txt; echo $PROJECT_DB_URL; ls {other} 2>&1; "
            f"touch {shared}/new 2>&1; test $PROJECT_DB_URL = sqlite://test && echo SAME; true",
        ],
        cwd=root,
    )
    lines = res.stdout.splitlines()
    # The variable arrives; its value (a passed value is a secret) never comes back as it was.
    assert lines[0] == "shared fixture" and lines[1] == "[REDACTED]" and lines[4] == "SAME"
    assert "No such file or directory" in lines[2]
    assert "Read-only file system" in lines[3]
    assert not (shared / "new").exists()


def test_our_interpreter_is_mounted_read_only(runner: Runner, root: Path) -> None:
    # The python-pytest toolchain runs Autopilot's own interpreter (the host's venv here).
    code = "import sys, pytest; print(sys.prefix, pytest.__version__)"
    res = runner.run([sys.executable, "-c", code], cwd=root)
    assert res.exit_code == 0, res.stderr
    assert res.stdout.split()[0] == sys.prefix
    write = "import sys; open(sys.prefix + '/autopilot-probe', 'w')"
    denied = runner.run([sys.executable, "-c", write], cwd=root)
    assert denied.exit_code != 0 and "Read-only file system" in denied.stderr
    # Mounted for the runs of that interpreter only.
    other = runner.run(["sh", "-c", f"ls {sys.prefix} 2>&1"], cwd=root)
    assert "No such file or directory" in other.stdout
    assert not Path(sys.prefix, "autopilot-probe").exists()


def test_no_network(runner: Runner, root: Path, tcp_server: tuple[int, list[str]]) -> None:
    port, accepted = tcp_server
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
    res = runner.run(["python3", "-c", code], cwd=root)
    assert res.exit_code == 1
    assert "ConnectionRefusedError" in res.stderr or "Network is unreachable" in res.stderr
    assert res.reason == "network unreachable: the sandbox has no network"
    names = runner.run(["sh", "-c", "ls /sys/class/net"], cwd=root).stdout.split()
    assert names == ["lo"]  # no interface but its own loopback
    assert accepted == []


# --- limits ----------------------------------------------------------------------------------


def test_timeout_kills_the_container(runner: Runner, root: Path) -> None:
    marker = f"autopilot-marker-{uuid.uuid4().hex}"
    res = runner.run(["python3", "-c", TREE, marker], cwd=root, timeout_s=3)
    assert res.timed_out and res.exit_code == 137
    assert res.reason == "timeout after 3s"
    assert res.stdout == "started\n"
    assert wait_gone(marker) == []


def test_fork_bomb_is_contained(image: str, root: Path) -> None:
    marker = f"autopilot-bomb-{uuid.uuid4().hex}"
    bomb = (
        "import os, sys, time\n"
        "for _ in range(5000):\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(30); os._exit(0)\n"
    )
    runner = docker_runner(image, root, max_processes=40)
    res = runner.run(["python3", "-c", bomb, marker], cwd=root, timeout_s=60)
    assert not res.timed_out
    assert res.exit_code == 1 and "BlockingIOError" in res.stderr
    assert res.reason is not None and res.reason.startswith("process limit reached")
    assert wait_gone(marker) == []
    assert runner.run(["true"], cwd=root).exit_code == 0


def test_memory_hog_is_contained(image: str, root: Path) -> None:
    hog = "x = []\nwhile True:\n    x.append(bytearray(50 * 1024 * 1024))\n"
    res = docker_runner(image, root, memory_mb=512).run(["python3", "-c", hog], cwd=root)
    assert res.exit_code == 1 and "MemoryError" in res.stderr
    assert res.reason == "memory limit reached (512 MB)"


def test_cpu_file_tmp_and_output_limits(image: str, root: Path) -> None:
    cpu = docker_runner(image, root, cpu_s=1).run(["python3", "-c", "while True: pass"], cwd=root)
    assert not cpu.timed_out and cpu.exit_code == 128 + 24
    assert cpu.reason == "CPU time limit reached"
    big = docker_runner(image, root, file_mb=4).run(
        ["sh", "-c", "cat /dev/zero > big.bin"], cwd=root
    )
    assert big.reason == "file size limit reached"
    assert (root / "big.bin").stat().st_size == 4 * 1024 * 1024
    writer = (
        "import itertools\n"
        "for i in itertools.count():\n"
        "    open(f'/tmp/f{i}', 'wb').write(b'x' * 1024 * 1024)\n"
    )
    full = docker_runner(image, root, tmp_mb=8).run(["python3", "-c", writer], cwd=root)
    assert "No space left on device" in full.stderr
    assert full.reason == "disk space limit reached (private /tmp is full)"
    spam = "for i in range(200000): print('line', i)\nprint('THE END')\n"
    out = docker_runner(image, root, output_bytes=64 * 1024).run(["python3", "-c", spam], cwd=root)
    assert out.exit_code == 0 and out.stdout.endswith("THE END\n")
    assert "earlier bytes dropped" in out.stdout and len(out.stdout.encode()) < 64 * 1024 + 100


# --- toolchain, cache, errors ----------------------------------------------------------------


def test_rspec_runs_inside_the_image(runner: Runner, root: Path) -> None:
    (root / "spec").mkdir()
    (root / "spec" / "math_spec.rb").write_text(
        'RSpec.describe "math" do\n'
        '  it("adds") { expect(1 + 2).to eq(3) }\n'
        '  it("fails") { expect(2 * 2).to eq(5) }\n'
        "end\n"
    )
    res = runner.run(["rspec", "--format", "json", "--out", "rspec.json"], cwd=root)
    assert res.exit_code == 1 and res.reason is None
    report = json.loads((root / "rspec.json").read_text())
    assert report["summary"]["example_count"] == 2 and report["summary"]["failure_count"] == 1


def test_identical_run_is_answered_from_cache(image: str, runner: Runner, root: Path) -> None:
    argv = ["sh", "-c", "echo run >> runs.log; echo done"]
    key = cache_key("abc123", "patchhash", argv)
    first = runner.run(argv, cwd=root, cache_key=key)
    second = runner.run(argv, cwd=root, cache_key=key)
    assert not first.cached and second.cached and second.stdout == "done\n"
    assert (root / "runs.log").read_text() == "run\n"
    assert docker_runner(image, root).run(argv, cwd=root, cache_key=key).cached
    timeout_key = cache_key("abc123", "", ["sleep"])
    slow = ["sh", "-c", "echo t >> t.log; sleep 100"]
    assert runner.run(slow, cwd=root, timeout_s=2, cache_key=timeout_key).timed_out
    assert not runner.run(slow, cwd=root, timeout_s=2, cache_key=timeout_key).cached


def test_missing_command_and_missing_image_are_clear_errors(runner: Runner, root: Path) -> None:
    with pytest.raises(
        SandboxError, match="no-such-tool-xyz: command not found in the sandbox image"
    ):
        runner.run(["no-such-tool-xyz"], cwd=root)
    missing = make_runner(
        SandboxSettings(backend="docker", docker_image="test-autopilot-none:absent"),
        root,
        cache_dir=root.parent / "cache",
    )
    with pytest.raises(SandboxError, match=r"image test-autopilot-none:absent not found: build it"):
        missing.run(["true"], cwd=root)


# --- hostile RSpec specs (tests/tasks/sandbox/test_containment.py's, under docker)
# -------------------------


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    marker = f"autopilot-hostile-{uuid.uuid4().hex}"
    proj = tmp_path / marker
    (proj / "spec").mkdir(parents=True)
    for name, body in SPECS.items():
        (proj / "spec" / name).write_text(body)
    yield proj, marker
    assert wait_gone(marker) == []


def test_hostile_specs_are_contained(
    image: str, project: tuple[Path, str], tcp_server: tuple[int, list[str]]
) -> None:
    proj, marker = project
    port, accepted = tcp_server
    runner = docker_runner(image, proj, memory_mb=1024, max_processes=32)
    res, report = rspec(runner, proj, "network_spec.rb", env={"HOST_PORT": port})
    assert res.reason == "network unreachable: the sandbox has no network"
    assert report["examples"][0]["status"] == "failed" and accepted == []
    target = Path("/etc") / f"autopilot-pwned-{uuid.uuid4().hex}"
    res, report = rspec(runner, proj, "write_etc_spec.rb", env={"ETC_TARGET": target})
    assert res.reason == "write outside the worktree refused: read-only file system"
    assert report["examples"][0]["exception"]["class"] == "Errno::EROFS" and not target.exists()
    res, _ = rspec(runner, proj, "alloc_spec.rb")
    assert "NoMemoryError" in res.stderr and res.reason == "memory limit reached (1024 MB)"
    res, report = rspec(runner, proj, "sleep_spec.rb", timeout_s=5)
    assert res.timed_out and res.reason == "timeout after 5s" and report == {}
    assert procs_with(marker) == [] or wait_gone(marker) == []
    res, report = rspec(runner, proj, "fork_spec.rb", timeout_s=5)
    assert res.timed_out and report == {}
    assert res.reason is not None and res.reason.startswith("process limit reached (32 processes)")
    host_still_fine(runner, proj)


def test_image_holds_no_credentials(image: str) -> None:
    config = json.loads(docker("image", "inspect", image).stdout)[0]["Config"]
    names = {e.split("=", 1)[0] for e in config.get("Env") or []}
    assert not names & {"MISTRAL_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    history = docker("image", "history", "--no-trunc", "--format", "{{.CreatedBy}}", image).stdout
    for word in ("MISTRAL_API_KEY=", "AWS_SECRET_ACCESS_KEY=", "secrets/"):
        assert word not in history
    listing = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--entrypoint",
            "sh",
            image,
            "-c",
            "ls -a /opt/autopilot /opt/autopilot/infra /opt/autopilot/infra/secrets 2>/dev/null",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout.split()
    assert ".env" not in listing and "secrets" not in listing
