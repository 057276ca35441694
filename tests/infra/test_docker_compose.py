"""The compose stack, up for real with Debian's docker-compose: infra/compose.yaml plus the local
override (images built offline on the debootstrap base, moto in place of MinIO), a git daemon
serving a repository made from the Rails example, and the scripted model server, all on the
stack's own network. The post-merge deployment runs on the process worker, the nightly on the
docker work pool (a flow-run container per run); both archive to the S3 server. Then the stack
comes down and leaves no container, network or volume."""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.docker_images import built_image, docker, require_engine
from tests.examples_repo import git, make_example_repo
from tests.fakes.compose_model import REGRESSION
from tests.flows.test_nightly_rails import SOURCE, SPEC
from tests.flows.test_post_merge_rails import PRODUCT
from tests.infra.test_infra import free_port

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(2400)]

INFRA = REPO_ROOT / "infra"
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def override_file(tests_dir: Path, git_dir: Path) -> str:
    """The test's own services: a git daemon for the repository and the scripted model."""
    return f"""
version: "3.9"
services:
  git:
    image: ${{AUTOPILOT_IMAGE}}
    command: ["git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
              "--base-path=/srv/git", "/srv/git"]
    volumes: ["{git_dir}:/srv/git"]
  model:
    image: ${{AUTOPILOT_IMAGE}}
    command: ["python", "-m", "tests.fakes.compose_model", "--port", "8000"]
    environment:
      PYTHONPATH: /srv/autopilot-tests
    volumes: ["{tests_dir}:/srv/autopilot-tests/tests:ro"]
  register:
    depends_on: [git, model]
"""


