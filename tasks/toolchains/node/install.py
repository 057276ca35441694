"""Install the node-jest toolchain's tools for an installed Autopilot (a wheel has no checkout
for ``make setup`` to install into): the ``package.json``, ``package-lock.json`` and default
ESLint configuration shipped as resources are copied to ``$AUTOPILOT_HOME/toolchains/node`` and
``npm ci --ignore-scripts`` installs the locked versions there, once per lock (a stamp file
names the lock's digest). Run it with ``python -m tasks.toolchains.node.install [HOME]``; the
worker image does so at build time. Never run during a test run (no network in the sandbox).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import subprocess
import sys
from pathlib import Path

from tasks.core.resources import resource_path
from tasks.toolchains.base import ToolchainError
from tasks.toolchains.node.tools import home_tools_dir

log = logging.getLogger(__name__)

#: The files that define the install, shipped with Autopilot (``toolchains/node/``).
FILES = ("package.json", "package-lock.json", "eslint.config.mjs")
STAMP = ".autopilot-lock"


def install_tools(target: Path, npm: str | None = None) -> bool:
    """Install the locked tools into `target`; False when they were already there.

    Raises:
        ToolchainError: npm is missing or ``npm ci`` failed (its last output lines).
    """
    target.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(resource_path(f"toolchains/node/{name}"), target / name)
    digest = hashlib.sha256((target / "package-lock.json").read_bytes()).hexdigest()
    stamp = target / "node_modules" / STAMP
    if stamp.is_file() and stamp.read_text().strip() == digest:
        return False
    npm = npm or shutil.which("npm")
    if npm is None:
        raise ToolchainError("npm is not installed: install Debian's nodejs and npm packages")
    argv = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    done = subprocess.run(argv, cwd=target, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ToolchainError(f"npm ci in {target} failed (exit {done.returncode}): {tail}")
    stamp.write_text(digest + "\n")
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m tasks.toolchains.node.install [HOME]``: 0 installed or current, 1 failed."""
    args = sys.argv[1:] if argv is None else argv
    target = home_tools_dir(Path(args[0]).expanduser() if args else None)
    try:
        fresh = install_tools(target)
    except ToolchainError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 1
    print(f"node tools {'installed' if fresh else 'up to date'} in {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
