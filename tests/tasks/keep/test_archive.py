"""Archive: local directory backend, and S3 against a real moto_server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from tasks.core.errors import ArchiveError, ConfigError
from tasks.keep.archive import open_archive, sync_spool
from tasks.keep.manifest import Manifest
from tasks.keep.stores import RetryPolicy
from tests.s3server import S3Server, free_port, s3_bucket_fixture, s3_server_fixture  # noqa: F401

DAY = dt.date(2024, 5, 17)
FAST = RetryPolicy(
    attempts=2, base_delay_s=0.01, max_delay_s=0.02, botocore_attempts=1, connect_timeout_s=0.5,
    read_timeout_s=2,
)  # fmt: skip


class Verdict(BaseModel):
    score: float
    reasons: list[str]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def verdict_json() -> bytes:
    return (Verdict(score=0.8, reasons=["exact values"]).model_dump_json(indent=2) + "\n").encode()


def fill(run: object, tmp_path: Path) -> dict[str, bytes]:
    """Write one object of each kind; return the exact bytes expected per key."""
    from tasks.keep.archive import RunArchive

    assert isinstance(run, RunArchive)
    src = tmp_path / "user_spec.rb"
    src.write_bytes(b"RSpec.describe User do\nend\n")
    run.put_bytes("replies/1.bin", b"\x00\x01\xff")
    run.put_text("prompts/generator.md", "Write a spec for app/models/user.rb \u2713\n")
    run.put_json("judge/verdict.json", Verdict(score=0.8, reasons=["exact values"]))
    run.put_json("summary.json", {"b": 1, "a": [1, 2]})
    run.put_file("files/spec/models/user_spec.rb", src)
    return {
        "replies/1.bin": b"\x00\x01\xff",
        "prompts/generator.md": "Write a spec for app/models/user.rb \u2713\n".encode(),
        "judge/verdict.json": verdict_json(),
        "summary.json": b'{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n',
        "files/spec/models/user_spec.rb": src.read_bytes(),
    }


def local_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# -- local directory backend ---------------------------------------------------------------------


def test_local_layout_and_manifest_checksums(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    run = open_archive(str(root)).run("nightly", "run-1", DAY)
    expected = fill(run, tmp_path)
    manifest = run.finalize()

    run_dir = root / "nightly" / "2024-05-17" / "run-1"
    assert run.uri == str(run_dir)
    on_disk = local_files(run_dir)
    assert on_disk.pop("manifest.json") == (manifest.model_dump_json(indent=2) + "\n").encode()
    assert on_disk == expected
    everything = {f"nightly/2024-05-17/run-1/{k}" for k in [*expected, "manifest.json"]}
    assert local_files(root).keys() == everything
    stored = Manifest.model_validate_json((run_dir / "manifest.json").read_bytes())
    assert (stored.flow, stored.date, stored.run_id) == ("nightly", "2024-05-17", "run-1")
    assert [e.key for e in stored.objects] == sorted(expected)
    for entry in stored.objects:
        assert entry.sha256 == sha(expected[entry.key])
        assert entry.size == len(expected[entry.key])
    types = {e.key: e.content_type for e in stored.objects}
    assert types["summary.json"] == "application/json"
    assert types["replies/1.bin"] == "application/octet-stream"


def test_local_rearchive_is_idempotent_and_merges(tmp_path: Path) -> None:
    archive = open_archive(str(tmp_path / "a"))
    first = archive.run("post_merge", "r1", DAY)
    expected = fill(first, tmp_path)
    first.finalize()
    # An interrupted run archived again, by a new process: same objects plus one more.
    again = archive.run("post_merge", "r1", DAY)
    fill(again, tmp_path)
    again.put_text("summary.md", "done\n")
    manifest = again.finalize()

    keys = [e.key for e in manifest.objects]
    assert keys == sorted([*expected, "summary.md"])
    assert len(keys) == len(set(keys))
    run_dir = tmp_path / "a" / "post_merge" / "2024-05-17" / "r1"
    assert sorted(local_files(run_dir)) == sorted([*keys, "manifest.json"])


def test_local_conflict_is_refused_and_nothing_overwritten(tmp_path: Path) -> None:
    archive = open_archive(str(tmp_path / "a"))
    run = archive.run("nightly", "r1", DAY)
    run.put_text("spec.rb", "original\n")
    with pytest.raises(ArchiveError, match=r"spec\.rb: already archived with other content"):
        run.put_text("spec.rb", "changed\n")
    run.finalize()
    # A later run object, with no memory of the first, must also refuse.
    later = archive.run("nightly", "r1", DAY)
    with pytest.raises(ArchiveError, match="other content"):
        later.put_text("spec.rb", "changed again\n")
    path = tmp_path / "a" / "nightly" / "2024-05-17" / "r1" / "spec.rb"
    assert path.read_text() == "original\n"
    assert [e.key for e in later.finalize().objects] == ["spec.rb"]


def test_local_concurrent_writers_one_wins(tmp_path: Path) -> None:
    run = open_archive(str(tmp_path / "a")).run("nightly", "r1", DAY)
    errors: list[str] = []
    barrier = threading.Barrier(8)

    def write(i: int) -> None:
        barrier.wait()
        try:
            run.put_text("same.txt", "same\n")
            run.put_text("race.txt", f"writer {i}\n")
        except ArchiveError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 7 and all("race.txt" in e for e in errors)
    manifest = run.finalize()
    entries = {e.key: e for e in manifest.objects}
    race = tmp_path / "a" / "nightly" / "2024-05-17" / "r1" / "race.txt"
    assert entries["race.txt"].sha256 == sha(race.read_bytes())
    assert sorted(entries) == ["race.txt", "same.txt"]


@pytest.mark.parametrize(
    "relpath",
    ["/etc/passwd", "../escape.txt", "a/../../escape.txt", "a\\b.txt", "a//b", "", "./a", "a/",
     "manifest.json", "x\x00y"],
)  # fmt: skip
def test_unsafe_relpaths_are_refused(tmp_path: Path, relpath: str) -> None:
    root = tmp_path / "deep" / "archive"
    run = open_archive(str(root)).run("nightly", "r1", DAY)
    with pytest.raises(ArchiveError) as info:
        run.put_bytes(relpath, b"x")
    assert "\n" not in str(info.value)
    assert local_files(tmp_path) == {}


@pytest.mark.parametrize(
    "relpath", [".env", "config/.env.production", "certs/server.pem", "id_rsa", "id_rsa.pub",
                "home/credentials", "CREDENTIALS.json", "tls/private.key"],
)  # fmt: skip
def test_secret_files_are_refused(tmp_path: Path, relpath: str) -> None:
    run = open_archive(str(tmp_path / "a")).run("nightly", "r1", DAY)
    with pytest.raises(ArchiveError, match="secret"):
        run.put_bytes(relpath, b"TOKEN=abc")
    run.put_text("environment.md", "not a secret\n")  # a similar name is fine
    assert [e.key for e in run.finalize().objects] == ["environment.md"]


def test_put_file_refuses_secret_source_name(tmp_path: Path) -> None:
    secret = tmp_path / ".env"
    secret.write_text("MISTRAL_API_KEY=sk-123\n")
    run = open_archive(str(tmp_path / "a")).run("nightly", "r1", DAY)
    with pytest.raises(ArchiveError, match="secret"):
        run.put_file("harmless.txt", secret)
    with pytest.raises(ArchiveError, match=r"missing\.txt"):
        run.put_file("x.txt", tmp_path / "missing.txt")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    ("flow", "run_id"), [("../x", "r"), ("nightly", "a/b"), ("", "r"), ("n", "..")]
)
def test_bad_flow_or_run_id(tmp_path: Path, flow: str, run_id: str) -> None:
    with pytest.raises(ArchiveError):
        open_archive(str(tmp_path)).run(flow, run_id, DAY)


@pytest.mark.parametrize("uri", ["gs://bucket/x", "s3://", "s3:///prefix"])
def test_bad_uris(uri: str) -> None:
    with pytest.raises(ConfigError):
        open_archive(uri)


def test_default_date_is_today_utc(tmp_path: Path) -> None:
    run = open_archive(str(tmp_path)).run("audit", "r1")
    assert run.date == dt.datetime.now(dt.UTC).date().isoformat()


# -- S3 against a real moto_server ---------------------------------------------------------------


class CuttableProxy:
    """A real TCP forwarder on 127.0.0.1 that can drop every connection, to simulate an outage."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.up = True
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if not self.up:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.up = False
        with self.lock:
            for s in self.conns:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self.conns.clear()

    def close(self) -> None:
        self.cut()
        self.server.close()


