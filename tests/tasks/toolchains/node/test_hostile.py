"""A hostile Jest test in the sandbox: it tries to read a secret planted on the host, reach a
host server over loopback TCP, write into Autopilot's Node tools and leave a process behind.
Every attempt fails and nothing of the secret comes back."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings, load_settings
from tasks.sandbox.make import make_runner
from tasks.toolchains.node.run import run_jest
from tasks.toolchains.registry import toolchain_for
from tests.examples_repo import git, make_example_repo
from tests.tasks.toolchains.node.helpers import bwrap_runner, tools_for

pytestmark = pytest.mark.slow

HOSTILE = """
const fs = require("fs");
const net = require("net");
const { spawn } = require("child_process");

test("reads the planted secret", () => {
  expect(fs.readFileSync(process.env.TARGET || "%(secret_file)s", "utf8")).toBe("stolen");
});

test("calls the host server", async () => {
  const result = await new Promise((resolve) => {
    const sock = net.connect(%(port)d, "127.0.0.1");
    sock.on("connect", () => resolve("connected"));
    sock.on("error", (err) => resolve(err.code));
  });
  expect(result).toBe("connected");
});

test("writes into the tools", () => {
  fs.writeFileSync("%(tools)s/pwned.txt", "x");
  expect(fs.existsSync("%(tools)s/pwned.txt")).toBe(true);
});

test("leaves a process behind", () => {
  const child = spawn("sleep", ["300"], { detached: true, stdio: "ignore" });
  child.unref();
  expect(child.pid).toBeGreaterThan(0);
});
"""


@pytest.fixture
def planted() -> Iterator[tuple[Path, str]]:
    secret = f"planted-secret-{uuid.uuid4().hex}"
    base = Path.home() / f".autopilot-attack-{uuid.uuid4().hex}"
    base.mkdir()
    (base / "credentials").write_text(f"token = {secret}\n")
    try:
        yield base / "credentials", secret
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def tcp_server() -> Iterator[tuple[int, list[str]]]:
    accepted: list[str] = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.settimeout(0.5)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, addr = srv.accept()
            except OSError:
                continue
            accepted.append(str(addr))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join(timeout=5)
        srv.close()


def test_a_hostile_jest_test_is_contained(
    tmp_path: Path, planted: tuple[Path, str], tcp_server: tuple[int, list[str]]
) -> None:
    secret_file, secret = planted
    port, accepted = tcp_server
    repo = make_example_repo("node_orders", tmp_path / "orders")
    tools = tools_for(repo)
    code = HOSTILE % {"secret_file": secret_file, "port": port, "tools": tools.modules}
    (repo / "src" / "hostile.test.js").write_text(code)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "hostile")
    before = sorted(os.listdir(tools.modules))
    result = run_jest(repo, ["src/hostile.test.js"], None, bwrap_runner(repo, tools), tools)
    v = result.validation
    assert v.loaded, v.load_error
    assert not v.passed and v.reason is not None  # what the sandbox refused is named
    by_name = {e.name.strip(): e for e in v.examples}
    assert by_name["reads the planted secret"].status == "failed"
    assert "ENOENT" in (by_name["reads the planted secret"].message or "")
    assert by_name["calls the host server"].status == "failed"
    assert "ECONNREFUSED" in (by_name["calls the host server"].trace or "")
    assert by_name["writes into the tools"].status == "failed"
    assert "EROFS" in (by_name["writes into the tools"].message or "")
    assert accepted == []
    assert sorted(os.listdir(tools.modules)) == before
    assert not (tools.modules / "pwned.txt").exists()
    everything = v.model_dump_json() + "".join(
        f"{e.stdout or ''}{e.stderr or ''}" for e in v.examples
    )
    assert secret not in everything
    # The detached child died with the sandbox: no `sleep 300` of ours survives the run.
    survivors = [
        p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p) == "sleep\x00300\x00"
    ]
    assert survivors == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


ENV_LEAK = """
test("prints the environment", () => {
  const seen = JSON.stringify(process.env);
  console.log(seen);
  expect(seen).toBe("");
});
"""


def test_a_jest_test_never_sees_or_leaks_a_host_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the interface as the flows use it: the runner the toolchain's sandbox_dirs
    configure; the host's secrets are not in the sandbox's environment, and a secret-shaped
    value the test does see (its own) is redacted from everything that comes back."""

    host_secret = "sk-host-" + uuid.uuid4().hex
    monkeypatch.setenv("MISTRAL_API_KEY", host_secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", host_secret)
    repo = make_example_repo("node_orders", tmp_path / "orders")
    (repo / "src" / "env.test.js").write_text(ENV_LEAK)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "env")
    chain = toolchain_for(load_settings(repo), "node-jest")
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=120),
        repo,
        toolchain_dirs=chain.sandbox_dirs(repo),
        cache_dir=tmp_path / "cache",
    )
    v = chain.run_specs(repo, ["src/env.test.js"], None, runner)
    assert v.loaded and not v.passed
    [example] = v.examples
    assert example.status == "failed" and "NODE_PATH" in (example.trace or "")
    everything = v.model_dump_json()
    assert host_secret not in everything
