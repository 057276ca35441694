"""The `autopilot` command line.

Commands import their machinery lazily so that `parse` and `map` never import Prefect.
`--json` prints one JSON document on stdout; logs go to stderr. Exit codes: 0 done,
1 done but a gate or a repair failed, 2 bad input or configuration (one line on stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from flows.cli_setup import _print_version, _setup_logging, hoist_verbose

__all__ = ["app", "hoist_verbose", "main"]

app = typer.Typer(
    name="autopilot",
    help="Write and repair tests with Mistral models; accept only what is proved.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
ArchiveOpt = Annotated[
    str | None, typer.Option("--archive", help="Directory or s3://bucket/prefix.")
]
RepoOpt = Annotated[
    Path,
    typer.Option("--repo", help="The target repository.", resolve_path=True),
]


@app.callback()
def _root(
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="Log progress; -vv adds HTTP requests, -vvv every library's debug output "
            "(before or after the command).",
        ),
    ] = 0,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    _setup_logging(verbose)


@app.command()
def parse(
    reports: Annotated[list[Path], typer.Argument(help="JUnit XML or RSpec JSON reports.")],
    json_out: JsonOpt = False,
) -> None:
    """Normalised test results from reports (exit 0 if all parsed, 2 if not)."""
    from flows.commands.parse import run

    raise typer.Exit(run(reports, json_out))


@app.command(name="map")
def map_(repo: RepoOpt = Path("."), json_out: JsonOpt = False) -> None:
    """Source -> spec mapping, file kinds and untested files."""
    from flows.commands.map import run

    raise typer.Exit(run(repo, json_out))


@app.command()
def audit(
    ctx: typer.Context,
    repo: RepoOpt = Path("."),
    ref: Annotated[str, typer.Option("--ref", help="Commit or branch to audit.")] = "HEAD",
    json_out: JsonOpt = False,
) -> None:
    """Coverage, lint, static rubric and pass/fail per file; no model."""
    from flows.commands.audit import run

    raise typer.Exit(run(repo, ref, json_out, verbose=_verbose(ctx)))


@app.command()
def judge(
    spec: Annotated[str | None, typer.Argument(help="The spec or test file to judge.")] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Source under test (default: mapped).")
    ] = None,
    repo: Annotated[
        Path | None, typer.Option("--repo", help="The repository (default: the current dir).")
    ] = None,
    calibrate: Annotated[
        bool, typer.Option("--calibrate", help="Score the labelled cases in judge/calibration.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Run a spec in the sandbox; if it passes, the static rubric and the LLM judge."""
    from flows.commands.judge import run

    raise typer.Exit(run(spec, source, repo, json_out, calibrate))


@app.command()
def nightly(
    ctx: typer.Context,
    repo: RepoOpt = Path("."),
    ref: Annotated[str, typer.Option("--ref", help="Base commit or branch.")] = "HEAD",
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Glob of source files (repeatable).")
    ] = None,
    max_files: Annotated[int | None, typer.Option("--max-files", min=1)] = None,
    max_iterations: Annotated[int, typer.Option("--max-iterations", min=1)] = 4,
    min_coverage: Annotated[float | None, typer.Option("--min-coverage", min=0, max=1)] = None,
    min_judge: Annotated[float | None, typer.Option("--min-judge", min=0, max=1)] = None,
    archive: ArchiveOpt = None,
    dask: Annotated[
        str | None, typer.Option("--dask", help="Dask scheduler address, or 'local'.")
    ] = None,
    push: Annotated[bool, typer.Option("--push", help="Push the result branch.")] = False,
    max_model_calls: Annotated[
        int | None, typer.Option("--max-model-calls", help="Model-call budget of the run.")
    ] = None,
    file_time_limit: Annotated[
        float | None, typer.Option("--file-time-limit", help="Seconds per file (between steps).")
    ] = None,
    json_out: JsonOpt = False,
    pr: Annotated[
        bool, typer.Option("--pr", help="Push the branch and open a pull request ([forge]).")
    ] = False,
) -> None:
    """Generate and improve tests for the files that need it most; accepted work on a branch."""
    from flows.commands.nightly import run

    raise typer.Exit(
        run(
            repo,
            ref=ref,
            only=only,
            max_files=max_files,
            max_iterations=max_iterations,
            min_coverage=min_coverage,
            min_judge=min_judge,
            archive=archive,
            dask=dask,
            push=push,
            max_model_calls=max_model_calls,
            file_time_limit_s=file_time_limit,
            json_out=json_out,
            verbose=_verbose(ctx),
            pr=pr,
        )
    )


