"""infra/: the YAML loads, and `prefect deploy` accepts infra/prefect.yaml against a real
`prefect server start` on loopback; the deployments are then there with their cron schedule,
event trigger and work pools. Also home of `PrefectServer`, the real server other tests start."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO_ROOT

INFRA = REPO_ROOT / "infra"
PREFECT = str(Path(sys.executable).with_name("prefect"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _send(req: urllib.request.Request, attempts: int = 8) -> bytes:
    """The reply body, retrying what the server asks to retry, as Prefect's own client does:
    503 is its answer when SQLite is busy under concurrent writers (runner, services)."""
    delay = 0.25
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return bytes(r.read())
        except urllib.error.HTTPError as exc:
            if exc.code not in (429, 503) or attempt == attempts - 1:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 4.0)
    raise AssertionError("unreachable")


class PrefectServer:
    """`prefect server start` on 127.0.0.1 with its own PREFECT_HOME; stopped by `stop()`."""

    def __init__(self, home: Path, startup_timeout_s: float = 600.0) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.url}/api"
        self.startup_timeout_s = startup_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = home / "server.log"

    def env(self, **extra: str) -> dict[str, str]:
        """An environment for a process that talks to this server (never to another one)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update(
            PREFECT_HOME=str(self.home),
            PREFECT_API_URL=self.api_url,
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            DO_NOT_TRACK="1",
        )
        env.update(extra)
        return env

    def start(self) -> PrefectServer:
        self.home.mkdir(parents=True, exist_ok=True)
        env = self.env()
        del env["PREFECT_API_URL"]
        # The UI's browser code calls this URL; its default is 127.0.0.1:4200, not our port.
        env["PREFECT_UI_API_URL"] = self.api_url
        cmd = [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(self.port)]
        with self.log.open("wb") as out:
            # Own session: stop() ends the server and the services it forks, nothing else.
            self.proc = subprocess.Popen(
                cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prefect server exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"prefect server not healthy: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST JSON to the server's API and return the decoded reply."""
        req = urllib.request.Request(
            f"{self.api_url}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        return json.loads(_send(req) or b"null")

    def get(self, path: str) -> Any:
        """GET from the server's API and return the decoded reply."""
        return json.loads(_send(urllib.request.Request(f"{self.api_url}{path}")))

    def prefect(self, *args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
        """The prefect CLI against this server."""
        return subprocess.run(
            [PREFECT, *args], cwd=cwd, env=self.env(), capture_output=True, text=True, timeout=180
        )


def running_server(home: Path) -> Iterator[PrefectServer]:
    """Start a server for a fixture; stopped at teardown whatever happened."""
    server = PrefectServer(home)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectServer]:
    yield from running_server(tmp_path_factory.mktemp("prefect-infra"))


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def test_every_yaml_file_in_infra_loads() -> None:
    files = sorted(INFRA.rglob("*.yaml")) + sorted(INFRA.rglob("*.yml"))

    assert {p.name for p in files} >= {"prefect.yaml", "compose.yaml", "automations.yaml"}
    for path in files:
        assert isinstance(_load(path), dict), path


def test_compose_stack_has_postgres_server_worker_s3_and_registration() -> None:
    compose = _load(INFRA / "compose.yaml")
    services = compose["services"]

    assert {"postgres", "prefect-server", "worker", "s3", "register", "docker-worker"} <= set(
        services
    )
    server_env = services["prefect-server"]["environment"]
    assert server_env["PREFECT_SERVER_DATABASE_DRIVER"] == "postgresql+asyncpg"
    worker = services["worker"]
    assert "autopilot-process" in " ".join(worker["command"])
    assert worker["environment"]["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert worker["build"]["dockerfile"] == "infra/Dockerfile"
    # AUTOPILOT_HOME is a named volume; credentials are compose secrets, not environment.
    assert "home:/var/lib/autopilot" in worker["volumes"]
    assert set(compose["secrets"]) == {
        "postgres_password",
        "aws_access_key_id",
        "aws_secret_access_key",
        "mistral_api_key",
    }
    for service in services.values():
        env = service.get("environment") or {}
        assert not {"MISTRAL_API_KEY", "AWS_SECRET_ACCESS_KEY", "POSTGRES_PASSWORD"} & set(env)
    assert services["register"]["depends_on"]["prefect-server"]["condition"] == "service_healthy"
    assert worker["depends_on"]["register"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("files", [["compose.yaml"], ["compose.yaml", "compose.local.yaml"]])
def test_compose_files_pass_docker_compose_config(files: list[str], tmp_path: Path) -> None:
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip("docker-compose not installed")
    for name in ("postgres_password", "aws_access_key_id", "aws_secret_access_key"):
        (tmp_path / name).write_text("x")
    (tmp_path / "mistral_api_key").write_text("")
    env = {
        **os.environ,
        "AUTOPILOT_SECRETS": str(tmp_path),
        "AUTOPILOT_REPO_URL": "git://git.example.invalid/shop.git",
        "AUTOPILOT_STACK": "ap-config-check",
    }
    args = [compose, "-p", "ap-config-check"] + [a for f in files for a in ("-f", f)]
    done = subprocess.run(
        [*args, "config"], cwd=INFRA, env=env, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    config = yaml.safe_load(done.stdout)
    assert config["networks"]["default"]["name"] == "ap-config-check"
    assert config["volumes"]["home"]["name"] == "ap-config-check-home"
    # Without the repository's URL compose refuses to start, with a message that says so.
    del env["AUTOPILOT_REPO_URL"]
    bad = subprocess.run(
        [*args, "config"], cwd=INFRA, env=env, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode != 0 and "AUTOPILOT_REPO_URL" in bad.stderr


def test_docker_pool_template_matches_the_compose_names() -> None:
    pool = json.loads((INFRA / "work-pools" / "docker.json").read_text())
    props = pool["variables"]["properties"]
    compose = _load(INFRA / "compose.yaml")

    assert compose["networks"]["default"]["name"] == "${AUTOPILOT_STACK:-autopilot}"
    assert props["networks"]["default"] == ["autopilot"]
    assert compose["volumes"]["home"]["name"] == "${AUTOPILOT_STACK:-autopilot}-home"
    assert props["volumes"]["default"] == ["autopilot-home:/var/lib/autopilot"]
    kwargs = props["container_create_kwargs"]["default"]
    assert kwargs["cap_add"] == ["SYS_ADMIN"] and kwargs["user"] == "0"


def test_github_workflow_runs_post_merge_only_after_a_failed_main_build() -> None:
    wf = _load(INFRA / "github-actions" / "autopilot-post-merge.yml")

    # PyYAML reads the bare key `on` as True.
    trigger = wf[True]["workflow_run"]
    assert trigger["types"] == ["completed"] and trigger["branches"] == ["main"]
    [job] = wf["jobs"].values()
    assert "conclusion == 'failure'" in job["if"]
    script = " ".join(str(step.get("run", "")) for step in job["steps"])
    assert "prefect deployment run post-merge/post-merge" in script
    # CI's reports go to S3 and their URIs, with the failing commit, to the run.
    assert 'aws s3 cp --recursive reports "s3://$BUCKET/ci/$SHA/"' in script
    assert '"commit": sha, "reports": uris' in script and "--params" in script


def test_gitlab_example_uploads_the_reports_and_passes_their_uris() -> None:
    gl = _load(INFRA / "gitlab-ci" / "autopilot-post-merge.gitlab-ci.yml")
    job = gl["autopilot-repair"]
    assert job["when"] == "on_failure" and job["needs"] == [{"job": "test", "artifacts": True}]
    script = " ".join(job["script"])
    assert "aws s3 cp --recursive reports" in script and "$CI_COMMIT_SHA" in script
    assert '"commit": sha, "reports": uris' in script
    assert "prefect deployment run post-merge/post-merge --params" in script


def test_github_premerge_example_starts_the_run_for_the_pull_requests_head() -> None:
    wf = _load(INFRA / "github-actions" / "autopilot-premerge.yml")
    assert wf[True]["pull_request"]["types"] == ["opened", "synchronize", "reopened"]
    [job] = wf["jobs"].values()
    assert "head.repo.full_name == github.repository" in job["if"]  # no secrets for forks
    script = " ".join(str(step.get("run", "")) for step in job["steps"])
    assert "prefect deployment run premerge/premerge --params" in script
    assert '"head": f"refs/pull/{n}/head"' in script and '"pr_number": n' in script


def test_gitlab_premerge_example_runs_in_merge_request_pipelines() -> None:
    gl = _load(INFRA / "gitlab-ci" / "autopilot-premerge.gitlab-ci.yml")
    job = gl["autopilot-premerge"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    script = " ".join(job["script"])
    assert 'f"refs/merge-requests/{iid}/head"' in script and '"pr_number": iid' in script
    assert "prefect deployment run premerge/premerge --params" in script


def test_dockerfiles_take_their_base_as_a_build_argument() -> None:
    text = (INFRA / "Dockerfile").read_text()

    for package in ("ruby", "rspec", "rubocop", "simplecov", "bubblewrap", "git"):
        assert package in text, package
    # Autopilot from its wheel, with the lock file's versions.
    assert "uv export --frozen" in text and "uv build --wheel" in text
    for dockerfile in INFRA.glob("*Dockerfile"):
        first = next(
            line for line in dockerfile.read_text().splitlines() if line.startswith(("ARG", "FROM"))
        )
        assert first.startswith("ARG BASE=") and "slim" in first, dockerfile


@pytest.mark.slow
def test_prefect_deploy_accepts_the_file_and_the_deployments_are_queryable(
    server: PrefectServer,
) -> None:
    for pool, kind in (("autopilot-process", "process"), ("autopilot-docker", "docker")):
        made = server.prefect(
            "work-pool",
            "create",
            pool,
            "--type",
            kind,
            "--base-job-template",
            str(INFRA / "work-pools" / f"{kind}.json"),
        )
        assert made.returncode == 0, made.stdout + made.stderr

    done = server.prefect("--no-prompt", "deploy", "--all", "--prefect-file", "infra/prefect.yaml")

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    deployments = {f"{d['name']}": d for d in server.post("/deployments/filter", {"limit": 50})}
    assert set(deployments) == {"nightly", "post-merge", "premerge", "audit", "nightly-docker"}
    nightly = deployments["nightly"]
    [schedule] = nightly["schedules"]
    assert schedule["schedule"]["cron"] == "0 2 * * *"
    assert schedule["schedule"]["timezone"] == "UTC" and schedule["active"] is True
    assert nightly["work_pool_name"] == "autopilot-process"
    assert nightly["entrypoint"] == "flows.nightly:nightly"
    assert nightly["parameters"]["repo"] == "/var/lib/autopilot/repo"
    # Pull steps: Secret blocks into the environment, then the repository cloned or fetched.
    steps = [next(iter(s)) for s in nightly["pull_steps"]]
    assert steps == ["tasks.deploy_steps.load_secrets", "tasks.deploy_steps.sync_repository"]
    assert nightly["pull_steps"][1][steps[1]]["url"] == "{{ $AUTOPILOT_REPO_URL }}"
    assert set(nightly["tags"]) == {"autopilot", "nightly"}
    assert deployments["nightly-docker"]["work_pool_name"] == "autopilot-docker"
    assert deployments["nightly-docker"]["schedules"][0]["active"] is False
    pool = server.get("/work_pools/autopilot-docker")
    assert pool["type"] == "docker"
    assert pool["base_job_template"]["variables"]["properties"]["image"]["default"] == (
        "test-autopilot-worker:latest"
    )

    # The post-merge trigger is an automation on autopilot.ci.failed that runs the deployment
    # with the event's repo and ref.
    automations = server.post("/automations/filter", {"limit": 50})
    [trigger] = [a for a in automations if "autopilot.ci.failed" in a["trigger"]["expect"]]
    [action] = trigger["actions"]
    assert action["type"] == "run-deployment"
    assert action["deployment_id"] == deployments["post-merge"]["id"]
    assert action["parameters"]["commit"] == "{{ event.payload.commit }}"
    assert action["parameters"]["reports"] == "{{ event.payload.reports }}"
    # The premerge's: autopilot.pr.changed runs it with the pull request's base, head, number.
    [trigger] = [a for a in automations if "autopilot.pr.changed" in a["trigger"]["expect"]]
    [action] = trigger["actions"]
    assert action["deployment_id"] == deployments["premerge"]["id"]
    assert action["parameters"]["head"] == "{{ event.payload.head }}"
    assert action["parameters"]["pr_number"] == "{{ event.payload.pr_number }}"
    assert deployments["premerge"]["entrypoint"] == "flows.premerge:premerge"


@pytest.mark.slow
def test_example_automations_are_accepted_by_the_server(
    server: PrefectServer, tmp_path: Path
) -> None:
    # The file names its notification block by placeholder; an operator puts their block's id.
    types = server.post(
        "/block_types/filter", {"block_types": {"slug": {"any_": ["slack-webhook"]}}}
    )
    assert types, "slack-webhook block type not registered"
    schemas = server.post(
        "/block_schemas/filter",
        {"block_schemas": {"block_type_id": {"any_": [types[0]["id"]]}}},
    )
    doc = server.post(
        "/block_documents/",
        {
            "name": "autopilot-ops",
            "block_type_id": types[0]["id"],
            "block_schema_id": schemas[0]["id"],
            "data": {"url": "http://127.0.0.1:9/hook"},
        },
    )
    text = (INFRA / "automations.yaml").read_text().replace("<NOTIFY_BLOCK_ID>", doc["id"])
    path = tmp_path / "automations.yaml"
    path.write_text(text)

    made = server.prefect("automation", "create", "--from-file", str(path))

    assert made.returncode == 0, made.stdout + made.stderr
    names = {a["name"]: a for a in server.post("/automations/filter", {"limit": 50})}
    assert {"autopilot: nightly failed", "autopilot: human needed"} <= set(names)
    human = names["autopilot: human needed"]
    assert human["trigger"]["expect"] == ["autopilot.human.needed"]
    assert human["actions"][0]["block_document_id"] == doc["id"]
    failed = names["autopilot: nightly failed"]
    assert "prefect.flow-run.Failed" in failed["trigger"]["expect"]