class Stack:
    """One compose project, named uniquely; `down()` removes everything it made."""

    def __init__(self, work: Path, head: str, bare: Path) -> None:
        self.head, self.bare = head, bare
        self.name = f"aptest{uuid.uuid4().hex[:8]}"
        self.work = work
        self.ui_port, self.s3_port = free_port(), free_port()
        self.api = f"http://127.0.0.1:{self.ui_port}/api"
        self.files = [
            INFRA / "compose.yaml",
            INFRA / "compose.local.yaml",
            work / "compose.test.yaml",
        ]
        self.env = {
            **os.environ,
            "COMPOSE_PROJECT_NAME": self.name,
            "AUTOPILOT_STACK": self.name,
            "AUTOPILOT_IMAGE": built_image("test-autopilot-worker"),
            "AUTOPILOT_POSTGRES_IMAGE": built_image("test-autopilot-postgres"),
            "AUTOPILOT_S3_IMAGE": built_image("test-autopilot-s3"),
            "AUTOPILOT_SECRETS": str(work / "secrets"),
            "AUTOPILOT_BIND": "127.0.0.1",
            "AUTOPILOT_UI_PORT": str(self.ui_port),
            "AUTOPILOT_S3_PORT": str(self.s3_port),
            "AUTOPILOT_REPO_URL": "git://git/shop.git",
            "AUTOPILOT_MODEL_URL": "http://model:8000",
        }

    def compose(self, *args: str, timeout: float = 900, check: bool = True) -> str:
        cmd = ["docker-compose", "-p", self.name]
        for f in self.files:
            cmd += ["-f", str(f)]
        done = subprocess.run(
            [*cmd, *args], env=self.env, cwd=INFRA, capture_output=True, text=True, timeout=timeout
        )
        if check and done.returncode != 0:
            raise AssertionError(f"docker-compose {' '.join(args)}: {done.stderr[-4000:]}")
        return done.stdout

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.api}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read()
        return json.loads(text) if text else None

    def run_deployment(
        self, name: str, parameters: dict[str, Any], timeout_s: float
    ) -> dict[str, Any]:
        """Start a run of deployment `name` ("flow/deployment") and wait for its end."""
        dep = self.call("GET", f"/deployments/name/{name}")
        run = self.call(
            "POST", f"/deployments/{dep['id']}/create_flow_run", {"parameters": parameters}
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self.call("GET", f"/flow_runs/{run['id']}")
            if run["state"]["type"] in TERMINAL:
                return run
            time.sleep(3)
        raise AssertionError(
            f"{name}: run {run['id']} still {run['state']['type']} after {timeout_s}s"
        )

    def logs(self, run_id: str) -> str:
        rows = self.call(
            "POST", "/logs/filter", {"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 200}
        )
        return "\n".join(r["message"] for r in rows)[-6000:]

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes whose name carries the project's."""
        found = {}
        for kind, args in (
            ("containers", ["ps", "-a", "--format", "{{.Names}}"]),
            ("networks", ["network", "ls", "--format", "{{.Name}}"]),
            ("volumes", ["volume", "ls", "--format", "{{.Name}}"]),
        ):
            found[kind] = [n for n in docker(*args).stdout.split() if self.name in n]
        return found

    def down(self) -> None:
        # Flow-run containers of the docker pool are on the stack's network too.
        for cid in docker("ps", "-aq", "--filter", f"network={self.name}").stdout.split():
            docker("rm", "-f", cid, check=False)
        self.compose("--profile", "docker-pool", "down", "-v", "--remove-orphans", "-t", "10")


def write_secrets(directory: Path) -> None:
    directory.mkdir()
    values = {
        "postgres_password": secrets.token_hex(12),
        "aws_access_key_id": "autopilot",
        "aws_secret_access_key": secrets.token_hex(16),
        "mistral_api_key": "scripted-model-key",
    }
    for name, value in values.items():
        (directory / name).write_text(value)
        (directory / name).chmod(0o600)  # as docs/operators.md makes them: root's alone


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    require_engine()
    if shutil.which("docker-compose") is None:
        pytest.fail("docker-compose not installed (run `make setup`)", pytrace=False)
    work = tmp_path_factory.mktemp("compose")
    # The repository: the example, then a merge that breaks a model spec.
    repo = make_example_repo("rails_shop", work / "shop")
    product = repo / PRODUCT
    product.write_text(product.read_text().replace(*REGRESSION))
    git(repo, "commit", "-qam", "Merge: reserve a spare unit")
    git_dir = work / "git"
    git_dir.mkdir()
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(repo), str(git_dir / "shop.git")], check=True
    )
    subprocess.run(["chmod", "-R", "a+rwX", str(git_dir)], check=True)  # the daemon's user pushes
    write_secrets(work / "secrets")
    (work / "compose.test.yaml").write_text(override_file(REPO_ROOT / "tests", git_dir))
    s = Stack(work, git(repo, "rev-parse", "HEAD").strip(), git_dir / "shop.git")
    try:
        s.compose("up", "-d", "--no-build", timeout=1200)
        yield s
    finally:
        try:
            s.down()
        finally:
            assert s.leftovers() == {"containers": [], "networks": [], "volumes": []}


def s3_objects(stack: Stack, prefix: str) -> dict[str, bytes]:
    import boto3

    secrets_dir = stack.work / "secrets"
    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{stack.s3_port}",
        aws_access_key_id=(secrets_dir / "aws_access_key_id").read_text(),
        aws_secret_access_key=(secrets_dir / "aws_secret_access_key").read_text(),
        region_name="us-east-1",
    )
    listed = client.list_objects_v2(Bucket="autopilot-archive", Prefix=prefix).get("Contents", [])
    return {
        o["Key"]: client.get_object(Bucket="autopilot-archive", Key=o["Key"])["Body"].read()
        for o in listed
    }


