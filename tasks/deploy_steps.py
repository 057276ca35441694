"""Pull steps of infra/prefect.yaml: what a worker does before each deployed flow run.

- :func:`load_secrets` puts credentials kept in Prefect Secret blocks into the run's
  environment (the model key, the archive's AWS keys), so they live in neither the image, the
  deployment nor the work pool.
- :func:`sync_repository` clones the configured git URL on first use and fetches it on every
  later run, into a directory under ``AUTOPILOT_HOME`` (a named volume in compose), and moves
  the clone's HEAD to the remote's default branch. The clone is Autopilot's own: flows work in
  worktrees of it and put their branches there (and push them when asked).

A step returns a dict (its outputs, which later steps may use); it never returns a secret.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path

from tasks.core.errors import ConfigError

logger = logging.getLogger(__name__)

GIT_TIMEOUT_S = 600
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def load_secrets(secrets: dict[str, str]) -> dict[str, str]:
    """Set each environment variable from the Prefect Secret block of the given name.

    A variable that already has a non-empty value is left alone; a block that does not exist
    (or is empty) leaves the variable unset, with a warning naming the block.

    Args:
        secrets: environment variable name -> Secret block name,
            e.g. ``{"MISTRAL_API_KEY": "mistral-api-key"}``.

    Returns:
        ``{"loaded": "NAME,NAME"}``: the variables that were set (names only).
    """
    from prefect.blocks.system import Secret

    loaded = []
    for name, block in secrets.items():
        if not _ENV_NAME.fullmatch(name):
            raise ConfigError(f"load_secrets: {name!r} is not an environment variable name")
        if os.environ.get(name):
            continue
        try:
            value = Secret.load(block).get()  # type: ignore[union-attr]
        except ValueError:  # Prefect's answer for a block that does not exist
            logger.warning("secret block %r not found: %s stays unset", block, name)
            continue
        if isinstance(value, str) and value:
            os.environ[name] = value
            loaded.append(name)
        else:
            logger.warning("secret block %r is empty or not a string: %s stays unset", block, name)
    return {"loaded": ",".join(loaded)}


def _git(args: list[str], cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(f"git {args[0]} took longer than {GIT_TIMEOUT_S}s") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        reason = _redacted(lines[-1]) if lines else f"exit {done.returncode}"
        raise ConfigError(f"git {args[0]} failed: {reason}")
    return done.stdout.strip()


def _redacted(url: str) -> str:
    """The URL without a password or token (for logs and errors)."""
    return re.sub(r"//[^/@]*@", "//***@", url)


def sync_repository(url: str | None = None, directory: str | None = None) -> dict[str, str]:
    """Clone `url` into `directory`, or fetch it when the clone exists; HEAD follows the
    remote's default branch.

    Args:
        url: the repository's git URL (``AUTOPILOT_REPO_URL`` in infra/prefect.yaml).
        directory: where the clone lives (under ``AUTOPILOT_HOME``, a persistent volume).

    Returns:
        ``{"directory": ..., "commit": ...}``: the clone and the commit HEAD points at.

    Raises:
        ConfigError: no URL or directory, the directory holds something else, or git failed.
    """
    if not url:
        raise ConfigError("no repository URL: set AUTOPILOT_REPO_URL for the worker")
    if not directory:
        raise ConfigError("sync_repository: no directory given")
    path = Path(directory)
    if (path / ".git").is_dir():
        if _git(["remote", "get-url", "origin"], cwd=path) != url:
            _git(["remote", "set-url", "origin", url], cwd=path)
        logger.info("fetching %s into %s", _redacted(url), path)
        _git(["fetch", "--prune", "--tags", "--force", "origin"], cwd=path)
        _git(["remote", "set-head", "origin", "--auto"], cwd=path)
    elif path.exists() and any(path.iterdir()):
        raise ConfigError(f"{path}: exists and is not a git clone; empty it or choose another")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        logger.info("cloning %s into %s", _redacted(url), path)
        _git(["clone", "--quiet", "--no-checkout", url, str(path)])
    # The clone is ours alone: its HEAD (the flows' default ref) follows the remote.
    _git(["checkout", "--quiet", "--detach", "refs/remotes/origin/HEAD"], cwd=path)
    return {"directory": str(path), "commit": _git(["rev-parse", "HEAD"], cwd=path)}