@app.command()
def repair(
    ctx: typer.Context,
    repo: RepoOpt = Path("."),
    report: Annotated[
        list[str] | None,
        typer.Option(
            "--report", help="JUnit XML or RSpec JSON report: a path or s3:// URI (repeatable)."
        ),
    ] = None,
    ref: Annotated[str, typer.Option("--ref", help="The merged commit.")] = "HEAD",
    max_retries: Annotated[int | None, typer.Option("--max-retries", min=0)] = None,
    human_timeout: Annotated[
        float | None, typer.Option("--human-timeout", min=0, help="Seconds to wait for a person.")
    ] = None,
    archive: ArchiveOpt = None,
    json_out: JsonOpt = False,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            help="Go on from an earlier run (its run_id) in the same archive.",
        ),
    ] = None,
    commit: Annotated[
        str | None,
        typer.Option("--commit", help="The failing commit (fetched from origin if missing)."),
    ] = None,
    push: Annotated[bool, typer.Option("--push", help="Push the fix branch.")] = False,
    pr: Annotated[
        bool, typer.Option("--pr", help="Push it and open a pull request ([forge]).")
    ] = False,
    dask: Annotated[
        str | None, typer.Option("--dask", help="Dask scheduler address, or 'local'.")
    ] = None,
) -> None:
    """Repair failing tests after a merge: diagnose, patch, audit, hand off when unsure."""
    from flows.commands.repair import run

    raise typer.Exit(
        run(
            repo,
            report or [],
            ref=ref,
            max_retries=max_retries,
            human_timeout=human_timeout,
            archive=archive,
            json_out=json_out,
            verbose=_verbose(ctx),
            resume=resume,
            commit=commit,
            push=push,
            pr=pr,
            dask=dask,
        )
    )


@app.command()
def premerge(
    ctx: typer.Context,
    base: Annotated[
        str, typer.Option("--base", help="The branch or commit the pull request goes into.")
    ],
    repo: RepoOpt = Path("."),
    head: Annotated[str, typer.Option("--head", help="The pull request's head.")] = "HEAD",
    pr_number: Annotated[
        int | None,
        typer.Option("--pr-number", help="The pull request to comment on (default: the CI's)."),
    ] = None,
    max_iterations: Annotated[int, typer.Option("--max-iterations", min=1)] = 4,
    min_diff_coverage: Annotated[
        float | None, typer.Option("--min-diff-coverage", min=0, max=1)
    ] = None,
    archive: ArchiveOpt = None,
    push: Annotated[bool, typer.Option("--push", help="Push the result branch.")] = False,
    max_model_calls: Annotated[int | None, typer.Option("--max-model-calls")] = None,
    file_time_limit: Annotated[float | None, typer.Option("--file-time-limit")] = None,
    json_out: JsonOpt = False,
    dask: Annotated[
        str | None, typer.Option("--dask", help="Dask scheduler address, or 'local'.")
    ] = None,
) -> None:
    """Tests for a pull request's changed lines; a comment and a commit status on the forge."""
    from flows.commands.premerge import run

    raise typer.Exit(
        run(
            repo,
            base,
            head,
            pr_number=pr_number,
            max_iterations=max_iterations,
            min_diff_coverage=min_diff_coverage,
            archive=archive,
            push=push,
            json_out=json_out,
            verbose=_verbose(ctx),
            max_model_calls=max_model_calls,
            file_time_limit_s=file_time_limit,
            dask=dask,
        )
    )


