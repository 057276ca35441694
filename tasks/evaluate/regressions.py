"""The regressions ``autopilot eval`` injects before its repair run: mutations of source lines
the baseline suite covers, committed on a new branch of the evaluation's clone; and what the
nightly's archive says its targets were (their existing specs)."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from tasks.core.config import Settings
from tasks.evaluate.mutations import choose
from tasks.generate.targets import Target
from tasks.keep.git import commit_files_to_new_branch, resolve_commit
from tasks.sandbox.make import make_runner
from tasks.toolchains.registry import detect_toolchain, toolchain_for

#: The branch of the clone that holds the injected regressions.
BRANCH = "autopilot-eval/regressions"


class Injected(BaseModel):
    """The commit holding the mutations (None: nothing covered could be mutated)."""

    commit: str | None = None
    branch: str | None = None
    mutations: list[str] = []


def inject(
    project: Path, root: Path, sub: str, regressions: int, seed: int, settings: Settings
) -> Injected:
    """Run the baseline suite on the clone, choose `regressions` mutations of covered lines
    and commit them on :data:`BRANCH` (the clone's, never the user's)."""
    chain = toolchain_for(settings, detect_toolchain(project, settings.toolchain))
    runner = make_runner(settings.sandbox, root=root, toolchain_dirs=chain.sandbox_dirs(project))
    suite = chain.run_suite(project, runner)
    sources = {
        path: (project / path).read_text(encoding="utf-8")
        for path in suite.files
        if (project / path).is_file()
    }
    mutations, texts = choose(sources, suite.files, regressions, chain, seed=seed)
    if not mutations:
        return Injected()
    prefix = f"{sub}/" if sub else ""
    message = f"eval: {len(mutations)} injected regression(s)\n\n" + "\n".join(
        f"- {m.describe()}" for m in mutations
    )
    commit = commit_files_to_new_branch(
        root,
        resolve_commit(root, "HEAD"),
        BRANCH,
        {prefix + p: t.encode() for p, t in texts.items()},
        message,
    )
    return Injected(commit=commit, branch=BRANCH, mutations=[m.describe() for m in mutations])


def archived_targets(archive_uri: str | None) -> list[Target]:
    """The nightly's targets as it archived them (``targets.json``): [] when unreadable."""
    if not archive_uri:
        return []
    try:
        raw = json.loads((Path(archive_uri) / "targets.json").read_text(encoding="utf-8"))
        return [Target.model_validate(t) for t in raw]
    except (OSError, ValueError):
        return []
