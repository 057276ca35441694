"""Attacks on the bwrap sandbox, run for real: what a test (or a model-written spec steered by
text planted in the source) would try. Each one fails inside, and what it was after never
comes back in the output."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.sandbox.base import Limits
from tasks.sandbox.bwrap import BwrapRunner
from tasks.sandbox.make import make_runner
from tests.fakes.mistral_server import MistralServer
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.sandbox.test_sandbox import tcp_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]
__all__ = ["tcp_server"]  # the fixture, re-used from the sandbox tests
PY = "python3"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    wt = tmp_path / "worktree"
    wt.mkdir()
    return wt


@pytest.fixture
def runner(root: Path) -> BwrapRunner:
    r = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=60),
        root,
        cache_dir=root.parent / "cache",
        limits=Limits(memory_mb=1024),
    )
    assert isinstance(r, BwrapRunner)
    return r


@pytest.fixture
def secret() -> str:
    return f"planted-secret-{uuid.uuid4().hex}"


@pytest.fixture
def planted(secret: str) -> Iterator[list[Path]]:
    """The secret in files outside the repository and outside /tmp: the home directory (a
    credentials-like file), /var/lib and /opt, as far as this user may write there."""
    made: list[Path] = []
    for base in (Path.home(), Path("/var/lib"), Path("/opt")):
        if not os.access(base, os.W_OK):
            continue
        d = base / f".autopilot-attack-{uuid.uuid4().hex}"
        d.mkdir()
        (d / "credentials").write_text(f"aws_secret_access_key = {secret}\n")
        made.append(d / "credentials")
    assert made, "no writable place outside /tmp to plant a secret"
    try:
        yield made
    finally:
        for f in made:
            shutil.rmtree(f.parent, ignore_errors=True)


def run_py(runner: BwrapRunner, root: Path, code: str, *args: str) -> tuple[str, str, int]:
    res = runner.run([PY, "-c", code, *args], cwd=root)
    return res.stdout, res.stderr, res.exit_code


def test_reading_planted_files_outside_the_repository_fails(
    runner: BwrapRunner, root: Path, planted: list[Path], secret: str
) -> None:
    script = "; ".join(f"cat {p}" for p in planted) + "; exit 0"
    res = runner.run(["sh", "-c", script], cwd=root)
    assert res.stderr.count("No such file or directory") == len(planted), res.stderr
    assert secret not in res.stdout + res.stderr


def test_homes_are_not_listable(runner: BwrapRunner, root: Path, planted: list[Path]) -> None:
    res = runner.run(
        ["sh", "-c", "ls -A /home; echo ---; ls -A /root; echo ---; ls -A ~"], cwd=root
    )
    home_out, root_out, own_home = res.stdout.split("---\n")
    assert home_out == ""  # /home is absent
    assert "No such file or directory" in res.stderr
    # /root holds at most the path to a toolchain bound by its exact directory (a pyenv
    # interpreter): never the home's own files, never what was planted there.
    bound = {m.dest for m in runner.view(PY).extra}
    shown = root_out.split()
    assert all(
        any(b.startswith(f"/root/{name}/") or b == f"/root/{name}" for b in bound) for name in shown
    )
    assert not any(p.parent.name in res.stdout for p in planted)
    assert own_home.split() == []  # the private HOME (/tmp/home) starts empty


def test_a_unix_socket_served_under_run_is_unreachable(runner: BwrapRunner, root: Path) -> None:
    base = Path("/run") if os.access("/run", os.W_OK) else Path("/var/run")
    path = base / f"autopilot-attack-{uuid.uuid4().hex}.sock"
    abstract = f"\0autopilot-attack-{uuid.uuid4().hex}"
    accepted: list[str] = []
    servers = []
    for address in (str(path), abstract):
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(address)
        srv.listen()
        srv.settimeout(0.2)
        servers.append(srv)
    stop = threading.Event()

    def serve(srv: socket.socket, name: str) -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(name)
            conn.close()

    pairs = zip(servers, "pa", strict=True)
    threads = [threading.Thread(target=serve, args=pair, daemon=True) for pair in pairs]
    for t in threads:
        t.start()
    try:
        # The host can reach both...
        for address in (str(path), abstract):
            with socket.socket(socket.AF_UNIX) as c:
                c.connect(address)
        code = (
            "import socket, sys\n"
            "for a in sys.argv[1:]:\n"
            "    s = socket.socket(socket.AF_UNIX)\n"
            "    try:\n"
            "        s.connect(a.replace('@', '\\0', 1)); print('CONNECTED', a)\n"
            "    except OSError as e:\n"
            "        print(type(e).__name__, a)\n"
        )
        out, err, _ = run_py(runner, root, code, str(path), "@" + abstract[1:])
    finally:
        stop.set()
        for t in threads:
            t.join()
        for s in servers:
            s.close()
        path.unlink(missing_ok=True)
    # ...the sandbox neither: the file is not in its view, and abstract sockets belong to the
    # host's network namespace.
    assert "CONNECTED" not in out, out + err
    assert f"FileNotFoundError {path}" in out and "ConnectionRefusedError @" in out
    assert sorted(accepted) == ["a", "p"]  # only the host's own two connections


def test_host_process_environments_are_out_of_reach(
    runner: BwrapRunner, root: Path, secret: str
) -> None:
    # A host process with a secret in its environment (as a CI runner's agent would have).
    host = subprocess.Popen(
        ["sleep", "60"], env={**os.environ, "HOST_SECRET_TOKEN": secret}, start_new_session=True
    )
    try:
        code = (
            "import glob\n"
            "found = []\n"
            "paths = glob.glob('/proc/[0-9]*/environ') + ['/proc/1/environ', '/proc/PID/environ']\n"
            "for f in paths:\n"
            "    try:\n"
            "        found.append(open(f, 'rb').read().decode(errors='replace'))\n"
            "    except OSError as e:\n"
            "        found.append(type(e).__name__)\n"
            "print('\\n'.join(found))\n"
        ).replace("PID", str(host.pid))
        out, err, _ = run_py(runner, root, code)
    finally:
        host.kill()
        host.wait()
    assert secret not in out + err
    assert "HOST_SECRET_TOKEN" not in out
    assert "FileNotFoundError" in out  # the host's pid is no process of the sandbox's
    # What pid 1 is inside: the sandbox's own init, started with no environment of ours.
    assert "MISTRAL" not in out and "AUTOPILOT_HOME" not in out


def test_writes_outside_the_worktree_fail(
    runner: BwrapRunner, root: Path, planted: list[Path]
) -> None:
    name = f"autopilot-attack-{uuid.uuid4().hex}"
    targets = [p.parent / name for p in planted] + [
        Path("/var/tmp") / name,
        Path("/etc") / name,
        Path("/usr/local") / name,
        Path(sys.prefix) / name,  # Autopilot's own venv is shown, read-only
    ]
    script = "; ".join(f"echo x > {t}" for t in targets) + "; exit 0"
    res = runner.run(["sh", "-c", script], cwd=root)
    assert res.stderr.count("cannot create") == len(targets), res.stderr
    for t in targets:
        assert not t.exists()


def test_loopback_tcp_is_unreachable(
    runner: BwrapRunner, root: Path, tcp_server: tuple[int, list[str]]
) -> None:
    port, accepted = tcp_server
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
    _, err, code_ = run_py(runner, root, code)
    assert code_ == 1 and "ConnectionRefusedError" in err
    assert accepted == []


def test_symlinks_in_the_repository_lead_nowhere_outside(
    runner: BwrapRunner, root: Path, planted: list[Path], secret: str
) -> None:
    links = {"leak": planted[0], "shadow": Path("/etc/shadow"), "home": Path.home()}
    for name, target in links.items():
        (root / name).symlink_to(target)
    res = runner.run(["sh", "-c", "cat leak; cat shadow; ls -A home/; exit 0"], cwd=root)
    assert secret not in res.stdout + res.stderr
    assert res.stderr.count("No such file or directory") >= 2, res.stderr
    assert "root:" not in res.stdout  # /etc/shadow is not in the view


def test_system_secrets_in_etc_are_not_shown(runner: BwrapRunner, root: Path) -> None:
    script = "cat /etc/shadow /etc/gshadow; ls /etc/ssl/private /etc/ssh /etc/sudoers; exit 0"
    res = runner.run(["sh", "-c", script], cwd=root)
    assert res.stdout == ""
    assert res.stderr.count("No such file or directory") == 5, res.stderr
    # ...while what programs need is there: users, certificates, the loader's cache.
    res = runner.run(["sh", "-c", "head -1 /etc/passwd; ls /etc/ssl/certs | head -1"], cwd=root)
    assert res.stdout.startswith("root:x:0:0:") and len(res.stdout.splitlines()) == 2


def test_host_sysctls_cannot_be_written(runner: BwrapRunner, root: Path) -> None:
    # As uid 0 a sandbox could write the host's sysctls through /proc/sys (bwrap 0.8 leaves it
    # writable for root): the same value is written back, so nothing changes either way.
    script = (
        "v=$(cat /proc/sys/vm/swappiness); echo $v > /proc/sys/vm/swappiness && echo WROTE; "
        "test -e /proc/sysrq-trigger && (echo > /proc/sysrq-trigger) 2>&1 | head -1; exit 0"
    )
    res = runner.run(["sh", "-c", script], cwd=root)
    assert "WROTE" not in res.stdout
    assert "Read-only file system" in res.stderr, res.stderr
    if Path("/proc/sysrq-trigger").exists():
        assert "Read-only file system" in res.stdout


def test_no_new_user_namespace_inside(runner: BwrapRunner, root: Path) -> None:
    if runner.limit_mode == "pid_namespace" or not runner._no_userns:
        pytest.skip("this bwrap (or the pid-namespace limit) keeps nested user namespaces")
    res = runner.run(["sh", "-c", "unshare --user true && echo NESTED"], cwd=root)
    assert "NESTED" not in res.stdout and res.exit_code != 0


# --- end to end: nothing a test could read or print leaks -----------------------------------

LEAKY_TEST = """
import pathlib


