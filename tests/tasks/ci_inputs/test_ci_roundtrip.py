"""CI in, pull request out, with the parts the post-merge flow will call (real S3 server, real
git, real httpx against the fake forge): CI uploads its reports and names the failing commit;
the worker's clone lacks that commit and fetches it; the reports are fetched and parsed; the fix
branch is pushed to the bare remote; a pull request is opened whose body is the summary."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import boto3
import pytest
from pydantic import SecretStr

from tasks.ci_inputs import ensure_commit, fetch_reports, push_fix_branch
from tasks.facts.reports.read import parse_reports
from tasks.forge import ForgeSettings, open_pull_request, pull_request_body
from tests.fakes.forge_server import FakeForge, forge_fixture  # noqa: F401
from tests.paths import TESTS
from tests.s3server import S3Server, s3_bucket_fixture, s3_server_fixture  # noqa: F401

REPORTS = TESTS / "data" / "reports"
ID = {
    "GIT_AUTHOR_NAME": "CI",
    "GIT_AUTHOR_EMAIL": "ci@example.invalid",
    "GIT_COMMITTER_NAME": "CI",
    "GIT_COMMITTER_EMAIL": "ci@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **ID},
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


@pytest.mark.slow
def test_ci_reports_in_pull_request_out(s3_bucket: str, forge: FakeForge, tmp_path: Path) -> None:
    # The remote and the worker's clone, made before the failing merge.
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    dev = tmp_path / "dev"
    git(tmp_path, "clone", "-q", str(bare), str(dev))
    (dev / "README.md").write_text("shop\n")
    git(dev, "add", "-A")
    git(dev, "commit", "-qm", "start")
    git(dev, "push", "-q", "origin", "HEAD:main")
    worker = tmp_path / "worker"
    git(tmp_path, "clone", "-q", str(bare), str(worker))
    # The merge that broke the tests; CI runs, fails, uploads its reports.
    (dev / "price.rb").write_text("PRICE = 11\n")
    git(dev, "add", "-A")
    git(dev, "commit", "-qm", "merge: new prices")
    git(dev, "push", "-q", "origin", "HEAD:main")
    failing = git(dev, "rev-parse", "HEAD")
    s3 = boto3.client("s3")
    s3.put_object(
        Bucket=s3_bucket,
        Key=f"ci/{failing}/rspec.json",
        Body=(REPORTS / "rspec.json").read_bytes(),
    )
    s3.put_object(
        Bucket=s3_bucket,
        Key=f"ci/{failing}/junit.xml",
        Body=(REPORTS / "rspec-junit-formatter.xml").read_bytes(),
    )
    uris = [f"s3://{s3_bucket}/ci/{failing}/rspec.json", f"s3://{s3_bucket}/ci/{failing}/junit.xml"]

    # The worker: the commit, then the reports.
    commit = ensure_commit(worker, failing)
    assert commit.fetched and commit.sha == failing
    fetched = fetch_reports(uris, tmp_path / "run" / "reports")
    assert fetched.errors == [] and len(fetched.files) == 2
    run = parse_reports(fetched.paths, repo=worker)
    assert run.errors == []
    failures = [c for c in run.cases if c.status in ("failed", "error")]
    assert len(failures) >= 2

    # The repair's fix branch (here one commit on top of the failing one), pushed.
    branch = f"autopilot/fix-{failing[:12]}"
    git(worker, "checkout", "-q", "-b", branch, failing)
    (worker / "price.rb").write_text("PRICE = 10\n")
    git(worker, "commit", "-qam", "Fix the price the specs expect")
    pushed = push_fix_branch(worker, branch)
    assert pushed.pushed, pushed.error
    assert git(bare, "rev-parse", branch) == git(worker, "rev-parse", "HEAD")

    # The pull request, its body the run's summary with its links.
    forge.state.branches.update(git(bare, "for-each-ref", "--format=%(refname:short)").split())
    summary = f"# Post-merge repair of shop\n\n- failures: {len(failures)}\n- fixed: 1 group\n"
    body = pull_request_body(
        summary,
        flow_run_url="http://127.0.0.1:4200/runs/flow-run/42",
        archive_uri=f"s3://{s3_bucket}/archive/post_merge/42",
        commit=failing,
    )
    settings = ForgeSettings(kind="github", repository="acme/shop", api_url=forge.url)
    out = open_pull_request(
        settings,
        head=branch,
        title=f"Autopilot: fix tests broken by {failing[:12]}",
        body=body,
        token=SecretStr("forge-token"),
    )
    assert out.status == "opened", out.error
    (req,) = forge.requests
    assert req.path == "/repos/acme/shop/pulls"
    assert req.body["head"] == branch and req.body["base"] == "main"
    assert req.body["body"].startswith(summary)
    assert f"- Failing commit: `{failing}`" in req.body["body"]
