"""Ruby's prepared environment: the project's bundle installed once into ``envs/ruby-<key>``,
outside any test run (the ruby-rspec toolchain's ``env_builder()``).

The key is the digest of ``Gemfile``, ``Gemfile.lock``, the gem files cached in
``vendor/cache`` and the toolchain (``RUBY_DESCRIPTION`` and Bundler's version). The build runs
``bundle install`` deployment-style: ``BUNDLE_FROZEN`` (the lock is never re-resolved nor
written), the project's checked-in ``.bundle/config`` ignored, nothing written to the project.
Gems go to the environment's own ``gems`` directory (``GEM_HOME``); the gems the machine
already has (Debian's ``ruby-*`` packages) stay usable through ``GEM_PATH``, so only what the
lock needs beyond them is installed. Offline first (installed gems and ``vendor/cache``); the
registries only when that is not enough and the network is allowed.

A sandboxed run then gets ``GEM_HOME``/``GEM_PATH``/``BUNDLE_FROZEN``/
``BUNDLE_APP_CONFIG`` and sees the environment directory read-only.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from tasks.envs.classify import classify
from tasks.envs.needs import RunNeeds
from tasks.envs.settings import EnvSettings
from tasks.envs.space import InstallSpace
from tasks.envs.store import BuildFailed, EnvRecord
from tasks.toolchains.ruby.bundle_errors import bundler_rules

_PROBE = 'print RUBY_DESCRIPTION, " bundler ", (require "bundler"; Bundler::VERSION)'
#: Prints the system's gem directories (one a line) with a throwaway HOME.
_GEM_PATH = "puts Gem.path"
#: Output of an offline install that only lacks gems a registry may have.
_NEEDS_REMOTE = re.compile(r"^Could not find .*(?:locally|sources|cached gems)", re.MULTILINE)
#: Variables that would steer Ruby or Bundler to another installation.
TOOL_VARS = (
    "GEM_HOME",
    "GEM_PATH",
    "RUBYOPT",
    "RUBYLIB",
    "BUNDLE_GEMFILE",
    "BUNDLE_PATH",
    "BUNDLE_APP_CONFIG",
    "BUNDLE_FROZEN",
    "BUNDLE_DEPLOYMENT",
    "BUNDLE_WITHOUT",
)


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


class BundleBuilder:
    """The ruby-rspec toolchain's :class:`tasks.envs.builder.EnvBuilder`."""

    stack = "ruby"
    #: The installer a failed build names (a suite problem's tool).
    tool = "bundler"

    def lock_inputs(self, project: Path) -> list[Path]:
        """Gemfile, Gemfile.lock and vendor/cache's gems; empty without a Gemfile.lock."""
        if not (project / "Gemfile.lock").is_file() or not (project / "Gemfile").is_file():
            return []
        cached = sorted((project / "vendor" / "cache").glob("*.gem"))
        return [project / "Gemfile", project / "Gemfile.lock", *cached]

    def toolchain_id(self) -> str:
        return toolchain_id()

    def key_values(self, project: Path) -> dict[str, str]:
        return {}

    def install_programs(self) -> list[str]:
        return []  # Ruby and Bundler are the system's, which every sandbox shows

    def build(
        self,
        space: InstallSpace,
        *,
        toolchain: str,
        inputs: dict[str, str],
        network: bool,
        timeout_s: float,
    ) -> EnvRecord:
        """Install the bundle of the project into ``space.out`` (to live at ``space.final``),
        in the install sandbox (:mod:`tasks.envs.space`).

        Raises:
            BuildFailed: the bundle cannot be installed (one line: missing native library,
                unknown gem, no registry access, an out-of-date lock, a Ruby the lock refuses).
        """
        started = time.monotonic()
        gem_path = system_gem_path()
        env = _install_env(space, gem_path, bundler_version(toolchain))
        commands, network_used = _install(space, env, network, timeout_s)
        return EnvRecord(
            name=space.final.name,
            stack=self.stack,
            key=space.final.name.split("-", 1)[1],
            created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            inputs=inputs,
            toolchain=toolchain,
            commands=commands,
            network_used=network_used,
            build_s=round(time.monotonic() - started, 3),
            extra={"gem_path": gem_path, "bundler": [bundler_version(toolchain)]},
        )

    def run_env(self, path: Path, record: EnvRecord) -> dict[str, str]:
        home = str(path / "gems")
        bundler = next(iter(record.extra.get("bundler") or []), None)
        return {
            "GEM_HOME": home,
            "GEM_PATH": ":".join([home, *record.extra.get("gem_path", [])]),
            # No BUNDLE_GEMFILE: Bundler finds the Gemfile from the run's directory, which is
            # the worktree or a file job's copy of it (an absolute path would name only one).
            **({"BUNDLER_VERSION": bundler} if bundler else {}),
            # The lock is the truth: Bundler may neither re-resolve nor write it.
            "BUNDLE_FROZEN": "true",
            # A checked-in .bundle/config (BUNDLE_PATH: vendor/bundle) must not win.
            "BUNDLE_APP_CONFIG": str(path / "bundle-config"),
        }

    def interpreter(self, path: Path) -> str | None:
        return None

    def user_needs(self, project: Path, settings: EnvSettings) -> RunNeeds | None:
        """The user's own bundle (``bundle_path``, relative to `project`) and interpreter
        (``ruby``, whose ``bin`` directory goes first on PATH), or None."""
        dirs: list[str] = []
        env: dict[str, str] = {}
        if settings.bundle_path:
            where = os.path.join(project, os.path.expanduser(settings.bundle_path))
            bundle = os.path.abspath(where)
            dirs.append(bundle)
            env |= {"BUNDLE_PATH": bundle, "BUNDLE_FROZEN": "true"}
        if settings.ruby:
            ruby = os.path.abspath(os.path.expanduser(settings.ruby))
            dirs.append(os.path.dirname(os.path.dirname(ruby)))
            env["PATH"] = f"{os.path.dirname(ruby)}:/usr/local/bin:/usr/bin:/bin"
        return RunNeeds(dirs=tuple(dirs), env=env) if dirs else None


