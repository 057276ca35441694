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

from tasks.toolchains.node.run import run_jest
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
