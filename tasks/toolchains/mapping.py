"""The mapping engine: a repository's sources, their kinds and the test files that cover them,
by the rules of its toolchain (:meth:`~tasks.toolchains.base.Toolchain.file_rules`; each stack's
rules are the contract in its ``files.py``, exercised by tests/tasks/toolchains/test_mapping.py).

Ties: when one spec matches several sources, only the most specific matches keep it (an exact
name beats a directory match; a longer mirrored package path beats a shorter one; the exact
spelling beats a plural or singular one), so
``spec/models/user/profile_spec.rb`` belongs to ``app/models/user/profile.rb`` when that exists.

Files come from ``git ls-files`` (tracked plus untracked-not-ignored) in a git work tree, else a
directory walk; both skip .git/, node_modules/, virtualenvs, caches and ``__pycache__`` at any
depth, and vendor/, tmp/, log/, coverage/ at the top level.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path, PurePosixPath

from tasks.core.errors import BadInputError
from tasks.core.types import MappedFile, Mapping, SourceFile
from tasks.keep.git_safe import GitError, TamperedWorktreeError, run_git
from tasks.toolchains import registry
from tasks.toolchains.files import Score, SpecPlan
from tasks.toolchains.registry import detect_toolchain, get_toolchain

log = logging.getLogger(__name__)

#: Skipped at any depth: tooling state, never source.
_SKIP_DIRS = frozenset({".git", "node_modules"})
#: Skipped at the top level only, so that e.g. ``app/services/log/`` stays a source directory
#: (with every stack's run outputs).
_SKIP_TOP_DIRS = frozenset({"vendor"})


@cache
def skipped_dirs() -> tuple[frozenset[str], frozenset[str]]:
    """(skipped at any depth, skipped at the top level): git's and every stack's tool state
    (caches, environments; vendored JavaScript), and vendored code and the stacks' run outputs
    at the top."""
    anywhere = _SKIP_DIRS | registry.cache_dirs() | registry.env_dirs()
    return anywhere, _SKIP_TOP_DIRS | registry.output_paths()


def list_files(repo: Path) -> list[str]:
    """Every file of the repository as sorted POSIX paths relative to it, minus skipped dirs.

    In a git work tree: tracked and untracked-but-not-ignored files (``.gitignore`` respected),
    so freshly generated specs count before they are committed. Elsewhere: a directory walk.
    """
    _check_repo(repo)
    files = _git_files(repo)
    if files is None:
        files = _walk_files(repo)
    return sorted(f for f in files if not _skipped(PurePosixPath(f).parts[:-1]))


def discover_sources(repo: Path, toolchain: str) -> list[SourceFile]:
    """The testable source files of `repo` under `toolchain`'s rules, sorted by path."""
    rules = get_toolchain(toolchain).file_rules(repo)
    return [
        SourceFile(path=path, kind=kind, toolchain=toolchain)
        for path, kind in rules.sources(list_files(repo))
    ]


def map_repo(repo: Path, toolchain: str | None = None) -> Mapping:
    """Map every source file to its existing specs and the path a new spec would take.

    Args:
        repo: the repository root.
        toolchain: an explicit toolchain name; detected from the repository when None.

    Raises:
        BadInputError: see :func:`tasks.toolchains.registry.detect_toolchain`.
    """
    chosen = detect_toolchain(repo, toolchain)
    rules = get_toolchain(chosen).file_rules(repo)
    files = list_files(repo)
    sources = rules.sources(files)
    plans = [rules.plan(path) for path, _ in sources]
    specs = [f for f in files if rules.is_test_file(f)]
    rules.finish_plans(plans, files)
    owners = assign(plans, specs, rules.aliases)
    rules.claim([path for path, _ in sources], specs, owners)
    mapped = [
        MappedFile(
            source=path,
            kind=kind,
            specs=sorted(owners.get(path, [])),
            expected_spec=plan.expected,
        )
        for (path, kind), plan in zip(sources, plans, strict=True)
    ]
    return Mapping(
        toolchain=chosen,
        files=mapped,
        untested=[m.source for m in mapped if not m.specs],
        warnings=rules.warnings(files, specs),
    )


def list_specs(repo: Path, toolchain: str) -> list[str]:
    """Every test file of the repository, as the toolchain's file rules say."""
    rules = get_toolchain(toolchain).file_rules(repo)
    return [f for f in list_files(repo) if rules.is_test_file(f)]


# --- listing ---------------------------------------------------------------------------------


def _check_repo(repo: Path) -> None:
    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")


def _git_files(repo: Path) -> list[str] | None:
    """Files git knows (tracked + untracked, not ignored), or None when not a git work tree.

    Through the hardened git of :mod:`tasks.keep.git_safe` (the tree may be a worktree the sandbox
    wrote to: a changed ``.git`` link there raises TamperedWorktreeError, never a fallback).
    """
    try:
        inside = run_git(["rev-parse", "--is-inside-work-tree"], cwd=repo, check=False, timeout=30)
        if inside.returncode != 0 or inside.stdout.strip() != b"true":
            return None
        # A project copied into an ignored directory of another repository: git would list
        # nothing, so the walk is the only honest listing.
        ignored = run_git(["check-ignore", "-q", "."], cwd=repo, check=False, timeout=30)
        if ignored.returncode == 0:
            return None
        listed = run_git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo)
    except TamperedWorktreeError:
        raise
    except GitError as exc:
        log.warning("%s: git ls-files failed (%s); walking the directory instead", repo, exc)
        return None
    # Paths are relative to `repo` even when it is a subdirectory of the work tree. Files
    # deleted from the work tree but still in the index are gone for our purposes.
    names = {n for n in listed.stdout.decode("utf-8", "surrogateescape").split("\0") if n}
    return [n for n in names if (repo / n).is_file()]


def _skipped(dirs: tuple[str, ...]) -> bool:
    anywhere, top = skipped_dirs()
    return bool(anywhere.intersection(dirs)) or (bool(dirs) and dirs[0] in top)


def _walk_files(repo: Path) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(repo):
        rel = Path(dirpath).relative_to(repo)
        dirnames[:] = [d for d in dirnames if not _skipped((*rel.parts, d))]
        out.extend(PurePosixPath(*rel.parts, f).as_posix() for f in filenames)
    return out


# --- assigning tests to sources --------------------------------------------------------------


def assign(
    plans: Iterable[SpecPlan],
    specs: list[str],
    aliases: Callable[[str], list[str]] | None = None,
) -> dict[str, list[str]]:
    """Give each spec to the sources that match it best (see the module docstring on ties);
    a spec no source matches is tried under its `aliases` (the stack's other spellings of its
    path, most faithful first), and the first that matches decides."""
    exact: dict[str, list[tuple[Score, str]]] = {}
    dirs: dict[str, list[tuple[Score, str]]] = {}
    for plan in plans:
        for path, score in plan.exact.items():
            exact.setdefault(path, []).append((score, plan.source))
        for prefix, score in plan.dirs.items():
            dirs.setdefault(prefix, []).append((score, plan.source))
    owners: dict[str, list[str]] = {}
    for spec in sorted(specs):
        for name in [spec, *(aliases(spec) if aliases is not None else [])]:
            matches = list(exact.get(name, []))
            for parent in PurePosixPath(name).parents:
                matches.extend(dirs.get(f"{parent}/", []))
            if matches:
                break
        if not matches:
            continue
        best = max(score for score, _ in matches)
        for source in sorted({src for score, src in matches if score == best}):
            owners.setdefault(source, []).append(spec)
    return owners
