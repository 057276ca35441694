"""Inside an install step's sandbox: the way to the egress proxy (standard library only).

Usage: ``python -I egress_forward.py SOCKET -- COMMAND...``. Listens on the sandbox's own
loopback, sets ``HTTP_PROXY``/``HTTPS_PROXY`` (and npm's names) for COMMAND, runs it and
carries each connection made to that port over the Unix socket SOCKET to Autopilot's proxy,
which decides. Exits with COMMAND's status (128 + N when a signal N ended it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading

CHUNK = 65536


def pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def carry(conn: socket.socket, path: str) -> None:
    try:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(path)
    except OSError:
        conn.close()
        return
    back = threading.Thread(target=pump, args=(upstream, conn), daemon=True)
    back.start()
    pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=carry, args=(conn, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: egress_forward.py SOCKET -- COMMAND...\n")
        return 2
    path, command = argv[0], argv[2:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    threading.Thread(target=serve, args=(listener, path), daemon=True).start()
    env = dict(os.environ)
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(name, None)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env[name] = url
    env["npm_config_proxy"] = env["npm_config_https_proxy"] = url
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        sys.stderr.write(f"{command[0]}: {exc.strerror or exc}\n")
        return 127
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
