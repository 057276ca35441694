"""A real S3-compatible server (moto_server) on 127.0.0.1 for tests.

Import the fixtures into a test module (pytest picks up fixtures from the module namespace)::

    from tests.s3server import S3Server, s3_bucket_fixture, s3_server_fixture  # noqa: F401

    def test_upload(s3_server: S3Server, s3_bucket: str) -> None: ...

The fixtures are registered under the names `s3_server` and `s3_bucket`; their Python names
differ so that test arguments do not shadow the imports (ruff F811).

`s3_server` (session scope) starts one `moto_server` subprocess on a free loopback port and stops
it at the end. `s3_bucket` (function scope) points the AWS environment at that server (fake
credentials, `AWS_ENDPOINT_URL`, no shared config files, no instance metadata lookups) and creates
a fresh bucket, so tests never see each other's objects. `running_s3_server()` is the same server
as a plain context manager, for tests that need to start or stop one themselves.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

STARTUP_TIMEOUT_S = 60.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def aws_env(endpoint_url: str) -> dict[str, str]:
    """Environment that sends boto3 to `endpoint_url` with fake credentials and nothing else."""
    return {
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        # Never read the developer's ~/.aws, never probe the EC2 metadata address.
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@dataclass(frozen=True)
class S3Server:
    """A running moto_server."""

    port: int
    process: subprocess.Popen[bytes]

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> Any:
        """A boto3 S3 client bound to this server (independent of the environment)."""
        import boto3

        env = aws_env(self.endpoint_url)
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=env["AWS_SESSION_TOKEN"],
            region_name=env["AWS_DEFAULT_REGION"],
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh random name by default) and return its name."""
        bucket = name or f"test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=bucket)
        return bucket


def _wait_until_up(proc: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited early with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status < 500:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"moto_server did not answer on {url} within {STARTUP_TIMEOUT_S:.0f} s")


@contextlib.contextmanager
def running_s3_server(port: int | None = None) -> Iterator[S3Server]:
    """Start `moto_server -H 127.0.0.1 -p PORT`, wait until it answers, stop it at exit."""
    exe = Path(sys.executable).parent / "moto_server"
    port = port or free_port()
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_up(proc, f"http://127.0.0.1:{port}/")
        yield S3Server(port=port, process=proc)
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the server process; kill it when it does not go within 10 s."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="session", name="s3_server")
def s3_server_fixture() -> Iterator[S3Server]:
    """One moto_server for the whole test session."""
    with running_s3_server() as server:
        yield server


@pytest.fixture(name="s3_bucket")
def s3_bucket_fixture(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket on the session's server, with the AWS environment pointing at it."""
    for name, value in aws_env(s3_server.endpoint_url).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return s3_server.create_bucket()
