"""Interpreters for a project's tests: an isolated one when the project names none.

A project without an environment of its own runs with Autopilot's Python, but never with
Autopilot's site-packages: a project that imports ``rich`` or ``typer`` (or is called that) must
not be satisfied by the copies Autopilot depends on. :func:`isolated_python` builds, once per
version of the tools, a virtual environment holding nothing but pytest, coverage and what they
need: the project's code and a minimal test set only. Its files are hard links to Autopilot's
installed ones (copies across file systems), never symbolic links: the environment is
self-contained, so a sandbox that shows only the environment's own directory and its base
interpreter (bwrap deny-by-default, a docker mount of the interpreter's prefix) runs it.

:func:`linked_environment` is the same construction for any set of distributions (the tests
build project virtualenvs with pytest-cov or pytest-benchmark from it, offline).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import sys
import tempfile
import venv
from functools import cache
from importlib import metadata
from pathlib import Path

from tasks.toolchains.base import ToolchainError

log = logging.getLogger(__name__)

#: What the isolated interpreter can import besides the standard library.
RUNNER_DISTRIBUTIONS = ("pytest", "coverage")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_closure(names: tuple[str, ...] | list[str]) -> list[metadata.Distribution]:
    """The installed distributions `names` need, their requirements included (markers
    evaluated for this interpreter, extras left out).

    Raises:
        ToolchainError: one of them is not installed here.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    found: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = _normalise(todo.pop())
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ToolchainError(f"{name} is not installed in {sys.prefix}") from None
        found[name] = dist
        for text in dist.requires or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [found[n] for n in sorted(found)]


def _top_level(dist: metadata.Distribution) -> set[Path]:
    """The paths `dist` installed directly into its site directory (packages, modules, its
    .dist-info), resolved there."""
    base = Path(str(dist.locate_file("")))
    tops: set[Path] = set()
    for file in dist.files or []:
        parts = Path(str(file)).parts
        if not parts or parts[0] in ("..", "bin") or parts[0].startswith("__pycache__"):
            continue
        if parts[0].endswith(".pth"):
            continue
        tops.add(base / parts[0])
    return {p for p in tops if p.exists()}


def _fingerprint(dists: list[metadata.Distribution]) -> str:
    digest = hashlib.sha256(f"{sys.version}\0{sys.base_prefix}\0{sys.prefix}".encode())
    for dist in dists:
        digest.update(f"\0{dist.metadata['Name']}=={dist.version}".encode())
    return digest.hexdigest()[:16]


@cache
def _env_name(distributions: tuple[str, ...]) -> str:
    """The environment's directory name: the distributions and the digest of their closure's
    versions. Kept for the process (every sandboxed run asks; reading the installed
    distributions' metadata again each time cost more than the run's own set-up)."""
    dists = distribution_closure(distributions)
    return f"{'-'.join(_normalise(d) for d in distributions)}-{_fingerprint(dists)}"


def _link_or_copy(source: str, dest: str) -> None:
    try:
        os.link(source, dest)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(source, dest)


def _materialise(top: Path, dest: Path) -> None:
    """`top` (a package directory or a module file) as real files at `dest`."""
    if dest.exists():
        return
    if top.is_dir():
        shutil.copytree(
            top,
            dest,
            copy_function=_link_or_copy,
            ignore=shutil.ignore_patterns("__pycache__"),
            symlinks=False,
        )
    else:
        _link_or_copy(str(top), str(dest))


def _site_packages(env: Path) -> Path:
    return env / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def linked_environment(where: Path, distributions: tuple[str, ...] | list[str]) -> Path:
    """A virtual environment under `where` that holds `distributions` (and their
    requirements), hard-linked from this interpreter's installation; returns its
    ``bin/python``.

    Built once per set of versions (the directory's name is their digest); concurrent callers
    build in private directories and the first rename wins.

    Raises:
        ToolchainError: a distribution is not installed here, or the directory is not writable.
    """
    env = where / _env_name(tuple(distributions))
    python = env / "bin" / "python"
    if python.exists():
        return python
    dists = distribution_closure(tuple(distributions))
    try:
        where.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=where))
        try:
            venv.EnvBuilder(symlinks=True, with_pip=False, clear=True).create(tmp)
            site = _site_packages(tmp)
            for dist in dists:
                for top in _top_level(dist):
                    _materialise(top, site / top.name)
            os.rename(tmp, env)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not python.exists():
                raise
    except OSError as exc:
        raise ToolchainError(
            f"cannot build the test environment in {where}: {exc.strerror or exc}"
        ) from None
    log.info("built the test environment %s (%s)", env, ", ".join(distributions))
    return python


def isolated_python(home: Path) -> Path:
    """Autopilot's interpreter with only pytest and coverage: ``<home>/envs/pytest-...``."""
    return linked_environment(home / "envs", RUNNER_DISTRIBUTIONS)
