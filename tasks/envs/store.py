"""Where prepared environments live: ``$AUTOPILOT_HOME/envs/<stack>-<key>``, built once.

- **Atomic.** A build happens in a private ``.build-*`` directory beside the final one and is
  renamed into place only when complete (the record file written last), so a reader never
  sees half an environment; a crashed build leaves only a ``.build-*`` directory that
  :func:`prune_envs` removes.
- **One builder at a time.** Builders of the same environment take an exclusive lock
  (``.locks/<name>.lock``): the second waits, then finds the environment built and reuses it.
  Should two builders still race (a lock on a file system without ``flock``), the first rename
  wins and the loser's directory is discarded.
- **Reused read-only.** The sandbox binds the directory read-only; each reuse touches a
  ``last-used`` stamp that pruning reads.
- **Pruned** by age of last use and by count, never the environments named in `protect`,
  never one being built, and never a directory that is not one of ours (the isolated pytest
  environment of the python-pytest toolchain lives here too).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tasks.envs.types import Cause

log = logging.getLogger(__name__)

#: Inside every environment: Autopilot's record, build log and last-use stamp.
META_DIR = ".autopilot"
RECORD = "env.json"
BUILD_LOG = "build.log"
LAST_USED = "last-used"
_NAME = re.compile(r"^(?P<stack>[a-z]+)-(?P<key>[0-9a-f]{16,64})$")


class EnvRecord(BaseModel):
    """What an environment was built from, written last by its builder."""

    model_config = ConfigDict(extra="forbid")

    name: str
    stack: str
    key: str
    created_at: str
    inputs: dict[str, str] = Field(default_factory=dict, description="lock file -> sha256")
    toolchain: str = Field(description="The toolchain version the key includes")
    commands: list[str] = Field(default_factory=list, description="The install commands run")
    network_used: bool = Field(False, description="Whether a step reached the registries")
    build_s: float = 0.0
    extra: dict[str, list[str]] = Field(default_factory=dict)


class BuildFailed(Exception):
    """Raised by a build function: the environment could not be built (carries the reason)."""

    def __init__(self, cause: Cause, message: str) -> None:
        super().__init__(message)
        self.cause = cause
        self.message = message


def envs_root(home: Path) -> Path:
    """``<home>/envs``."""
    return Path(home) / "envs"


def env_name(stack: str, key: str) -> str:
    """``<stack>-<key>``."""
    return f"{stack}-{key}"


def read_record(env: Path) -> EnvRecord | None:
    """The record of a complete environment, None for anything else."""
    try:
        return EnvRecord.model_validate_json((env / META_DIR / RECORD).read_text("utf-8"))
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def build_lock(root: Path, name: str, timeout_s: float) -> Iterator[None]:
    """Hold ``<root>/.locks/<name>.lock`` exclusively (waiting at most `timeout_s`).

    Raises:
        BuildFailed: another builder held it for longer than `timeout_s` (cause ``timeout``).
    """
    locks = root / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with (locks / f"{name}.lock").open("a+") as fh:
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    raise BuildFailed(
                        "timeout", f"another build of {name} held its lock for {timeout_s:.0f} s"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def ensure_env(
    home: Path,
    name: str,
    build: Callable[[Path, Path, Path], EnvRecord],
    *,
    lock_timeout_s: float,
) -> tuple[Path, EnvRecord, bool]:
    """The environment `name`, built by `build(tmp_dir, final_dir, log_path)` unless it exists.

    Returns the final directory, its record and whether this call built it. The build function
    fills `tmp_dir` (its files may name `final_dir`, where they will live) and returns the
    record; it raises :class:`BuildFailed` when it cannot. A failed build's log is kept under
    ``envs/.logs/``.
    """
    root = envs_root(home)
    final = root / name
    record = read_record(final)
    if record is not None:
        touch_used(final)
        return final, record, False
    root.mkdir(parents=True, exist_ok=True)
    with build_lock(root, name, lock_timeout_s):
        record = read_record(final)
        if record is not None:  # built by the builder we waited for
            touch_used(final)
            return final, record, False
        if final.exists():  # not ours, or left by a crash between rename and record
            shutil.rmtree(final, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".build-{name}-", dir=root))
        meta = tmp / META_DIR
        meta.mkdir()
        log_path = meta / BUILD_LOG
        try:
            record = build(tmp, final, log_path)
            (meta / RECORD).write_text(record.model_dump_json(indent=2), encoding="utf-8")
            (meta / LAST_USED).touch()
            tmp.chmod(0o755)
            os.rename(tmp, final)
        except BuildFailed:
            _keep_failed_log(root, name, log_path)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raced = read_record(final)
            if raced is None:
                raise BuildFailed("build_failed", f"{final}: {exc.strerror or exc}") from None
            return final, raced, False
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    log.info("built environment %s in %.1f s", name, record.build_s)
    return final, record, True


def failed_log_path(home: Path, name: str) -> Path | None:
    """The newest kept log of a failed build of `name`, if any."""
    logs = sorted((envs_root(home) / ".logs").glob(f"{name}-*.log"))
    return logs[-1] if logs else None


def _keep_failed_log(root: Path, name: str, log_path: Path) -> None:
    logs = root / ".logs"
    logs.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
    with contextlib.suppress(OSError):
        shutil.copyfile(log_path, logs / f"{name}-{stamp}.log")


def touch_used(env: Path) -> None:
    """Record a use of `env` now (best effort: a read-only home only loses pruning order)."""
    with contextlib.suppress(OSError):
        (env / META_DIR / LAST_USED).touch()


def last_used(env: Path) -> float:
    """When `env` was last used (seconds since the epoch); 0 when unknown."""
    try:
        return (env / META_DIR / LAST_USED).stat().st_mtime
    except OSError:
        return 0.0


def list_envs(home: Path) -> list[tuple[Path, EnvRecord]]:
    """Every complete environment of ours, most recently used first."""
    root = envs_root(home)
    found = []
    for entry in root.iterdir() if root.is_dir() else []:
        if _NAME.match(entry.name) and (record := read_record(entry)) is not None:
            found.append((entry, record))
    return sorted(found, key=lambda item: last_used(item[0]), reverse=True)


def prune_envs(
    home: Path,
    *,
    max_age_days: float,
    keep: int,
    protect: tuple[str, ...] = (),
    now: float | None = None,
) -> list[str]:
    """Remove environments unused for `max_age_days` and all but the `keep` most recent, and
    builds that crashed more than a day ago; returns the names removed.

    An environment whose lock a builder holds is left alone, and so is every name in `protect`
    (the ones the current run uses).
    """
    root = envs_root(home)
    now = time.time() if now is None else now
    removed: list[str] = []
    for rank, (path, record) in enumerate(list_envs(home)):
        too_old = now - last_used(path) > max_age_days * 86400
        if record.name in protect or not (too_old or rank >= keep):
            continue
        try:
            with build_lock(root, record.name, timeout_s=0):
                shutil.rmtree(path)
        except (BuildFailed, OSError) as exc:
            log.warning("could not prune environment %s: %s", record.name, exc)
            continue
        removed.append(record.name)
    for stale in root.glob(".build-*") if root.is_dir() else []:
        with contextlib.suppress(OSError):
            if now - stale.stat().st_mtime > 86400:
                shutil.rmtree(stale)
                removed.append(stale.name)
    if removed:
        log.info("pruned environments: %s", ", ".join(removed))
    return removed


def json_dump(data: object) -> str:
    """Stable JSON for digests."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))