def _install_env(space: InstallSpace, gem_path: list[str], bundler: str) -> dict[str, str]:
    (space.tmp / "gems").mkdir()
    (space.tmp / "bundle-config").mkdir()
    gems = space.path("gems")
    return {
        "GEM_HOME": gems,
        "GEM_PATH": ":".join([gems, *gem_path]),
        "BUNDLE_GEMFILE": str(space.src / "Gemfile"),
        "BUNDLE_FROZEN": "true",
        "BUNDLE_APP_CONFIG": space.path("bundle-config"),
        # Never switch to the Bundler version the lock was made with (that installs one,
        # from a registry): the machine's Bundler, the one the key names, does the work.
        "BUNDLER_VERSION": bundler,
        "BUNDLE_SILENCE_ROOT_WARNING": "true",
        "BUNDLE_DISABLE_VERSION_CHECK": "true",
    }


def _install(
    space: InstallSpace, env: dict[str, str], network: bool, timeout_s: float
) -> tuple[list[str], bool]:
    """Offline first, then (when allowed and needed) from the registries: the commands run
    and whether the network was used. Raises BuildFailed with the cause."""
    deadline = time.monotonic() + timeout_s
    step = space.run(
        ["bundle", "install", "--local"],
        env=env,
        timeout_s=timeout_s,
        network=False,
        drop=TOOL_VARS,
    )
    commands = ["bundle install --local"]
    remote = not step.ok and network and bool(_NEEDS_REMOTE.search(step.output))
    if remote:
        # Bundler 2.3 never fetches while frozen; the offline step has shown the lock matches
        # the Gemfile (a rewritten lock stays in the install's own copy of the project).
        step = space.run(
            ["bundle", "install", "--jobs", "4", "--retry", "2"],
            env={k: v for k, v in env.items() if k != "BUNDLE_FROZEN"},
            timeout_s=max(1.0, deadline - time.monotonic()),
            network=True,
            drop=TOOL_VARS,
        )
        commands.append("bundle install")
    if not step.ok:
        raise BuildFailed(*classify(step, bundler_rules, network=network))
    return commands, remote