def test_leaks_what_it_can():
    print("deploy key AKIAIOSFODNN7EXAMPLE and password = hunter2-printed-by-a-test")
    try:
        data = pathlib.Path("{planted}").read_text()
    except OSError as exc:
        data = "could not read: " + type(exc).__name__
    assert data == "", "got " + data + " with AKIAIOSFODNN7EXAMPLE"
"""


def test_a_repair_run_leaks_neither_what_a_test_reads_nor_what_it_prints(
    tmp_path: Path,
    planted: list[Path],
    secret: str,
    prefect_harness: None,
    mistral_server: MistralServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The post-merge flow on the Python example with a regression and a hostile test: the
    suite, the audit's re-runs and every prompt go through the sandbox, and neither the planted
    secret (unreadable inside) nor the key the test prints (redacted) reaches a model request,
    the flow's result, a log record, the archive or Autopilot's caches."""
    from tests.examples_repo import git
    from tests.flows.test_post_merge import patch_to, regressed_repo, run_flow, script

    repo, _, _ = regressed_repo(tmp_path)
    (repo / "tests" / "test_leaky.py").write_text(LEAKY_TEST.format(planted=planted[0]))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "Merge: a test that reads what it should not")
    script(mistral_server, [patch_to(5)])

    with caplog.at_level(logging.DEBUG):
        result = run_flow(repo, None, tmp_path, human_timeout=0)

    assert result["failures"] == 2  # the regression and the hostile test, both really run
    texts = [r.text for r in mistral_server.requests]
    assert any("could not read: FileNotFoundError" in t for t in texts)  # its output did flow
    assert any("[REDACTED]" in t for t in texts)  # ...redacted
    places = {"requests": "\n".join(texts), "result": json.dumps(result)}
    places["logs"] = "\n".join(r.getMessage() for r in caplog.records)
    for base in (tmp_path / "archive", Path(os.environ["AUTOPILOT_HOME"])):
        for f in base.rglob("*"):
            if f.is_file():
                places[str(f)] = f.read_bytes().decode("utf-8", errors="replace")
    assert any("/archive/" in k for k in places)
    for where, text in places.items():
        assert secret not in text, where
        assert "AKIAIOSFODNN7EXAMPLE" not in text, where
        assert "hunter2-printed-by-a-test" not in text, where
