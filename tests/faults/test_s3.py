"""S3 fault injection against a real moto_server: 503 SlowDown and bad credentials.

A small HTTP proxy on 127.0.0.1 stands in front of moto_server and answers ``503 SlowDown`` to
object PUTs while told to; everything else is forwarded unchanged. Bad credentials use a second
moto_server that really enforces authentication (``INITIAL_NO_AUTH_ACTION_COUNT``): the first
few calls create an IAM user and its key, after which unknown keys get 403 InvalidAccessKeyId.
Every test checks the outcome in the bucket: objects present, sha256 equal, no duplicates.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tasks.keep.archive import open_archive, sync_spool
from tasks.keep.manifest import Manifest
from tasks.keep.stores import RetryPolicy
from tests.s3server import (
    S3Server,
    _wait_until_up,
    aws_env,
    free_port,
    s3_bucket_fixture,  # noqa: F401
    s3_server_fixture,  # noqa: F401
    stop,
)
from tests.tasks.keep.test_archive import DAY, bucket_objects, fill, sha, version_counts

pytestmark = pytest.mark.slow

FAST = RetryPolicy(
    attempts=3, base_delay_s=0.01, max_delay_s=0.02, botocore_attempts=2, connect_timeout_s=1,
    read_timeout_s=5,
)  # fmt: skip
SLOWDOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


@dataclass
class SlowDownProxy:
    """HTTP proxy to moto_server answering 503 SlowDown to the next `refuse` object PUTs."""

    upstream_port: int
    refuse: int = 0  # PUTs still to refuse; -1 refuses every PUT
    puts_refused: int = 0
    puts_forwarded: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> SlowDownProxy:
        handler = type("Handler", (_ProxyHandler,), {"proxy": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    def should_refuse(self) -> bool:
        with self.lock:
            if self.refuse == 0:
                return False
            self.refuse -= 1 if self.refuse > 0 else 0
            self.puts_refused += 1
            return True


class _ProxyHandler(BaseHTTPRequestHandler):
    proxy: SlowDownProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline().strip():
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _forward(self) -> None:
        body = self._body()
        # An object PUT names a key (bucket creation is a PUT on the bucket alone).
        is_object_put = self.command == "PUT" and self.path.split("?")[0].count("/") >= 2
        if is_object_put and self.proxy.should_refuse():
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(SLOWDOWN)))
            self.end_headers()
            self.wfile.write(SLOWDOWN)
            return
        if is_object_put:
            with self.proxy.lock:
                self.proxy.puts_forwarded.append(self.path.split("?")[0])
        headers = {k: v for k, v in self.headers.items() if k.lower() != "transfer-encoding"}
        headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection("127.0.0.1", self.proxy.upstream_port, timeout=30)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        self.send_response(resp.status)
        for key, value in resp.getheaders():
            if key.lower() not in ("content-length", "transfer-encoding", "connection", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward


@pytest.fixture
def slowdown(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlowDownProxy]:
    proxy = SlowDownProxy(s3_server.port).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        yield proxy
    finally:
        proxy.stop()


def versioned_bucket(server: S3Server, bucket: str) -> None:
    # Versioning on: an overwrite (a duplicate upload) would show up as a second version.
    server.client().put_bucket_versioning(
        Bucket=bucket, VersioningConfiguration={"Status": "Enabled"}
    )


def assert_run_archived(
    server: S3Server, bucket: str, prefix: str, expected: dict[str, bytes]
) -> None:
    stored = bucket_objects(server, bucket)
    manifest = Manifest.model_validate_json(stored.pop(prefix + "manifest.json"))
    assert stored == {prefix + k: v for k, v in expected.items()}
    assert [(e.key, e.sha256) for e in manifest.objects] == [
        (k, sha(expected[k])) for k in sorted(expected)
    ]
    counts = version_counts(server, bucket)
    counts.pop(prefix + "manifest.json")
    assert counts == {prefix + k: 1 for k in expected}  # every object written exactly once


def test_slowdown_on_first_puts_is_retried_and_nothing_spooled(
    s3_server: S3Server, s3_bucket: str, slowdown: SlowDownProxy, tmp_path: Path
) -> None:
    versioned_bucket(s3_server, s3_bucket)
    slowdown.refuse = 3
    run = open_archive(f"s3://{s3_bucket}/arch", home=tmp_path, retry=FAST).run(
        "nightly", "r1", DAY
    )
    expected = fill(run, tmp_path)
    run.finalize()

    assert not run.spooled
    assert slowdown.puts_refused == 3
    assert_run_archived(s3_server, s3_bucket, "arch/nightly/2024-05-17/r1/", expected)
    objects = [p for p in slowdown.puts_forwarded if not p.endswith("manifest.json")]
    assert len(objects) == len(set(objects)) == len(expected)  # each object PUT once
    assert not (tmp_path / "spool").exists() or not any((tmp_path / "spool").rglob("*.bin"))


def test_persistent_slowdown_spools_then_a_later_sync_uploads_once(
    s3_server: S3Server,
    s3_bucket: str,
    slowdown: SlowDownProxy,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    versioned_bucket(s3_server, s3_bucket)
    slowdown.refuse = -1
    uri = f"s3://{s3_bucket}"
    run = open_archive(uri, home=tmp_path, retry=FAST).run("post_merge", "r7", DAY)
    expected = fill(run, tmp_path)
    run.finalize()

    assert run.spooled
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "SlowDown" in warnings[0] and "spool" in warnings[0]
    assert bucket_objects(s3_server, s3_bucket) == {}

    slowdown.refuse = 0
    result = sync_spool(tmp_path, retry=FAST)
    assert result.errors == [] and [m.run_id for m in result.synced] == ["r7"]
    assert_run_archived(s3_server, s3_bucket, "post_merge/2024-05-17/r7/", expected)
    assert sync_spool(tmp_path, retry=FAST).synced == []  # nothing left to send twice
    assert_run_archived(s3_server, s3_bucket, "post_merge/2024-05-17/r7/", expected)


# -- bad credentials: a moto_server that enforces authentication ----------------------------------


@dataclass
class AuthS3:
    server: S3Server
    key_id: str
    secret: str


@pytest.fixture(scope="module")
def auth_s3() -> Iterator[AuthS3]:
    import boto3

    port = free_port()
    exe = Path(sys.executable).parent / "moto_server"
    # The first three calls are unauthenticated: just enough to create a user, its policy and key.
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3")
    proc = subprocess.Popen(
        [str(exe), "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_up(proc, f"http://127.0.0.1:{port}/moto-api/")
        url = f"http://127.0.0.1:{port}"
        iam = boto3.client(
            "iam", endpoint_url=url, region_name="us-east-1",
            aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap",
        )  # fmt: skip
        iam.create_user(UserName="ci")
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
        }
        iam.put_user_policy(UserName="ci", PolicyName="all", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="ci")["AccessKey"]
        yield AuthS3(S3Server(port=port, process=proc), key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        stop(proc)


def use_credentials(monkeypatch: pytest.MonkeyPatch, url: str, key_id: str, secret: str) -> None:
    for name, value in aws_env(url).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)


def test_bad_credentials_keep_the_run_locally_then_a_later_run_uploads_it(
    auth_s3: AuthS3,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import boto3

    url = auth_s3.server.endpoint_url
    good = boto3.client(
        "s3", endpoint_url=url, region_name="us-east-1",
        aws_access_key_id=auth_s3.key_id, aws_secret_access_key=auth_s3.secret,
    )  # fmt: skip
    bucket = "autopilot-auth-test"
    good.create_bucket(Bucket=bucket)
    good.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    uri = f"s3://{bucket}/ci"

    use_credentials(monkeypatch, url, "AKIANOTAREALKEY00000", "wrong-secret")
    run = open_archive(uri, home=tmp_path, retry=FAST).run("nightly", "r1", DAY)
    expected = fill(run, tmp_path)
    run.finalize()

    assert run.spooled
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "InvalidAccessKeyId" in warnings[0] and "\n" not in warnings[0]
    assert good.list_objects_v2(Bucket=bucket)["KeyCount"] == 0

    # The credentials are fixed; the next run archives itself, then uploads the spooled run.
    use_credentials(monkeypatch, url, auth_s3.key_id, auth_s3.secret)
    nxt = open_archive(uri, home=tmp_path, retry=FAST).run("nightly", "r2", DAY)
    nxt.put_text("x.txt", "x\n")
    nxt.finalize()

    stored = {
        o["Key"]: good.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        for o in good.list_objects_v2(Bucket=bucket)["Contents"]
    }
    prefix = "ci/nightly/2024-05-17/r1/"
    manifest = Manifest.model_validate_json(stored.pop(prefix + "manifest.json"))
    assert {k: v for k, v in stored.items() if k.startswith(prefix)} == {
        prefix + k: v for k, v in expected.items()
    }
    assert [(e.key, e.sha256) for e in manifest.objects] == [
        (k, sha(expected[k])) for k in sorted(expected)
    ]
    versions = good.list_object_versions(Bucket=bucket).get("Versions", [])
    keys = [v["Key"] for v in versions if not v["Key"].endswith("manifest.json")]
    assert sorted(keys) == sorted(
        [prefix + k for k in expected] + ["ci/nightly/2024-05-17/r2/x.txt"]
    )
    assert not any(tmp_path.joinpath("spool").rglob("*.bin"))
