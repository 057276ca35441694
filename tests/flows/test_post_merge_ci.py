"""CI in, pull request out, through the post-merge flow: CI uploads its report to S3 and names
the failing commit; the worker's clone lacks that commit and fetches it; the flow repairs it
with the scripted model, pushes the fix branch to the (bare) remote and opens a pull request on
the fake forge whose body is the run's summary. A forge that refuses is a reported outcome: the
branch is on the remote and the archive holds the run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest

from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import SubprocessRunner, git, make_example_repo
from tests.fakes.forge_server import FakeForge, forge_fixture  # noqa: F401
from tests.fakes.mistral_server import MistralServer
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_post_merge import PRICING, patch_to, script
from tests.s3server import S3Server, s3_bucket_fixture, s3_server_fixture  # noqa: F401

pytestmark = pytest.mark.slow


class RemoteBranches(set[str]):
    """The fake forge's branches: the bare remote's, as a real forge sees its repository."""

    def __init__(self, bare: Path) -> None:
        super().__init__()
        self.bare = bare

    def __contains__(self, name: object) -> bool:
        ref = f"refs/heads/{name}"
        done = subprocess.run(["git", "show-ref", "--verify", "-q", ref], cwd=self.bare)
        return done.returncode == 0


def _ci_and_worker(tmp_path: Path, bucket: str) -> tuple[Path, Path, str, str]:
    """The remote, a worker clone made before the merge, the merge CI failed on (pushed), and
    CI's report uploaded: (worker, bare remote, failing commit, report URI)."""
    dev = make_example_repo("py_inventory", tmp_path / "dev")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(dev), str(bare))
    worker = tmp_path / "worker"
    git(tmp_path, "clone", "-q", str(bare), str(worker))
    source = dev / PRICING
    source.write_text(source.read_text().replace("(10, 5))", "(10, 6))"))
    git(dev, "commit", "-qam", "Merge: tweak volume discounts")
    git(dev, "push", "-q", str(bare), "HEAD:main")
    failing = git(dev, "rev-parse", "HEAD").strip()
    reports = tmp_path / "ci-reports"
    get_toolchain("python-pytest").run_specs(dev, [], None, SubprocessRunner(), reports_dir=reports)
    key = f"ci/{failing}/junit.xml"
    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=(reports / "junit.xml").read_bytes())
    return worker, bare, failing, f"s3://{bucket}/{key}"


def _forge_env(monkeypatch: pytest.MonkeyPatch, forge: FakeForge, token: str) -> None:
    monkeypatch.setenv("AUTOPILOT_FORGE__KIND", "github")
    forge.state.github_repos.add("acme/inventory")
    monkeypatch.setenv("AUTOPILOT_FORGE__REPOSITORY", "acme/inventory")
    monkeypatch.setenv("AUTOPILOT_FORGE__API_URL", forge.url)
    monkeypatch.setenv("AUTOPILOT_FORGE_TOKEN", token)


def _run(worker: Path, uri: str, failing: str, tmp_path: Path) -> dict[str, Any]:
    from flows.post_merge import post_merge

    return post_merge(
        repo=str(worker),
        reports=[uri, f"s3://{uri.split('/')[2]}/ci/missing.xml"],
        commit=failing,
        pr=True,
        archive=str(tmp_path / "archive"),
        human_poll_s=1,
    ).model_dump(mode="json")


def test_s3_reports_commit_fetched_branch_pushed_pull_request_opened(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    s3_bucket: str,
    forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker, bare, failing, uri = _ci_and_worker(tmp_path, s3_bucket)
    assert subprocess.run(["git", "cat-file", "-e", failing], cwd=worker).returncode != 0
    forge.state.branches = RemoteBranches(bare)
    _forge_env(monkeypatch, forge, forge.state.token)
    script(mistral_server, [patch_to(5)])

    result = _run(worker, uri, failing, tmp_path)

    assert result["base_commit"] == failing and result["failures"] == 1
    [group] = result["groups"]
    assert group["outcome"] == "fixed"
    # The one URI that names nothing is one line; the other report was used.
    assert [e for e in result["report_errors"] if "missing.xml" in e]
    branch = result["branch"]
    assert git(bare, "rev-parse", branch).strip() == git(worker, "rev-parse", branch).strip()
    assert "(10, 5))" in git(bare, "show", f"{branch}:{PRICING}")
    (req,) = forge.requests
    assert req.path == "/repos/acme/inventory/pulls"
    assert req.body["head"] == branch and req.body["base"] == "main"
    body = req.body["body"]
    assert body.startswith("# Post-merge repair of worker") and group["id"] in body
    assert f"Failing commit: `{failing}`" in body and result["archive_uri"] in body
    assert result["pull_request"].startswith("http") and "push_error" not in result
    [run_dir] = list((tmp_path / "archive" / "post_merge").glob(f"*/{result['run_id']}"))
    archived = json.loads((run_dir / "summary.json").read_text())
    assert archived["pull_request"] == result["pull_request"]


def test_a_forge_that_refuses_is_an_outcome_and_the_branch_stays(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    s3_bucket: str,
    forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker, bare, failing, uri = _ci_and_worker(tmp_path, s3_bucket)
    forge.state.branches = RemoteBranches(bare)
    _forge_env(monkeypatch, forge, "a-wrong-token")
    script(mistral_server, [patch_to(5)])

    result = _run(worker, uri, failing, tmp_path)

    assert result["groups"][0]["outcome"] == "fixed"
    line = result["pull_request"]
    assert "401" in line and "Bad credentials" in line and "\n" not in line
    assert "a-wrong-token" not in line
    branch = result["branch"]
    assert git(bare, "rev-parse", branch).strip() == git(worker, "rev-parse", branch).strip()
    [run_dir] = list((tmp_path / "archive" / "post_merge").glob(f"*/{result['run_id']}"))
    assert json.loads((run_dir / "summary.json").read_text())["pull_request"] == line
