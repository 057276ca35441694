"""CI's reports in (local paths and S3 URIs on a real moto S3 server) and the failing commit
fetched into the worker's clone, the fix branch pushed to a bare remote (real git)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tasks.ci_inputs import ensure_commit, fetch_reports, push_fix_branch
from tasks.keep.git_safe import GitError
from tests.paths import TESTS
from tests.s3server import S3Server, s3_bucket_fixture, s3_server_fixture  # noqa: F401

REPORTS = TESTS / "data" / "reports"
GIT_ID = {
    "GIT_AUTHOR_NAME": "CI",
    "GIT_AUTHOR_EMAIL": "ci@example.invalid",
    "GIT_COMMITTER_NAME": "CI",
    "GIT_COMMITTER_EMAIL": "ci@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ID}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_local_reports_each_failure_one_line(tmp_path: Path) -> None:
    junit = REPORTS / "pytest-xunit1.xml"
    big = tmp_path / "big.xml"
    big.write_bytes(b"x" * 2048)
    folder = tmp_path / "ci-reports"
    (folder / "nested").mkdir(parents=True)
    (folder / "nested" / "rspec.json").write_bytes((REPORTS / "rspec.json").read_bytes())
    (folder / "screenshot.png").write_bytes(b"\x89PNG")
    got = fetch_reports(
        [str(junit), f"file://{junit}", str(tmp_path / "missing.xml"), str(big), str(folder)],
        tmp_path / "in",
        max_bytes=1500,
    )
    ok_size = junit.stat().st_size <= 1500
    assert (tmp_path / "in").is_dir()
    fetched = {f.uri for f in got.files}
    assert (str(junit) in fetched) == ok_size
    assert (
        f"{folder}/nested/rspec.json" in fetched or (REPORTS / "rspec.json").stat().st_size > 1500
    )
    assert f"{tmp_path / 'missing.xml'}: no such file" in got.errors
    assert any(e.startswith(f"{big}: 2048 bytes, over the 1500-byte limit") for e in got.errors)
    assert all("\n" not in e for e in got.errors)
    for f in got.files:
        assert Path(f.path).parent == tmp_path / "in"
        assert Path(f.path).read_bytes() and len(f.sha256) == 64


def test_local_reports_are_copied_whole(tmp_path: Path) -> None:
    junit = REPORTS / "pytest-xunit1.xml"
    got = fetch_reports([str(junit), f"file://{junit}"], tmp_path / "in")
    assert got.errors == []
    assert len(got.files) == 2 and len({f.path for f in got.files}) == 2
    assert all(Path(f.path).read_bytes() == junit.read_bytes() for f in got.files)


@pytest.mark.slow
def test_s3_reports_one_bad_uri_never_loses_the_others(s3_bucket: str, tmp_path: Path) -> None:
    import boto3

    s3 = boto3.client("s3")
    junit = (REPORTS / "rspec-junit-formatter.xml").read_bytes()
    s3.put_object(Bucket=s3_bucket, Key="runs/42/junit.xml", Body=junit)
    s3.put_object(Bucket=s3_bucket, Key="runs/42/rspec.json", Body=b'{"examples": []}')
    s3.put_object(Bucket=s3_bucket, Key="runs/42/huge.xml", Body=b"<x/>" * 1000)
    s3.put_object(Bucket=s3_bucket, Key="runs/42/../../escape.xml", Body=b"<testsuite/>")
    uris = [
        f"s3://{s3_bucket}/runs/42/junit.xml",
        f"s3://{s3_bucket}/runs/42/nope.xml",
        "s3://autopilot-no-such-bucket-x/k.xml",
        f"s3://{s3_bucket}/runs/42/huge.xml",
        f"s3://{s3_bucket}/runs/42/../../escape.xml",
        "s3:///no-bucket.xml",
    ]
    got = fetch_reports(uris, tmp_path / "in", max_bytes=max(len(junit), 20) + 10)
    by_uri = {f.uri: Path(f.path) for f in got.files}
    assert by_uri[uris[0]].read_bytes() == junit
    escaped = by_uri[uris[4]]
    assert escaped.parent == tmp_path / "in" and escaped.read_bytes() == b"<testsuite/>"
    assert f"{uris[1]}: no such object" in got.errors
    assert f"{uris[2]}: no such bucket" in got.errors
    assert f"{uris[3]}: 4000 bytes, over the {len(junit) + 10}-byte limit" in got.errors
    assert f"{uris[5]}: no bucket in the URI" in got.errors
    assert not (tmp_path / "in" / "huge.xml").exists()
    # A prefix brings every report under it.
    prefix = fetch_reports([f"s3://{s3_bucket}/runs/42/"], tmp_path / "all", max_bytes=1 << 20)
    assert len(prefix.files) == 4 and prefix.errors == []


def _remote_with_clone(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote, the worker's clone of it, and a developer's clone that pushes later."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    dev = tmp_path / "dev"
    git(tmp_path, "clone", "-q", str(bare), str(dev))
    (dev / "app.rb").write_text("puts 1\n")
    git(dev, "add", "-A")
    git(dev, "commit", "-qm", "first")
    git(dev, "push", "-q", "origin", "HEAD:main")
    worker = tmp_path / "worker"
    git(tmp_path, "clone", "-q", str(bare), str(worker))
    return bare, worker, dev


def _new_commit(dev: Path, branch: str = "main") -> str:
    (dev / "app.rb").write_text("puts 2\n")
    git(dev, "commit", "-qam", "the merge that broke the tests")
    git(dev, "push", "-q", "origin", f"HEAD:{branch}")
    return git(dev, "rev-parse", "HEAD")


def test_missing_commit_is_fetched_from_the_remote(tmp_path: Path) -> None:
    _bare, worker, dev = _remote_with_clone(tmp_path)
    sha = _new_commit(dev)
    (dev / "later.rb").write_text("puts 9\n")
    git(dev, "add", "-A")
    git(dev, "commit", "-qm", "a later merge")
    git(dev, "push", "-q", "origin", "HEAD:main")
    with pytest.raises(subprocess.CalledProcessError):
        git(worker, "cat-file", "-e", f"{sha}^{{commit}}")
    # The failing commit is no branch tip any more, and a server speaking the original
    # protocol refuses unadvertised ids: the branches bring it.
    git(worker, "config", "protocol.version", "0")
    got = ensure_commit(worker, sha)
    assert got.fetched and got.sha == sha and got.how == "fetched with the remote's branches"
    assert ensure_commit(worker, sha[:12]).how == "present"


def test_commit_fetched_by_id_when_the_server_allows(tmp_path: Path) -> None:
    bare, worker, dev = _remote_with_clone(tmp_path)
    git(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
    sha = _new_commit(dev, branch="feature")
    git(dev, "push", "-q", "origin", ":feature")  # on no branch any more, still in the remote
    got = ensure_commit(worker, sha)
    assert got.how == "fetched by id" and got.sha == sha


def test_unknown_or_bad_commits_are_one_line(tmp_path: Path) -> None:
    _, worker, _ = _remote_with_clone(tmp_path)
    with pytest.raises(GitError, match=r"commit 0{40} is neither here nor on any branch of origin"):
        ensure_commit(worker, "0" * 40)
    with pytest.raises(GitError, match="not a commit id"):
        ensure_commit(worker, "HEAD; rm -rf /")
    with pytest.raises(GitError, match="not a valid remote"):
        ensure_commit(worker, "a" * 40, remote="--upload-pack=touch /tmp/pwned")
    with pytest.raises(GitError, match="fetching nowhere failed"):
        ensure_commit(worker, "b" * 40, remote="nowhere")


def test_fix_branch_pushed_and_a_refusal_is_an_outcome(tmp_path: Path) -> None:
    bare, worker, dev = _remote_with_clone(tmp_path)
    git(worker, "checkout", "-qb", "autopilot/fix-abc")
    (worker / "app.rb").write_text("puts 3\n")
    git(worker, "commit", "-qam", "fix")
    out = push_fix_branch(worker, "autopilot/fix-abc")
    assert out.pushed and out.error is None
    assert git(bare, "rev-parse", "autopilot/fix-abc") == git(worker, "rev-parse", "HEAD")
    # Someone else pushed to the same branch: never forced, the refusal is reported.
    git(dev, "fetch", "-q", "origin")
    git(dev, "checkout", "-qb", "other", "origin/autopilot/fix-abc")
    (dev / "app.rb").write_text("puts 4\n")
    git(dev, "commit", "-qam", "theirs")
    git(dev, "push", "-q", "origin", "HEAD:autopilot/fix-abc")
    (worker / "app.rb").write_text("puts 5\n")
    git(worker, "commit", "-qam", "ours")
    refused = push_fix_branch(worker, "autopilot/fix-abc")
    assert not refused.pushed and refused.error is not None and "\n" not in refused.error
    assert "rejected" in refused.error or "fetch first" in refused.error
    assert git(worker, "log", "-1", "--format=%s") == "ours"  # the branch is kept