def test_registration_made_pools_blocks_and_deployments(stack: Stack) -> None:
    deps = {d["name"]: d for d in stack.call("POST", "/deployments/filter", {"limit": 50})}
    assert set(deps) == {"nightly", "post-merge", "premerge", "audit", "nightly-docker"}
    assert deps["nightly"]["entrypoint"] == "flows.nightly:nightly"
    assert deps["nightly-docker"]["work_pool_name"] == "autopilot-docker"
    pool = stack.call("GET", "/work_pools/autopilot-docker")["base_job_template"]["variables"]
    props = pool["properties"]
    # The pool's network and volume are the ones compose made.
    assert props["networks"]["default"] == [stack.name]
    assert props["volumes"]["default"] == [f"{stack.name}-home:/var/lib/autopilot"]
    assert props["image"]["default"] == stack.env["AUTOPILOT_IMAGE"]
    env = props["env"]["default"]
    assert env["AUTOPILOT_REPO_URL"] == "git://git/shop.git"
    # Credentials are Secret blocks, never in the pool or the deployments.
    text = json.dumps(pool) + json.dumps(list(deps.values()))
    for name in ("aws_secret_access_key", "postgres_password"):
        assert (stack.work / "secrets" / name).read_text() not in text
    blocks = {b["name"] for b in stack.call("POST", "/block_documents/filter", {"limit": 50})}
    assert {"mistral-api-key", "aws-access-key-id", "aws-secret-access-key"} <= blocks
    inspected = json.loads(docker("volume", "inspect", f"{stack.name}-home").stdout)
    assert inspected[0]["Labels"]["com.docker.compose.project"] == stack.name


def test_post_merge_runs_on_the_process_worker(stack: Stack) -> None:
    run = stack.run_deployment("post-merge/post-merge", {}, timeout_s=900)
    assert run["state"]["type"] == "COMPLETED", stack.logs(run["id"]) + stack.compose(
        "logs", "--tail", "80", "worker"
    )
    head = stack.head
    branch = f"autopilot/fix-{head[:7]}"
    # The fix branch is in the clone on the AUTOPILOT_HOME volume.
    shown = stack.compose(
        "exec",
        "-T",
        "--user",
        "autopilot",
        "worker",
        "git",
        "-C",
        "/var/lib/autopilot/repo",
        "show",
        f"{branch}:{PRODUCT}",
    )
    assert "stock - quantity)" in shown and "stock - quantity - 1)" not in shown
    prefix = f"runs/post_merge/{dt.date.today().isoformat()}/{run['id']}/"
    objects = s3_objects(stack, prefix)
    manifest = json.loads(objects[prefix + "manifest.json"])
    assert {o["key"] for o in manifest["objects"]} >= {"summary.json"}
    summary = json.loads(objects[prefix + "summary.json"])
    assert summary["branch"] == branch
    assert [g["outcome"] for g in summary["groups"]] == ["fixed"]


def test_nightly_runs_on_the_docker_pool(stack: Stack) -> None:
    stack.compose("--profile", "docker-pool", "up", "-d", "--no-build", "docker-worker")
    run = stack.run_deployment(
        "nightly/nightly-docker", {"only": [SOURCE], "max_files": 1, "max_iterations": 2}, 1200
    )
    logs = stack.logs(run["id"])
    assert run["state"]["type"] == "COMPLETED", logs + stack.compose(
        "logs", "--tail", "80", "docker-worker"
    )
    # It ran in a container of its own, not in the process worker.
    assert "autopilot-process" not in json.dumps(run.get("work_pool_name"))
    assert run["work_pool_name"] == "autopilot-docker"
    branch = f"autopilot/nightly-{dt.date.today().isoformat()}"
    bare = stack.bare
    # Pushed through the stack's network to the repository's remote.
    spec = subprocess.run(
        ["git", "-C", str(bare), "show", f"{branch}:{SPEC}"], capture_output=True, text=True
    )
    assert spec.returncode == 0, spec.stderr
    assert "RSpec.describe Customer" in spec.stdout
    objects = s3_objects(stack, f"runs/nightly/{dt.date.today().isoformat()}/")
    summary = json.loads(next(v for k, v in objects.items() if k.endswith("/summary.json")))
    assert summary["files"][0]["verdict"] == "accepted", summary["files"][0]
