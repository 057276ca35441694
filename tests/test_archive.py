"""Archive: local directory backend, and S3 against a real moto_server on 127.0.0.1."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from tasks.archive import Manifest, RetryPolicy, open_archive, sync_spool
from tasks.errors import ArchiveError, ConfigError
from tests.s3server import S3Server, free_port, s3_bucket, s3_server  # noqa: F401

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


def fill(run: object, tmp_path: Path) -> dict[str, bytes]:
    """Write one object of each kind; return the exact bytes expected per key."""
    from tasks.archive import RunArchive

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
        "judge/verdict.json": (
            Verdict(score=0.8, reasons=["exact values"]).model_dump_json(indent=2) + "\n"
        ).encode(),  # fmt: skip
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
    assert local_files(root).keys() == {f"nightly/2024-05-17/run-1/{k}" for k in [*expected, "manifest.json"]}  # fmt: skip
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
    with pytest.raises(ArchiveError, match="missing.txt"):
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