@app.command()
def serve(
    ctx: typer.Context,
    cron: Annotated[str, typer.Option("--cron", help="The nightly's schedule.")] = "0 2 * * *",
    timezone: Annotated[str, typer.Option("--timezone", help="IANA timezone.")] = "UTC",
    repo: Annotated[
        str | None, typer.Option("--repo", help="Repository the nightly works on.")
    ] = None,
    ref: Annotated[str, typer.Option("--ref")] = "HEAD",
    archive: Annotated[str | None, typer.Option("--archive")] = None,
    max_files: Annotated[int | None, typer.Option("--max-files", min=1)] = None,
    max_model_calls: Annotated[int | None, typer.Option("--max-model-calls", min=0)] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Flow runs at once.")] = None,
) -> None:
    """Serve the deployments (nightly cron, post-merge, premerge, audit) until interrupted."""
    from flows.commands.serve import run

    raise typer.Exit(
        run(
            cron=cron,
            timezone=timezone,
            repo=repo,
            ref=ref,
            archive=archive,
            max_files=max_files,
            max_model_calls=max_model_calls,
            limit=limit,
            verbose=_verbose(ctx),
        )
    )


@app.command(name="eval")
def eval_(
    ctx: typer.Context,
    repo: RepoOpt = Path("."),
    regressions: Annotated[
        int, typer.Option("--regressions", min=0, help="Mutations to inject, then repair.")
    ] = 0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the mutation choice.")] = 0,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Glob of source files (repeatable).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """The field reports' quality table: nightly (and repair of injected regressions)."""
    from flows.commands.eval import run

    raise typer.Exit(
        run(repo, regressions, json_out=json_out, verbose=_verbose(ctx), seed=seed, only=only)
    )


@app.command()
def demo(
    ctx: typer.Context,
    example: Annotated[
        Path, typer.Option("--example", help="The bundled Rails example.", resolve_path=True)
    ] = Path("examples/rails_shop"),
) -> None:
    """The nightly on the bundled Rails example (the scripted demo model when none is set)."""
    from flows.commands.demo import run

    raise typer.Exit(run(example, verbose=_verbose(ctx)))


@app.command()
def history(
    repo: RepoOpt = Path("."),
    runs: Annotated[
        int | None, typer.Option("--runs", min=2, help="Runs shown (default history.trend_runs).")
    ] = None,
    test: Annotated[
        str | None, typer.Option("--test", help="One test's results (its id or file::name).")
    ] = None,
    chart: Annotated[
        Path | None, typer.Option("--chart", help="Write the trend chart (PNG) to this file.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Memory across runs: the trend, the flaky quarantine, the skips, a test's results."""
    from flows.commands.history import run

    raise typer.Exit(run(repo, json_out, runs=runs, test=test, chart=chart))


config_app = typer.Typer(help="The effective settings.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("show")
def config_show(
    repo: Annotated[
        Path | None,
        typer.Option("--repo", help="Repository whose autopilot.toml is read.", resolve_path=True),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="NAME=VALUE, as an option would set it (repeatable)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Every setting's effective value (secrets masked) and where it came from."""
    from flows.commands.config import run

    raise typer.Exit(run(repo, set_ or [], json_out))


def _verbose(ctx: typer.Context) -> int:
    """How many -v were given (0: quiet; 1: progress; 2: HTTP client detail too)."""
    root = ctx.find_root()
    return int(root.params.get("verbose") or 0)


def main() -> None:
    """Console-script entry: turns project errors into one line and their exit code."""
    from tasks.core.errors import AutopilotError

    try:
        app(args=hoist_verbose(sys.argv[1:]))
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("autopilot: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