@pytest.fixture()
def proxy(s3_server: S3Server) -> Iterator[CuttableProxy]:
    p = CuttableProxy(s3_server.port)
    yield p
    p.close()


def bucket_objects(server: S3Server, bucket: str) -> dict[str, bytes]:
    client = server.client()
    listing = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {
        o["Key"]: client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listing
    }


def version_counts(server: S3Server, bucket: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in server.client().list_object_versions(Bucket=bucket).get("Versions", []):
        counts[v["Key"]] = counts.get(v["Key"], 0) + 1
    return counts


def archive_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "tasks.keep.archive" and r.levelno == logging.WARNING
    ]


@pytest.mark.slow
def test_s3_objects_and_manifest(s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    archive = open_archive(f"s3://{s3_bucket}/ci/archive/", home=tmp_path / "home")
    run = archive.run("nightly", "run-1", DAY)
    expected = fill(run, tmp_path)
    manifest = run.finalize()

    prefix = "ci/archive/nightly/2024-05-17/run-1/"
    assert run.uri == f"s3://{s3_bucket}/{prefix.rstrip('/')}"
    stored = bucket_objects(s3_server, s3_bucket)
    assert Manifest.model_validate_json(stored.pop(prefix + "manifest.json")) == manifest
    assert stored == {prefix + k: v for k, v in expected.items()}
    client = s3_server.client()
    for entry in manifest.objects:
        assert entry.sha256 == sha(expected[entry.key])
        head = client.head_object(Bucket=s3_bucket, Key=prefix + entry.key)
        assert head["Metadata"]["sha256"] == entry.sha256
        assert head["ContentLength"] == entry.size
        assert head["ContentType"] == entry.content_type
    assert not (tmp_path / "home" / "spool").exists()


@pytest.mark.slow
def test_s3_archiving_twice_creates_no_duplicates(
    s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    # Versioning on: any overwrite of an object would show up as a second version.
    s3_server.client().put_bucket_versioning(
        Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"}
    )
    uri = f"s3://{s3_bucket}/arch"
    for _ in range(2):
        run = open_archive(uri, home=tmp_path / "home").run("post_merge", "r9", DAY)
        expected = fill(run, tmp_path)
        manifest = run.finalize()

    assert [e.key for e in manifest.objects] == sorted(expected)
    listing = s3_server.client().list_objects_v2(Bucket=s3_bucket)
    assert listing["KeyCount"] == len(expected) + 1
    counts = version_counts(s3_server, s3_bucket)
    manifest_key = "arch/post_merge/2024-05-17/r9/manifest.json"
    assert counts.pop(manifest_key) == 2  # the manifest is rewritten (a superset), nothing else
    assert set(counts.values()) == {1}


@pytest.mark.slow
def test_s3_conflict_is_refused(s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    uri = f"s3://{s3_bucket}"
    first = open_archive(uri, home=tmp_path).run("nightly", "r1", DAY)
    first.put_text("diff.patch", "one\n")
    first.finalize()
    second = open_archive(uri, home=tmp_path).run("nightly", "r1", DAY)
    with pytest.raises(ArchiveError, match=r"diff\.patch: already archived with other content"):
        second.put_text("diff.patch", "two\n")
    assert bucket_objects(s3_server, s3_bucket)["nightly/2024-05-17/r1/diff.patch"] == b"one\n"


@pytest.mark.slow
def test_s3_unavailable_spools_then_sync_uploads_everything(
    s3_server: S3Server,
    s3_bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    home = tmp_path / "home"
    uri = f"s3://{s3_bucket}/nightly-archive"
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens
    run = open_archive(uri, home=home, retry=FAST).run("nightly", "r1", DAY)
    expected = fill(run, tmp_path)
    manifest = run.finalize()

    assert run.spooled
    assert [e.key for e in manifest.objects] == sorted(expected)
    (warning,) = archive_warnings(caplog)
    assert "unavailable" in warning and str(home / "spool") in warning
    assert "\n" not in warning
    assert bucket_objects(s3_server, s3_bucket) == {}
    spool_dir = run.spool_dir
    assert spool_dir is not None and spool_dir.is_relative_to(home / "spool")
    assert local_files(spool_dir / "objects") == expected

    # Still down: the sync fails with one line per run and keeps the spool.
    failed = sync_spool(home, retry=FAST)
    assert failed.synced == [] and len(failed.errors) == 1 and "\n" not in failed.errors[0]
    assert local_files(spool_dir / "objects") == expected

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    result = sync_spool(home, retry=FAST)
    assert result.errors == []
    assert [m.run_id for m in result.synced] == ["r1"]
    prefix = "nightly-archive/nightly/2024-05-17/r1/"
    stored = bucket_objects(s3_server, s3_bucket)
    uploaded = Manifest.model_validate_json(stored.pop(prefix + "manifest.json"))
    assert stored == {prefix + k: v for k, v in expected.items()}
    assert [(e.key, e.sha256) for e in uploaded.objects] == [
        (k, sha(expected[k])) for k in sorted(expected)
    ]
    assert not spool_dir.exists()
    assert sync_spool(home, retry=FAST) == type(result)()  # nothing left, nothing re-sent


@pytest.mark.slow
def test_s3_outage_mid_run_is_completed_by_the_next_run(
    s3_server: S3Server,
    s3_bucket: str,
    proxy: CuttableProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    home = tmp_path / "home"
    uri = f"s3://{s3_bucket}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.port}")
    run = open_archive(uri, home=home, retry=FAST).run("post_merge", "r1", DAY)
    run.put_text("before/1.txt", "one\n")
    run.put_text("before/2.txt", "two\n")
    assert not run.spooled
    proxy.cut()
    run.put_text("after/3.txt", "three\n")
    run.put_text("before/1.txt", "one\n")  # a repeat during the outage is still a no-op
    with pytest.raises(ArchiveError, match="other content"):
        run.put_text("before/2.txt", "changed\n")  # and a conflict is still refused
    run.finalize()
    assert run.spooled and len(archive_warnings(caplog)) == 1
    assert sorted(bucket_objects(s3_server, s3_bucket)) == [
        "post_merge/2024-05-17/r1/before/1.txt",
        "post_merge/2024-05-17/r1/before/2.txt",
    ]

    proxy.up = True
    nxt = open_archive(uri, home=home, retry=FAST).run("post_merge", "r2", DAY)
    nxt.put_text("x.txt", "x\n")
    nxt.finalize()  # succeeds, then uploads r1 from the spool

    stored = bucket_objects(s3_server, s3_bucket)
    r1 = Manifest.model_validate_json(stored["post_merge/2024-05-17/r1/manifest.json"])
    assert [(e.key, e.sha256) for e in r1.objects] == [
        ("after/3.txt", sha(b"three\n")),
        ("before/1.txt", sha(b"one\n")),
        ("before/2.txt", sha(b"two\n")),
    ]
    assert stored["post_merge/2024-05-17/r1/after/3.txt"] == b"three\n"
    assert len(stored) == 6  # r1: 3 objects + manifest; r2: 1 object + manifest
    assert not any((home / "spool").rglob("*.txt"))
