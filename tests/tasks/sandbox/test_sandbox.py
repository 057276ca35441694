"""The sandbox, with real bwrap, real processes and a real TCP server on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.core.errors import SandboxError
from tasks.sandbox.base import Limits, Runner
from tasks.sandbox.bwrap import BwrapRunner, process_limit_mode
from tasks.sandbox.cache import cache_key
from tasks.sandbox.cgroup import pids_cgroup_parent
from tasks.sandbox.docker import docker_run_kwargs
from tasks.sandbox.local import LocalRunner
from tasks.sandbox.make import make_runner
from tasks.sandbox.pidns import pid_namespace_limit_available
from tasks.sandbox.proc import RawResult, classify

HAVE_BWRAP = shutil.which("bwrap") is not None
needs_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason="bubblewrap not installed")
PY = sys.executable if Path(sys.executable).exists() else "python3"


def procs_with(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


def wait_gone(marker: str, attempts: int = 100) -> list[int]:
    """Poll until no process carries `marker` (killed processes take a moment to be reaped)."""
    left = procs_with(marker)
    for _ in range(attempts):
        if not left:
            break
        time.sleep(0.05)
        left = procs_with(marker)
    return left


def process_limit_missing() -> str | None:
    """What this machine lacks to cap a sandbox's process count (a fork bomb is only safe to
    run when something really does), or None when a limit holds."""
    mode, missing = process_limit_mode(shutil.which("bwrap") or "bwrap")
    return None if mode != "none" else f"no process limit on this machine: needs {missing}"


@pytest.fixture(params=["machine", "pid_namespace"])
def limit_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The machine's own process limit, then the pid-namespace one forced (as when CI runs as
    root without a writable pids cgroup)."""
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap not installed")
    if request.param == "pid_namespace":
        if os.geteuid() != 0:
            pytest.skip("the pid-namespace limit is root's (others have RLIMIT_NPROC)")
        ok, missing = pid_namespace_limit_available(shutil.which("bwrap") or "bwrap")
        if not ok:
            pytest.skip(f"pid-namespace process limit unavailable: needs {missing}")
        monkeypatch.setattr("tasks.sandbox.cgroup.pids_cgroup_parent", lambda: None)
        return "pid_namespace"
    missing = process_limit_missing()
    if missing:
        pytest.skip(missing)
    return process_limit_mode(shutil.which("bwrap") or "bwrap")[0]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    wt = tmp_path / "worktree"
    wt.mkdir()
    return wt


def bwrap_runner(root: Path, **limits: int) -> Runner:
    settings = SandboxSettings(backend="bwrap", timeout_s=60)
    return make_runner(settings, root, cache_dir=root.parent / "cache", limits=Limits(**limits))


@pytest.fixture
def runner(root: Path) -> Runner:
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap not installed")
    return bwrap_runner(root)


# --- isolation -------------------------------------------------------------------------------


@pytest.mark.slow
def test_command_runs_and_writes_only_to_root(runner: Runner, root: Path) -> None:
    res = runner.run(["sh", "-c", "echo hello > out.txt && cat out.txt"], cwd=root)
    assert isinstance(runner, BwrapRunner)
    assert res.exit_code == 0, res.stderr
    assert res.stdout == "hello\n"
    assert res.backend == "bwrap" and res.reason is None and not res.cached
    assert (root / "out.txt").read_text() == "hello\n"


@pytest.mark.slow
def test_system_is_read_only_and_the_real_home_absent(runner: Runner, root: Path) -> None:
    name = f"autopilot-probe-{uuid.uuid4().hex}"
    targets = [Path("/usr") / name, Path("/etc") / name, Path("/") / name]
    script = "; ".join(f"touch {t}" for t in targets) + f"; touch {Path.home() / name}"
    res = runner.run(["sh", "-c", script + "; exit 1"], cwd=root)
    for t in targets:
        assert f"{t}': Read-only file system" in res.stderr, res.stderr
    # The home directory is absent, or (when a toolchain lives under it) an empty read-only
    # skeleton leading to the toolchain's own directory.
    assert f"cannot touch '{Path.home() / name}'" in res.stderr, res.stderr
    assert res.reason == "write outside the worktree refused: read-only file system"
    for t in [*targets, Path.home() / name]:
        assert not t.exists()


