"""One-shot set-up of a stack (the compose `register` service; safe to run again):

1. the archive bucket in the S3 server;
2. Prefect Secret blocks from the compose secrets (/run/secrets/<name>, empty files skipped):
   mistral-api-key, aws-access-key-id, aws-secret-access-key;
3. the work pools: `autopilot-process` (infra/work-pools/process.json) and `autopilot-docker`
   (infra/work-pools/docker.json, with this stack's image, network, AUTOPILOT_HOME volume and
   environment put in as the job variables' defaults, so flow-run containers join the stack);
4. the deployments of infra/prefect.yaml (`prefect --no-prompt deploy --all`).

Configured by environment: PREFECT_API_URL, AUTOPILOT_STACK (names of the network and the
volumes; default autopilot), AUTOPILOT_IMAGE, AUTOPILOT_BUCKET, AWS_ENDPOINT_URL and the
variables listed in POOL_ENV, which the docker pool's flow runs receive.

Usage: python infra/register.py [--secrets-dir /run/secrets] [--infra-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("register")

#: Compose secret file -> Prefect Secret block.
SECRETS = {
    "mistral_api_key": "mistral-api-key",
    "aws_access_key_id": "aws-access-key-id",
    "aws_secret_access_key": "aws-secret-access-key",
}
#: Configuration (never credentials) the docker pool's flow-run containers receive.
POOL_ENV = (
    "AUTOPILOT_REPO_URL",
    "AUTOPILOT_MODEL_URL",
    "AUTOPILOT_SANDBOX__BACKEND",
    "AWS_ENDPOINT_URL",
    "AWS_DEFAULT_REGION",
)
HOME_IN_CONTAINER = "/var/lib/autopilot"


def read_secrets(directory: Path) -> dict[str, str]:
    """Secret file name -> content (stripped), for the non-empty files that exist."""
    found = {}
    for name in SECRETS:
        path = directory / name
        if path.is_file():
            value = path.read_text(encoding="utf-8").strip()
            if value:
                found[name] = value
    return found


def make_bucket(bucket: str, secrets: dict[str, str], attempts: int = 60) -> None:
    """Create the archive bucket (done when it exists), waiting for the S3 server to answer."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    client = boto3.client(
        "s3",
        aws_access_key_id=secrets.get("aws_access_key_id"),
        aws_secret_access_key=secrets.get("aws_secret_access_key"),
    )
    for attempt in range(attempts):
        try:
            client.create_bucket(Bucket=bucket)
            log.info("bucket %s created", bucket)
            return
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                log.info("bucket %s exists", bucket)
                return
            raise
        except BotoCoreError as exc:
            if attempt == attempts - 1:
                raise SystemExit(f"register: S3 server unreachable: {exc}") from None
            time.sleep(1)


def save_secret_blocks(secrets: dict[str, str]) -> list[str]:
    """One Prefect Secret block per secret; returns the block names saved."""
    from prefect.blocks.system import Secret

    saved = []
    for name, value in secrets.items():
        block = SECRETS[name]
        Secret(value=value).save(block, overwrite=True)
        saved.append(block)
    return saved


def docker_pool_template(path: Path, stack: str, image: str) -> dict[str, Any]:
    """infra/work-pools/docker.json with this stack's image, network, volume and env."""
    template = json.loads(path.read_text())
    props = template["variables"]["properties"]
    props["image"]["default"] = image
    props["networks"]["default"] = [stack]
    props["volumes"]["default"] = [f"{stack}-home:{HOME_IN_CONTAINER}"]
    env = dict(props["env"].get("default") or {})
    env.update({k: os.environ[k] for k in POOL_ENV if os.environ.get(k)})
    props["env"]["default"] = env
    return template


def prefect(*args: str, cwd: Path) -> None:
    done = subprocess.run(["prefect", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"register: prefect {' '.join(args[:3])} failed:\n{done.stdout}{done.stderr}"
        )


def create_pools(infra: Path, stack: str, image: str) -> None:
    """Create or overwrite both work pools."""
    with tempfile.TemporaryDirectory() as tmp:
        docker_json = Path(tmp) / "docker.json"
        docker_json.write_text(
            json.dumps(docker_pool_template(infra / "work-pools" / "docker.json", stack, image))
        )
        pools = (
            ("autopilot-process", "process", infra / "work-pools" / "process.json"),
            ("autopilot-docker", "docker", docker_json),
        )
        for name, kind, template in pools:
            prefect(
                "work-pool",
                "create",
                name,
                "--type",
                kind,
                "--base-job-template",
                str(template),
                "--overwrite",
                cwd=infra,
            )
            log.info("work pool %s (%s)", name, kind)


def main() -> None:
    """Run the four steps; exit non-zero with the reason on failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secrets-dir", type=Path, default=Path("/run/secrets"))
    parser.add_argument("--infra-dir", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="register: %(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    stack = os.environ.get("AUTOPILOT_STACK") or "autopilot"
    image = os.environ.get("AUTOPILOT_IMAGE") or "test-autopilot-worker:latest"
    secrets = read_secrets(args.secrets_dir)
    make_bucket(os.environ.get("AUTOPILOT_BUCKET") or "autopilot-archive", secrets)
    log.info("secret blocks: %s", ", ".join(save_secret_blocks(secrets)) or "none")
    create_pools(args.infra_dir, stack, image)
    prefect(
        "--no-prompt",
        "deploy",
        "--all",
        "--prefect-file",
        str(args.infra_dir / "prefect.yaml"),
        cwd=args.infra_dir,
    )
    log.info("deployments registered")


if __name__ == "__main__":
    main()
