"""`autopilot eval --repo PATH [--regressions N] [--json]`: the quality table of a real run.

Everything happens in a clone of the repository in a temporary directory, so the user's
branches and working tree are never touched: the nightly runs on the clone; with
``--regressions N`` the baseline suite's coverage picks N covered source lines, the mutations are
committed on a new branch of the clone, and the post-merge repair runs on that commit with no
human wait (a hand-off ends "needs human" at once, which is what the human intervention rate
counts). Both runs are archived under ``$AUTOPILOT_HOME/eval/<stamp>`` (a local directory, so
the table can read the nightly's targets back). Exit 0 when the table was produced, 2 on bad
input or configuration, 1 when a flow failed.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tasks.core.errors import AutopilotError, BadInputError, ConfigError

BRANCH = "autopilot-eval/regressions"


def _check(repo: Path, regressions: int, only: list[str] | None) -> None:
    from tasks.core.config import load_settings
    from tasks.generate.targets import check_globs
    from tasks.keep.git import resolve_commit, subdir_in_repo
    from tasks.toolchains.registry import detect_toolchain

    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")
    if regressions < 0:
        raise BadInputError(f"--regressions: {regressions} is negative")
    check_globs(only)
    settings = load_settings(repo)
    if not settings.model_configured:
        raise ConfigError("eval needs a model: set MISTRAL_API_KEY or AUTOPILOT_MODEL_URL")
    root, _ = subdir_in_repo(repo)
    resolve_commit(root, "HEAD")
    detect_toolchain(repo, settings.toolchain)


def _static_before(archive_uri: str | None) -> dict[str, float | None]:
    """source -> static score of its existing spec, from the nightly's archived targets."""
    if not archive_uri:
        return {}
    try:
        targets = json.loads((Path(archive_uri) / "targets.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {t["source"]: t.get("static_before") for t in targets}


def _inject(project: Path, root: Path, sub: str, regressions: int, seed: int) -> dict[str, Any]:
    """Run the baseline suite on the clone, choose and commit the mutations; return the
    commit, the branch and the mutations (empty when nothing covered could be mutated)."""
    from tasks.core.config import load_settings
    from tasks.evaluate.mutations import choose
    from tasks.keep.git import commit_files_to_new_branch, resolve_commit
    from tasks.sandbox.runners import make_runner
    from tasks.toolchains.registry import detect_toolchain, toolchain_for

    settings = load_settings(project)
    toolchain = detect_toolchain(project, settings.toolchain)
    runner = make_runner(settings.sandbox, root=root)
    chain = toolchain_for(settings, toolchain)
    suite = chain.run_suite(project, runner)
    sources = {
        path: (project / path).read_text(encoding="utf-8")
        for path in suite.files
        if (project / path).is_file()
    }
    mutations, texts = choose(sources, suite.files, regressions, chain, seed=seed)
    if not mutations:
        return {"commit": None, "branch": None, "mutations": []}
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
    return {"commit": commit, "branch": BRANCH, "mutations": [m.describe() for m in mutations]}


def _print(table: Any, doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from tasks.evaluate.table import rows

    out = Table(title=f"Autopilot evaluation of {doc['repo']}")
    out.add_column("metric")
    out.add_column("value", justify="right")
    for name, value in rows(table):
        out.add_row(name, value)
    console = Console()
    console.print(out)
    for m in doc["mutations"]:
        console.print(f"regression: {m}", markup=False)
    console.print(table.price_note, markup=False)


def run(
    repo: Path,
    regressions: int = 0,
    json_out: bool = False,
    verbose: bool | int = False,
    seed: int = 0,
    only: list[str] | None = None,
) -> int:
    """Evaluate the autopilot on `repo` and print the quality table.

    Args:
        repo: the target repository (or a project directory inside one); it is cloned, never
            modified.
        regressions: mutations to inject into covered source lines before the repair (0: the
            nightly only).
        json_out: print one JSON document ``{"repo", "table", "mutations", "nightly",
            "repair"}`` on stdout.
        verbose: log progress on stderr.
        seed: the mutation choice's random seed.
        only: source globs restricting the nightly's targets (as ``nightly --only``).

    Returns:
        0 when the table was produced, 1 when a flow failed, 2 on bad input or configuration.
    """
    repo = Path(repo)
    try:
        _check(repo, regressions, only)
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    from prefect import tags
    from prefect.task_runners import ThreadPoolTaskRunner

    from flows.nightly import nightly
    from flows.post_merge import post_merge
    from flows.runtime import flow_runtime
    from tasks.core.config import load_settings
    from tasks.evaluate.table import clone, quality_table
    from tasks.keep.git import subdir_in_repo

    settings = load_settings(repo)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    archive = settings.home / "eval" / stamp
    root, sub = subdir_in_repo(repo.resolve())
    try:
        with tempfile.TemporaryDirectory(prefix="autopilot-eval-") as tmp:
            work = clone(root, Path(tmp) / "repo")
            project = work / sub if sub else work
            runner: Any = ThreadPoolTaskRunner(max_workers=settings.model.max_concurrency)
            with flow_runtime(verbose), tags("autopilot", "eval"):
                report = nightly.with_options(task_runner=runner)(
                    repo=str(project), only=list(only) if only else None, archive=str(archive)
                )
                injected: dict[str, Any] = {"commit": None, "branch": None, "mutations": []}
                repair: dict[str, Any] | None = None
                if regressions:
                    injected = _inject(project, work, sub, regressions, seed)
                    if injected["commit"]:
                        repair = post_merge(
                            repo=str(project),
                            reports=None,
                            ref=injected["commit"],
                            human_timeout=0,
                            archive=str(archive),
                        )
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return exc.exit_code
    table = quality_table(
        report.files,
        static_before=_static_before(report.archive_uri),
        nightly_tokens=report.tokens,
        generator_model=settings.models.generator,
        repair=repair,
        regressions=len(injected["mutations"]),
        repair_model=settings.models.surgeon,
    )
    doc = {
        "repo": str(repo.resolve()),
        "table": table.model_dump(mode="json"),
        "mutations": injected["mutations"],
        "nightly": report.public(),
        "repair": repair,
    }
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        sys.stdout.flush()
    else:
        _print(table, doc)
    return 0
