"""Ruby: the project's bundle installed once into ``envs/ruby-<key>``, outside any test run.

The key is the digest of ``Gemfile``, ``Gemfile.lock``, the gem files cached in
``vendor/cache`` and the toolchain (``RUBY_DESCRIPTION`` and Bundler's version). The build runs
``bundle install`` deployment-style: ``BUNDLE_FROZEN`` (the lock is never re-resolved nor
written), the project's checked-in ``.bundle/config`` ignored, nothing written to the project.
Gems go to the environment's own ``gems`` directory (``GEM_HOME``); the gems the machine
already has (Debian's ``ruby-*`` packages) stay usable through ``GEM_PATH``, so only what the
lock needs beyond them is installed. Offline first (installed gems and ``vendor/cache``); the
registries only when that is not enough and the network is allowed.

A sandboxed run then gets ``GEM_HOME``/``GEM_PATH``/``BUNDLE_GEMFILE``/``BUNDLE_FROZEN``/
``BUNDLE_APP_CONFIG`` and sees the environment directory read-only
(:meth:`tasks.envs.types.PreparedEnv.needs`).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tasks.envs.classify import classify
from tasks.envs.install import install_env, run_step
from tasks.envs.store import BuildFailed, EnvRecord

LOCK_FILES = ("Gemfile", "Gemfile.lock")
_PROBE = 'print RUBY_DESCRIPTION, " bundler ", (require "bundler"; Bundler::VERSION)'
#: Prints the system's gem directories (one a line) with a throwaway HOME.
_GEM_PATH = "puts Gem.path"
#: Output of an offline install that only lacks gems a registry may have.
_NEEDS_REMOTE = re.compile(r"^Could not find .*(?:locally|sources|cached gems)", re.MULTILINE)


def lock_inputs(project: Path) -> list[Path]:
    """The files the environment is built from; empty when the project has no Gemfile.lock."""
    if not (project / "Gemfile.lock").is_file() or not (project / "Gemfile").is_file():
        return []
    cached = sorted((project / "vendor" / "cache").glob("*.gem"))
    return [project / "Gemfile", project / "Gemfile.lock", *cached]


@functools.cache
def toolchain_id(ruby: str = "ruby") -> str:
    """``RUBY_DESCRIPTION`` and Bundler's version of the `ruby` on PATH (asked once per
    process).

    Raises:
        BuildFailed: Ruby or Bundler is not installed (cause ``tool_missing``).
    """
    try:
        done = subprocess.run(
            [ruby, "-e", _PROBE], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildFailed("tool_missing", f"{ruby}: cannot run ({exc})") from None
    if done.returncode != 0:
        raise BuildFailed("tool_missing", f"{ruby} with bundler: {done.stderr.strip()[:200]}")
    return done.stdout.strip()


def bundler_version(toolchain: str) -> str:
    """The Bundler version named at the end of :func:`toolchain_id`'s answer."""
    return toolchain.rsplit(" bundler ", 1)[-1].strip()


def system_gem_path(ruby: str = "ruby") -> list[str]:
    """The machine's gem directories (Debian's included), without any user's own."""
    with tempfile.TemporaryDirectory(prefix="autopilot-gempath-") as home:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home}
        try:
            done = subprocess.run(
                [ruby, "-e", _GEM_PATH], env=env, capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired):
            return []
        paths = [p for p in done.stdout.splitlines() if p and not p.startswith(home)]
    return [p for p in dict.fromkeys(paths) if os.path.isdir(p)]


def digest_inputs(project: Path, files: list[Path]) -> dict[str, str]:
    """Repository-relative lock file -> its sha256."""
    return {
        f.relative_to(project).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest() for f in files
    }


# size: DEBT to split (issue 14/18 wiring)
def build(
    project: Path,
    tmp: Path,
    final: Path,
    log_path: Path,
    *,
    toolchain: str,
    inputs: dict[str, str],
    gem_path: list[str],
    network: bool,
    timeout_s: float,
) -> EnvRecord:
    """Install the bundle of `project` into `tmp` (to live at `final`); the record on success.

    Raises:
        BuildFailed: the bundle cannot be installed (one line: missing native library, unknown
            gem, no registry access, an out-of-date lock, a Ruby version the lock refuses).
    """
    gems = tmp / "gems"
    gems.mkdir()
    (tmp / "bundle-config").mkdir()
    scratch = Path(tempfile.mkdtemp(prefix="autopilot-bundle-home-"))
    env = install_env(
        {
            "HOME": str(scratch),
            "GEM_HOME": str(gems),
            "GEM_PATH": ":".join([str(gems), *gem_path]),
            "BUNDLE_GEMFILE": str(project / "Gemfile"),
            "BUNDLE_FROZEN": "true",
            "BUNDLE_APP_CONFIG": str(tmp / "bundle-config"),
            # Never switch to the Bundler version the lock was made with (that installs one,
            # from a registry): the machine's Bundler, the one the key names, does the work.
            "BUNDLER_VERSION": bundler_version(toolchain),
            "BUNDLE_SILENCE_ROOT_WARNING": "true",
            "BUNDLE_DISABLE_VERSION_CHECK": "true",
        }
    )
    started = time.monotonic()
    commands: list[str] = []
    network_used = False
    deadline = started + timeout_s
    try:
        step = run_step(
            ["bundle", "install", "--local"],
            cwd=project,
            env=env,
            timeout_s=timeout_s,
            log_path=log_path,
            network=False,
        )
        commands.append("bundle install --local")
        if not step.ok and network and _NEEDS_REMOTE.search(step.output):
            # Bundler 2.3 never fetches while frozen; the offline step has shown the lock
            # matches the Gemfile, and the lock's bytes are put back should Bundler rewrite it.
            network_used = True
            lock = project / "Gemfile.lock"
            before = lock.read_bytes()
            try:
                step = run_step(
                    ["bundle", "install", "--jobs", "4", "--retry", "2"],
                    cwd=project,
                    env={k: v for k, v in env.items() if k != "BUNDLE_FROZEN"},
                    timeout_s=max(1.0, deadline - time.monotonic()),
                    log_path=log_path,
                    network=True,
                )
            finally:
                if lock.read_bytes() != before:
                    lock.write_bytes(before)
            commands.append("bundle install")
        if not step.ok:
            raise BuildFailed(*classify(step, "ruby", network=network))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return EnvRecord(
        name=final.name,
        stack="ruby",
        key=final.name.split("-", 1)[1],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        inputs=inputs,
        toolchain=toolchain,
        commands=commands,
        network_used=network_used,
        build_s=round(time.monotonic() - started, 3),
        extra={"gem_path": gem_path, "bundler": [bundler_version(toolchain)]},
    )