@pytest.mark.slow
def test_writes_outside_root_fail(runner: Runner, root: Path) -> None:
    # /var/tmp is writable on the host; inside it does not even exist.
    outside = Path("/var/tmp") / f"autopilot-escape-{uuid.uuid4().hex}"
    res = runner.run(["sh", "-c", f"echo x > {outside}"], cwd=root)
    assert res.exit_code != 0
    assert "nonexistent" in res.stderr or "No such file" in res.stderr, res.stderr
    assert not outside.exists()
    # The worktree's parent here is under /tmp, so inside it is the private tmpfs: a write
    # there succeeds but never reaches the host.
    res = runner.run(["sh", "-c", "echo x > ../escaped.txt && cat ../escaped.txt"], cwd=root)
    assert res.stdout == "x\n"
    assert not (root.parent / "escaped.txt").exists()


@pytest.mark.slow
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
    assert "No such file or directory" in res.stdout  # the host's /tmp is not visible inside
    assert "HOME=/tmp/home" in res.stdout and res.stdout.startswith("h\n")
    assert not (Path("/tmp") / name).exists()


@pytest.mark.slow
def test_environment_is_cleared(
    runner: Runner, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOPILOT_TEST_SECRET", "hunter2")
    res = runner.run(["env"], cwd=root, env={"RAILS_ENV": "test"})
    assert res.exit_code == 0
    names = {line.split("=", 1)[0] for line in res.stdout.splitlines()}
    assert "hunter2" not in res.stdout
    assert "RAILS_ENV" in names
    assert names <= {"PATH", "LANG", "HOME", "TMPDIR", "RAILS_ENV", "PWD"}


@pytest.fixture
def tcp_server() -> Iterator[tuple[int, list[str]]]:
    """A real TCP server on the host's loopback; records every connection it accepts."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.2)
    accepted: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, addr = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(str(addr))
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], accepted
    stop.set()
    t.join()
    srv.close()


@pytest.mark.slow
def test_no_network(runner: Runner, root: Path, tcp_server: tuple[int, list[str]]) -> None:
    port, accepted = tcp_server
    # The server is reachable from the host...
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    deadline = time.monotonic() + 5
    while not accepted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(accepted) == 1
    # ...but not from inside: the sandbox's loopback belongs to its own network namespace.
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
    res = runner.run(["python3", "-c", code], cwd=root)
    assert res.exit_code == 1
    assert "ConnectionRefusedError" in res.stderr
    assert res.reason == "network unreachable: the sandbox has no network"
    assert len(accepted) == 1


# --- limits ----------------------------------------------------------------------------------

TREE = (
    "import subprocess, sys, time, os\n"
    "m = sys.argv[1]\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)', m])\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)', m],"
    " start_new_session=True)\n"
    "print('started', flush=True)\n"
    "time.sleep(1000)\n"
)


@pytest.mark.slow
def test_timeout_kills_the_whole_tree(runner: Runner, root: Path) -> None:
    marker = f"autopilot-marker-{uuid.uuid4().hex}"
    res = runner.run(["python3", "-c", TREE, marker], cwd=root, timeout_s=1.5)
    assert res.timed_out
    assert res.reason == "timeout after 1.5s"
    assert res.exit_code == 137
    assert res.stdout == "started\n"  # output written before the kill is kept
    assert wait_gone(marker) == []


@pytest.mark.slow
def test_fork_bomb_is_contained(root: Path, limit_mode: str) -> None:
    marker = f"autopilot-bomb-{uuid.uuid4().hex}"
    bomb = (
        "import os, sys, time\n"
        "n = 0\n"
        "try:\n"
        "    for _ in range(5000):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30); os._exit(0)\n"
        "        n += 1\n"
        "finally:\n"
        "    print('forked', n, flush=True)\n"
    )
    runner = bwrap_runner(root, max_processes=40)
    assert isinstance(runner, BwrapRunner) and runner.limit_mode == limit_mode
    res = runner.run(["python3", "-c", bomb, marker], cwd=root, timeout_s=30)
    assert not res.timed_out
    assert res.exit_code == 1
    assert "BlockingIOError" in res.stderr
    assert res.reason is not None and res.reason.startswith("process limit reached")
    forked = int(res.stdout.split()[-1])
    assert 0 < forked <= 40, res.stdout
    assert wait_gone(marker) == []
    # The host can still start processes.
    assert runner.run(["true"], cwd=root).exit_code == 0


@pytest.mark.slow
def test_memory_hog_is_contained(root: Path) -> None:
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap not installed")
    hog = "x = []\nwhile True:\n    x.append(bytearray(50 * 1024 * 1024))\n"
    res = bwrap_runner(root, memory_mb=512).run(["python3", "-c", hog], cwd=root)
    assert res.exit_code == 1
    assert "MemoryError" in res.stderr
    assert res.reason == "memory limit reached (512 MB)"


@pytest.mark.slow
def test_cpu_time_limit(root: Path) -> None:
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap not installed")
    res = bwrap_runner(root, cpu_s=1).run(["python3", "-c", "while True: pass"], cwd=root)
    assert not res.timed_out
    assert res.exit_code == 128 + 24  # SIGXCPU
    assert res.reason == "CPU time limit reached"


@pytest.mark.slow
def test_runaway_writer_stopped_by_file_size_limit(root: Path) -> None:
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap not installed")
    runner = bwrap_runner(root, file_mb=4)
    # A shell keeps the default action of SIGXFSZ (terminate)...
    res = runner.run(["sh", "-c", "cat /dev/zero > big.bin"], cwd=root)
    assert res.exit_code == 128 + 25  # SIGXFSZ
    assert res.reason == "file size limit reached"
    assert (root / "big.bin").stat().st_size == 4 * 1024 * 1024
    # ...Python ignores it and gets EFBIG instead.
    writer = "f = open('big2.bin', 'wb')\nwhile True:\n    f.write(b'x' * 65536)\n"
    res = runner.run(["python3", "-c", writer], cwd=root)
    assert res.exit_code == 1 and "File too large" in res.stderr
    assert res.reason == "file size limit reached"
    assert (root / "big2.bin").stat().st_size <= 4 * 1024 * 1024


@pytest.mark.slow
def test_runaway_writer_in_tmp_fills_only_the_private_tmpfs(root: Path) -> None:
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap not installed")
    writer = (
        "import itertools\n"
        "for i in itertools.count():\n"
        "    open(f'/tmp/f{i}', 'wb').write(b'x' * 1024 * 1024)\n"
    )
    res = bwrap_runner(root, tmp_mb=8).run(["python3", "-c", writer], cwd=root)
    assert res.exit_code == 1
    assert "No space left on device" in res.stderr
    assert res.reason == "disk space limit reached (private /tmp is full)"


@pytest.mark.slow
def test_output_is_bounded(root: Path) -> None:
    if not HAVE_BWRAP:
        pytest.skip("bubblewrap not installed")
    spam = "import sys\nfor i in range(200000): print('line', i)\nprint('THE END')\n"
    res = bwrap_runner(root, output_bytes=64 * 1024).run(["python3", "-c", spam], cwd=root)
    assert res.exit_code == 0
    assert res.stdout.endswith("THE END\n")
    assert res.stdout.startswith("[... ") and "earlier bytes dropped" in res.stdout
    assert len(res.stdout.encode()) < 64 * 1024 + 100


# --- real toolchains -------------------------------------------------------------------------


@pytest.mark.slow
def test_ruby_and_rspec_run_inside(runner: Runner, root: Path) -> None:
    res = runner.run(["ruby", "-e", "puts RUBY_VERSION"], cwd=root)
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip().startswith("3.")
    (root / "spec").mkdir()
    (root / "spec" / "math_spec.rb").write_text(
        'RSpec.describe "math" do\n'
        '  it("adds") { expect(1 + 2).to eq(3) }\n'
        '  it("fails") { expect(2 * 2).to eq(5) }\n'
        "end\n"
    )
    res = runner.run(["rspec", "--format", "json", "--out", "rspec.json"], cwd=root)
    assert res.exit_code == 1
    report = json.loads((root / "rspec.json").read_text())
    assert report["summary"]["example_count"] == 2
    assert report["summary"]["failure_count"] == 1
    assert res.reason is None  # an ordinary test failure is not a sandbox event


# --- cache -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_identical_run_is_answered_from_cache(runner: Runner, root: Path) -> None:
    argv = ["sh", "-c", "echo run >> runs.log; echo done"]
    key = cache_key("abc123", "patchhash", argv)
    first = runner.run(argv, cwd=root, cache_key=key)
    second = runner.run(argv, cwd=root, cache_key=key)
    assert not first.cached and second.cached
    assert second.stdout == "done\n" and second.exit_code == 0
    assert (root / "runs.log").read_text() == "run\n"  # executed once
    other = cache_key("abc123", "other-patch", argv)
    assert not runner.run(argv, cwd=root, cache_key=other).cached
    assert (root / "runs.log").read_text() == "run\nrun\n"
    # A new runner over the same directory (another process, later) reuses it too.
    again = bwrap_runner(root).run(argv, cwd=root, cache_key=key)
    assert again.cached


@pytest.mark.slow
def test_timeouts_are_not_cached(runner: Runner, root: Path) -> None:
    argv = ["sh", "-c", "echo run >> runs.log; sleep 100"]
    key = cache_key("abc", "", argv)
    assert runner.run(argv, cwd=root, timeout_s=0.5, cache_key=key).timed_out
    assert not runner.run(argv, cwd=root, timeout_s=0.5, cache_key=key).cached
    assert (root / "runs.log").read_text() == "run\nrun\n"


@pytest.mark.slow
def test_damaged_cache_entry_is_a_miss(runner: Runner, root: Path) -> None:
    argv = ["sh", "-c", "echo run >> runs.log"]
    key = cache_key("abc", "", argv)
    runner.run(argv, cwd=root, cache_key=key)
    entries = list((root.parent / "cache").glob("*.json"))
    assert len(entries) == 1
    entries[0].write_text("{not json")
    assert not runner.run(argv, cwd=root, cache_key=key).cached
    assert (root / "runs.log").read_text() == "run\nrun\n"


def test_cache_key_depends_on_every_part() -> None:
    base = cache_key("c1", "p1", ["rspec", "a_spec.rb"])
    assert base == cache_key("c1", "p1", ["rspec", "a_spec.rb"])
    assert len(base) == 64
    others = {
        cache_key("c2", "p1", ["rspec", "a_spec.rb"]),
        cache_key("c1", "p2", ["rspec", "a_spec.rb"]),
        cache_key("c1", "p1", ["rspec", "b_spec.rb"]),
        cache_key("c1", "p1", ["rspec a_spec.rb"]),
        cache_key("c1", "p1", ["rspec", "a_spec.rb"], extra="ruby 3.1"),
    }
    assert base not in others and len(others) == 5


# --- configuration and bad input -------------------------------------------------------------


@needs_bwrap
def test_cwd_outside_root_is_refused(runner: Runner, root: Path) -> None:
    with pytest.raises(SandboxError, match="outside the sandbox root"):
        runner.run(["true"], cwd=root.parent)


@needs_bwrap
def test_missing_command_is_a_clear_error(runner: Runner, root: Path) -> None:
    with pytest.raises(SandboxError, match="no-such-tool-xyz: command not found"):
        runner.run(["no-such-tool-xyz"], cwd=root)
    with pytest.raises(SandboxError, match="invalid command"):
        runner.run([], cwd=root)


def test_auto_without_bwrap_says_how_to_fix(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(SandboxError, match=r"install it .*bubblewrap.*BACKEND=none"):
        make_runner(SandboxSettings(backend="auto"), root)


def test_root_must_exist(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not a directory"):
        make_runner(SandboxSettings(backend="none"), tmp_path / "missing")


# --- none backend ----------------------------------------------------------------------------


@pytest.mark.slow
def test_none_backend_warns_and_still_kills_the_tree(
    root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tasks.sandbox.local"):
        runner = make_runner(SandboxSettings(backend="none"), root, cache_dir=root / "c")
    assert isinstance(runner, LocalRunner)
    assert any("no isolation" in r.getMessage() for r in caplog.records)
    ok = runner.run(["sh", "-c", "pwd"], cwd=root)
    assert ok.exit_code == 0 and ok.stdout.strip() == str(root) and ok.backend == "none"
    marker = f"autopilot-marker-{uuid.uuid4().hex}"
    # Without a cgroup a grandchild that calls setsid escapes the process group; only test it
    # where the cgroup backs the kill.
    tree = (
        TREE if pids_cgroup_parent() is not None else TREE.replace("start_new_session", "bufsize")
    )
    res = runner.run([PY, "-c", tree, marker], cwd=root, timeout_s=1.5)
    assert res.timed_out and res.reason == "timeout after 1.5s"
    assert wait_gone(marker) == []


@pytest.mark.slow
def test_none_backend_applies_memory_limit(root: Path) -> None:
    runner = make_runner(
        SandboxSettings(backend="none"), root, cache_dir=root / "c", limits=Limits(memory_mb=512)
    )
    hog = "x = []\nwhile True:\n    x.append(bytearray(50 * 1024 * 1024))\n"
    res = runner.run([PY, "-c", hog], cwd=root)
    assert res.reason == "memory limit reached (512 MB)"


# --- docker backend --------------------------------------------------------------------------


def test_docker_run_kwargs(tmp_path: Path) -> None:
    limits = Limits(memory_mb=2048, max_processes=128, file_mb=100, tmp_mb=64)
    kw = docker_run_kwargs(
        image="worker:1",
        argv=["rspec", "spec/a_spec.rb"],
        root=tmp_path,
        cwd=tmp_path / "sub",
        env={"RAILS_ENV": "test"},
        limits=limits,
        timeout_s=60,
    )
    assert kw["image"] == "worker:1" and kw["entrypoint"][-2:] == ["rspec", "spec/a_spec.rb"]
    # The environment is exactly the one given (env -i), under bwrap's per-process rlimits.
    assert kw["entrypoint"][:3] == ["/usr/bin/env", "-i", "RAILS_ENV=test"]
    assert "prlimit" in kw["entrypoint"] and "--as=2147483648" in kw["entrypoint"]
    assert "command" not in kw
    assert kw["network_disabled"] is True and kw["read_only"] is True
    assert kw["mem_limit"] == "2048m" and kw["memswap_limit"] == "2048m"
    assert kw["pids_limit"] == 128
    assert kw["tmpfs"] == {"/tmp": "rw,nosuid,nodev,size=64m,mode=1777"}
    assert kw["volumes"] == {str(tmp_path): {"bind": str(tmp_path), "mode": "rw"}}
    assert kw["working_dir"] == str(tmp_path / "sub")
    assert "environment" not in kw
    assert kw["user"] != "0" and not kw["user"].startswith("0:")
    assert kw["cap_drop"] == ["ALL"] and "no-new-privileges" in kw["security_opt"]
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in kw["ulimits"]}
    assert ulimits == {"cpu": (65, 67), "fsize": (100 << 20, 100 << 20), "core": (0, 0)}


def test_docker_unreachable_fails_fast_and_clearly(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    runner = make_runner(SandboxSettings(backend="docker"), root, cache_dir=tmp_path / "c")
    assert runner.backend == "docker"
    with pytest.raises(SandboxError, match=r"^docker engine unreachable .*backend bwrap$"):
        runner.run(["true"], cwd=root)


# --- reasons ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exit_code", "stderr", "pids_hit", "reason"),
    [
        (0, "MemoryError", False, None),
        (1, "expected 3, got 4", False, None),
        (1, "", True, "process limit reached (64 processes)"),
        (137, "", False, "killed by SIGKILL (likely out of memory)"),
        (1, "-e: failed to allocate memory (NoMemoryError)", False, "memory limit reached (1 MB)"),
        (1, "Resource temporarily unavailable - fork(2)", False, "process limit reached"),
        (152, "", False, "CPU time limit reached"),
        (153, "", False, "file size limit reached"),
        (137, "", False, "killed by SIGKILL (likely out of memory)"),
        (143, "", False, "killed by SIGTERM"),
    ],
)
def test_classify(exit_code: int, stderr: str, pids_hit: bool, reason: str | None) -> None:
    raw = RawResult(exit_code, "", stderr, 0.1, False, pids_hit)
    assert classify(raw, timeout_s=5, memory_mb=1, max_processes=64) == reason


@pytest.mark.slow
def test_the_programs_installation_under_tmp_is_visible_read_only(
    runner: Runner, root: Path, tmp_path: Path
) -> None:
    # A checkout cloned under /tmp has its venv there, which the private /tmp would hide: the
    # installation an absolute program belongs to is shown, read-only, and nothing else of /tmp.
    prefix = tmp_path / "venv"
    (prefix / "bin").mkdir(parents=True)
    (tmp_path / "next-to-venv.txt").write_text("not shown")
    tool = prefix / "bin" / "tool"
    tool.write_text(
        f"#!/bin/sh\necho from-venv\necho x > {prefix}/bin/new\ncat {tmp_path}/next-to-venv.txt\n"
    )
    tool.chmod(0o755)
    res = runner.run([str(tool)], cwd=root)
    assert res.stdout == "from-venv\n", res.stderr
    assert "Read-only file system" in res.stderr and "No such file" in res.stderr
    assert not (prefix / "bin" / "new").exists()
