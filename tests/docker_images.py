"""Test helper: the Docker engine and infra/'s images, built offline and cached by content.

The base image comes from infra/base-image.sh (debootstrap from the machine's Debian mirror,
cached by the snapshot date). Every other image is tagged with a hash of what it is built from
(its Dockerfile, the files of the build context the .dockerignore allow-list lets through, the
base image's id, the build arguments), so a second run on the same machine builds nothing and a
change to any of those files builds again. Older hash tags of the same image are removed after a
new build. Tests that need the engine call :func:`require_engine`: without one they fail with
the reason, or skip when ALLOW_MISSING_TOOLS=1, like the other tools.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import shutil
import subprocess

import pytest

from tests.conftest import REPO_ROOT

INFRA = REPO_ROOT / "infra"
#: Images the tests build: name -> Dockerfile (relative to the repository).
DOCKERFILES = {
    "test-autopilot-worker": "infra/Dockerfile",
    "test-autopilot-postgres": "infra/postgres.Dockerfile",
    "test-autopilot-s3": "infra/s3-local.Dockerfile",
}


def docker_cli() -> str | None:
    """The docker client, if installed."""
    return shutil.which("docker")


@functools.cache
def engine_problem() -> str | None:
    """None when a Docker engine answers, else why not, in one line."""
    if docker_cli() is None:
        return "docker not installed (run `make setup`)"
    done = subprocess.run(
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        lines = (done.stderr or done.stdout).strip().splitlines()
        detail = lines[-1] if lines else "no answer"
        return f"docker engine not running ({detail}); scripts/docker-engine.sh starts one"
    return None


def require_engine() -> None:
    """Fail (or skip with ALLOW_MISSING_TOOLS=1) when no engine answers."""
    problem = engine_problem()
    if problem is None:
        return
    if os.environ.get("ALLOW_MISSING_TOOLS") == "1":
        pytest.skip(problem)
    pytest.fail(f"{problem} (ALLOW_MISSING_TOOLS=1 to skip)", pytrace=False)


def docker(
    *args: str, timeout: float = 1800, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the docker CLI; raises with its output when `check` and it fails."""
    # DOCKER_BUILDKIT=0: the engine's own builder, so no buildx plugin is needed.
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    done = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args[:3])}...: {done.stderr[-3000:]}")
    return done


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def image_id(tag: str) -> str:
    return docker("image", "inspect", "--format", "{{.Id}}", tag).stdout.strip()


@functools.cache
def base_image() -> str:
    """The offline base image's tag (infra/base-image.sh; cached by the Debian snapshot date)."""
    done = subprocess.run(
        ["bash", str(INFRA / "base-image.sh")], capture_output=True, text=True, timeout=1200
    )
    if done.returncode != 0:
        raise AssertionError(f"infra/base-image.sh failed: {done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def _allowed(rel: str, patterns: list[tuple[bool, str]]) -> bool:
    """Whether .dockerignore lets `rel` into the context (last matching pattern wins)."""
    keep = True
    parts = rel.split("/")
    for negate, pattern in patterns:
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatch(p, pattern) for p in prefixes) or (
            pattern.startswith("**/") and any(fnmatch.fnmatch(p, pattern[3:]) for p in parts)
        ):
            keep = negate
    return keep


def context_files() -> list[str]:
    """The files of the build context (the repository root) after the .dockerignore."""
    patterns = []
    for line in (REPO_ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            patterns.append((line.startswith("!"), line.lstrip("!")))
    files = []
    for path in sorted(REPO_ROOT.rglob("*")):
        rel = path.relative_to(REPO_ROOT).as_posix()
        if rel.startswith((".git/", ".venv/")) or not path.is_file():
            continue
        if _allowed(rel, patterns):
            files.append(rel)
    return files


def content_hash(dockerfile: str, base_id: str) -> str:
    """sha256 of everything the image is built from."""
    digest = hashlib.sha256(f"{dockerfile}\0{base_id}\0".encode())
    for rel in [dockerfile, ".dockerignore", *context_files()]:
        data = (REPO_ROOT / rel).read_bytes()
        digest.update(f"{rel}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()[:16]


@functools.cache
def built_image(name: str) -> str:
    """`name` built from its Dockerfile on the offline base, reused while its inputs are the
    same; returns the hash tag."""
    dockerfile = DOCKERFILES[name]
    base = base_image()
    tag = f"{name}:ctx-{content_hash(dockerfile, image_id(base))}"
    if image_exists(tag):
        return tag
    docker(
        "build",
        "--force-rm",  # no container of a failed step is left behind
        "--build-arg",
        f"BASE={base}",
        "-f",
        str(REPO_ROOT / dockerfile),
        "-t",
        tag,
        str(REPO_ROOT),
        timeout=2400,
    )
    # Older builds of the same image are only disk space now (their layers stay cached);
    # KEEP_OLD_IMAGES=1 keeps them (two checkouts testing at once on one engine).
    if os.environ.get("KEEP_OLD_IMAGES") == "1":
        return tag
    tags = docker("image", "ls", name, "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    for old in tags:
        if old != tag and old.startswith(f"{name}:ctx-"):
            docker("image", "rm", old, check=False)
    return tag
