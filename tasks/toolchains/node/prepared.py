"""The node-jest toolchain's prepared environment (its ``env_builder()``): the project's
``node_modules`` installed once per lock with ``npm ci`` into ``envs/node-<key>``.

What it is built from: ``package.json`` with ``npm-shrinkwrap.json`` (npm's own precedence) or
``package-lock.json``, and the project's ``.npmrc`` when it has one (its registry and install
options are the project's). The key is their digest and the toolchain: Node's version, platform,
architecture and module ABI, and npm's version (packages ship prebuilt binaries per platform).

The build copies those files into the environment and runs ``npm ci --ignore-scripts
--no-audit --no-fund --include=dev`` with the environment as npm's prefix (its project root),
in the install sandbox (:mod:`tasks.envs.space`: only the environment writable, the registries
only through the egress proxy, a private HOME and npm cache). ``--ignore-scripts``: install
scripts (``preinstall``, ``install``, ``postinstall``, the implicit ``node-gyp rebuild`` of a
package with a ``binding.gyp``) are code of the packages and the repository; none runs. A
package that needs one to work (a native addon compiled at install time, a binary downloaded
by a postinstall script) fails in the tests that load it; such a project names its own install
with the ``node_modules`` setting. Packages that ship their binaries as per-platform optional
dependencies (esbuild, swc) need no script.

Not prepared (nothing to build; the checkout's node_modules or Autopilot's tools serve): a
project without an npm lock (yarn and pnpm locks are not read), npm workspaces (their packages'
links point into the tree), and a tree that holds a ``node_modules`` of its own.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from tasks.envs.classify import classify
from tasks.envs.needs import RunNeeds
from tasks.envs.settings import EnvSettings
from tasks.envs.space import InstallSpace
from tasks.envs.store import BuildFailed, EnvRecord
from tasks.toolchains.node.install_errors import npm_rules

log = logging.getLogger(__name__)

#: npm's lock files, in npm's own precedence (a shrinkwrap wins over a package lock).
LOCKS = ("npm-shrinkwrap.json", "package-lock.json")
#: The install, as the project's CI would run it, less every script.
NPM_CI = ("ci", "--ignore-scripts", "--no-audit", "--no-fund", "--include=dev")
#: Variables that would point npm at another installation or drop what the tests need.
TOOL_VARS = (
    "NODE_ENV",
    "NODE_OPTIONS",
    "NODE_PATH",
    "npm_config_omit",
    "npm_config_production",
    "npm_config_only",
    "npm_config_prefix",
    "npm_config_global",
    "npm_config_userconfig",
    "npm_config_globalconfig",
    "npm_config_cache",
    "npm_config_ignore_scripts",
)
_PROBE = (
    "console.log([process.version, process.platform + '-' + process.arch,"
    " 'abi ' + process.versions.modules].join(' '))"
)


def lock_inputs(project: Path) -> list[Path]:
    """``package.json``, the lock and ``.npmrc``; empty when there is nothing to prepare."""
    package = project / "package.json"
    lock = next((project / n for n in LOCKS if (project / n).is_file()), None)
    if lock is None or not package.is_file():
        return []
    own = project / "node_modules"
    if own.is_dir() and not own.is_symlink():
        return []  # the tree's own node_modules wins
    if _workspaces(package):
        log.info("%s: npm workspaces are not prepared (their links point into the tree)", project)
        return []
    npmrc = project / ".npmrc"
    return [package, lock, *([npmrc] if npmrc.is_file() else [])]


def _workspaces(package: Path) -> bool:
    try:
        data = json.loads(package.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and bool(data.get("workspaces"))


def npm_command() -> list[str]:
    """How npm is started: Node (absolute, so the sandbox shows its installation) and npm's
    own script, not the ``#!/usr/bin/env node`` launcher (the sandbox's PATH may lack a node
    installed elsewhere).

    Raises:
        BuildFailed: node or npm is not installed (cause ``tool_missing``).
    """
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing = "node" if node is None else "npm"
        raise BuildFailed("tool_missing", f"{missing} is not installed (run `make setup`)")
    script = os.path.realpath(npm)
    return [os.path.realpath(node), script] if script.endswith(".js") else [script]


@functools.cache
def toolchain_id() -> str:
    """Node's version, platform and ABI, and npm's version (asked once per process).

    Raises:
        BuildFailed: node or npm cannot run (cause ``tool_missing``).
    """
    npm = npm_command()
    node = npm[0] if len(npm) > 1 else "node"
    parts = []
    for argv in ([node, "-e", _PROBE], [*npm, "--version"]):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BuildFailed("tool_missing", f"{argv[0]}: cannot run ({exc})") from None
        if done.returncode != 0:
            raise BuildFailed("tool_missing", f"{argv[0]}: {done.stderr.strip()[:200]}")
        parts.append(done.stdout.strip())
    return f"node {parts[0]} npm {parts[1]}"


def build(
    space: InstallSpace, *, toolchain: str, inputs: dict[str, str], network: bool, timeout_s: float
) -> EnvRecord:
    """Copy the inputs into ``space.tmp`` and run ``npm ci`` there, in the install sandbox.

    Raises:
        BuildFailed: one line naming the cause (unknown package, no registry access, a lock out
            of sync with package.json, an engine or platform the lock refuses).
    """
    started = time.monotonic()
    for name in inputs:
        shutil.copy2(space.project / name, space.tmp / name)
    cache = space.scratch / "cache" / "npm"
    env = {
        "npm_config_cache": str(cache),
        "npm_config_userconfig": str(space.scratch / "home" / ".npmrc"),
        "npm_config_update_notifier": "false",
        "npm_config_progress": "false",
        "npm_config_loglevel": "warn",
    }
    # npm's project root is its prefix: the environment, as the install sees it (the step
    # itself runs in the project's copy, the sandbox's root).
    args = [*NPM_CI, "--prefix", space.path(), *([] if network else ["--offline"])]
    done = space.run(
        [*npm_command(), *args], env=env, timeout_s=timeout_s, network=network, drop=TOOL_VARS
    )
    if not done.ok:
        raise BuildFailed(*classify(done, npm_rules, network=network))
    return EnvRecord(
        name=space.final.name,
        stack=NodeEnvBuilder.stack,
        key=space.final.name.split("-", 1)[1],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        inputs=inputs,
        toolchain=toolchain,
        commands=[" ".join(["npm", *args])],
        network_used=network,
        build_s=round(time.monotonic() - started, 3),
    )


class NodeEnvBuilder:
    """The node-jest toolchain's :class:`tasks.envs.builder.EnvBuilder`."""

    stack = "node"
    #: The installer a failed build names (a suite problem's tool).
    tool = "npm"

    def lock_inputs(self, project: Path) -> list[Path]:
        return lock_inputs(project)

    def toolchain_id(self) -> str:
        return toolchain_id()

    def key_values(self, project: Path) -> dict[str, str]:
        return {}  # the lock names every package; nothing is computed at build time

    def install_programs(self) -> list[str]:
        return npm_command()  # their installations (none to add for the system's)

    def build(
        self,
        space: InstallSpace,
        *,
        toolchain: str,
        inputs: dict[str, str],
        network: bool,
        timeout_s: float,
    ) -> EnvRecord:
        return build(
            space, toolchain=toolchain, inputs=inputs, network=network, timeout_s=timeout_s
        )

    def run_env(self, path: Path, record: EnvRecord) -> dict[str, str]:
        # The toolchain links <path>/node_modules into the run's tree (see .modules).
        return {}

    def interpreter(self, path: Path) -> str | None:
        return None

    def user_needs(self, project: Path, settings: EnvSettings) -> RunNeeds | None:
        # The user's own install is the node_modules setting, which the toolchain reads.
        return None
