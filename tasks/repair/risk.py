"""Patch parsing and risk: what a unified diff touches, what makes it unsafe or risky.

Unsafe (refused before anything is applied): absolute paths, ``..``, anything under ``.git/``,
symbolic links, binary diffs, a diff naming no file. Risky (a person decides even when the tests
pass): dependency manifests and lock files, CI configuration, migrations and schema, configured
``risky_paths``, deleted test files, removed assertions or added skips in tests, more than
``max_patch_lines`` changed lines, file mode changes and new executables, production code edited
when the diagnosis says the test is wrong or a mock is involved.

:func:`parse_patch` reads the diff's text; it is a first filter only. The auditor judges a patch
by what git will write (:mod:`tasks.repair.patch` fills a :class:`PatchInfo` from git itself),
and the risk rules run on that.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from tasks.core.config import RepairSettings
from tasks.model.replies import Diagnosis
from tasks.repair.state import FailureGroup
from tasks.toolchains import registry
from tasks.toolchains.base import Toolchain
from tasks.toolchains.files import FileRules

#: Dependency manifests and lock files of ecosystems no registered toolchain covers (a Rails
#: app may hold a package.json); each toolchain adds its own (``Toolchain.manifests``).
_OTHER_MANIFESTS = (
    "package.json",
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "go.mod",
    "go.sum",
    "Cargo.toml",
    "Cargo.lock",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "composer.json",
    "composer.lock",
)
_CI = (".github/", ".gitlab-ci.yml", ".circleci/", "Jenkinsfile", ".travis.yml", ".buildkite/")
_CI_GLOBS = ("azure-pipelines*.yml", ".gitlab/*", "bitbucket-pipelines.yml")
#: Words of a mock in any language; each toolchain adds its framework's (``mock_words``).
_MOCK = r"\b(mock|mocks|mocked|stub|stubbed|double)"
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass
class PatchInfo:
    """What a unified diff touches."""

    files: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    added_lines: int = 0
    removed_lines: int = 0
    problems: list[str] = field(default_factory=list)
    #: Added and removed line texts per file (new path), for the weakened-test check.
    added_text: dict[str, list[str]] = field(default_factory=dict)
    removed_text: dict[str, list[str]] = field(default_factory=dict)
    #: Mode changes and new executables, as git reports them (:mod:`tasks.repair.patch`).
    mode_changes: list[str] = field(default_factory=list)

    @property
    def changed_lines(self) -> int:
        return self.added_lines + self.removed_lines


def _path_problem(path: str) -> str | None:
    if not path:
        return "empty path"
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return f"{path!r}: absolute path"
    if "\\" in path or "\x00" in path:
        return f"{path!r}: backslash or NUL in path"
    parts = path.split("/")
    if ".." in parts:
        return f"{path!r}: '..' leaves the repository"
    if any(p.lower() == ".git" for p in parts):
        return f"{path!r}: inside .git/"
    return None


def _strip_prefix(raw: str) -> str | None:
    """A header path without its a/ or b/ prefix and timestamp; None for /dev/null."""
    path = raw.split("\t", 1)[0].strip()
    if path.startswith('"') and path.endswith('"'):
        path = path[1:-1]
    if path == "/dev/null":
        return None
    if path.startswith(("a/", "b/")):
        return path[2:]
    return path


def parse_patch(diff: str) -> PatchInfo:
    """The files a diff touches, its size, and what makes it unsafe (see the module docstring).

    Hunks are read by their line counts, so a removed line that starts with ``--`` and the next
    file's ``---`` header are never confused, with or without ``diff --git`` lines.
    """
    info = PatchInfo()
    files: dict[str, None] = {}
    old_left = new_left = 0
    old: str | None = None
    current: str | None = None
    for line in diff.splitlines():
        if old_left > 0 or new_left > 0:
            if line.startswith("\\"):
                continue  # "\ No newline at end of file"
            sign = line[:1]
            if sign == "-":
                old_left -= 1
                info.removed_lines += 1
                info.removed_text.setdefault(current or "", []).append(line[1:])
            elif sign == "+":
                new_left -= 1
                info.added_lines += 1
                info.added_text.setdefault(current or "", []).append(line[1:])
            else:  # context (a blank context line may have lost its space)
                old_left -= 1
                new_left -= 1
            continue
        hunk = _HUNK.match(line)
        if hunk:
            old_left = int(hunk.group(1)) if hunk.group(1) is not None else 1
            new_left = int(hunk.group(2)) if hunk.group(2) is not None else 1
            continue
        if line.startswith("--- "):
            old = _strip_prefix(line[4:])
        elif line.startswith("+++ "):
            new = _strip_prefix(line[4:])
            for path in (old, new):
                if path is not None:
                    files.setdefault(path, None)
            if new is None and old is not None:
                info.deleted.append(old)
            current = new or old
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            files.setdefault(line.split(" ", 2)[2].strip(), None)
        elif re.match(r"^(new file mode|deleted file mode|old mode|new mode) 120000", line):
            info.problems.append("symbolic links are not allowed in a repair patch")
        elif line.startswith(("GIT binary patch", "Binary files ")):
            info.problems.append("binary diffs are not allowed in a repair patch")
    info.files = list(files)
    if not info.files:
        info.problems.append("the diff names no file")
    for path in info.files:
        problem = _path_problem(path)
        if problem:
            info.problems.append(problem)
    return info


def weakened_tests(info: PatchInfo, chain: Toolchain, rules: FileRules) -> list[str]:
    """Test files where the patch removes assertions or adds a skip: fixed for the wrong reason
    (what an assertion and a skip look like, the toolchain says)."""
    assertion, skip = re.compile(chain.assertion_words), re.compile(chain.skip_words)
    reasons: list[str] = []
    for path in info.files:
        if not rules.is_test_side(path):
            continue
        removed = sum(bool(assertion.search(t)) for t in info.removed_text.get(path, []))
        added = sum(bool(assertion.search(t)) for t in info.added_text.get(path, []))
        if removed > added:
            reasons.append(f"{path}: removes {removed - added} assertion(s)")
        if any(skip.search(t) for t in info.added_text.get(path, [])):
            reasons.append(f"{path}: skips or disables a test")
    return reasons


def _matches(path: str, patterns: tuple[str, ...] | list[str]) -> bool:
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(name, p) for p in patterns)


def risk_reasons(
    info: PatchInfo,
    diagnosis: Diagnosis | None,
    group: FailureGroup,
    settings: RepairSettings,
    chain: Toolchain,
    rules: FileRules,
) -> list[str]:
    """Why this patch needs a person even if the tests pass ([] when it does not).

    Manifests and migrations are every registered toolchain's (a project may hold files of
    several stacks); the test files, assertions and mocks are the project's toolchain's.
    """
    manifests = (*_OTHER_MANIFESTS, *registry.manifests())
    migrations = registry.migrations()
    reasons: list[str] = []
    for path in info.files:
        name = path.rsplit("/", 1)[-1]
        if _matches(path, manifests):
            reasons.append(f"{path}: dependency manifest or lock file")
        elif path.startswith(_CI) or name in _CI or _matches(path, _CI_GLOBS):
            reasons.append(f"{path}: CI configuration")
        elif _matches(path, migrations):
            reasons.append(f"{path}: database migration or schema")
        elif settings.risky_paths and _matches(path, settings.risky_paths):
            reasons.append(f"{path}: matches a configured risky path")
    reasons.extend(f"{change} (a file mode change needs a person)" for change in info.mode_changes)
    for path in info.deleted:
        if rules.is_test_side(path):
            reasons.append(f"{path}: deletes a test file")
    reasons.extend(weakened_tests(info, chain, rules))
    if info.changed_lines > settings.max_patch_lines:
        reasons.append(
            f"{info.changed_lines} changed lines, more than max_patch_lines "
            f"({settings.max_patch_lines})"
        )
    production = [p for p in info.files if not rules.is_test_side(p)]
    if production and diagnosis is not None:
        if diagnosis.wrong_side == "test":
            reasons.append(
                f"edits production code ({', '.join(production)}) although the diagnosis "
                "says the test is wrong"
            )
        else:
            evidence = " ".join(
                [diagnosis.root_cause, diagnosis.repair_strategy]
                + [f"{c.message or ''} {c.trace or ''}" for c in group.tests]
            )
            if re.search(f"{_MOCK}|{chain.mock_words}", evidence, re.IGNORECASE):
                reasons.append(
                    f"edits production code ({', '.join(production)}) where a mock is involved"
                )
    return reasons
