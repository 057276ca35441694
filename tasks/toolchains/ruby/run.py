"""RSpec runs with coverage: the command, our SimpleCov helper, the JSON report read back.

Coverage does not depend on the project: a small helper (``resources/autopilot_simplecov.rb``)
is copied into the run's scratch directory and loaded through ``RUBYOPT=-r`` before RSpec and the
application, so SimpleCov measures every run even when the project's spec helper never starts
it, and a project that does start it keeps working (its second ``SimpleCov.start`` only applies
configuration). Each run writes its resultset to its own directory with its own command name, so
parallel runs in one worktree never merge into each other. A baseline run also loads
``resources/autopilot_rspec_contexts.rb`` (``rspec --require``), which credits each spec file with
the source lines it ran: the evidence that maps specs to sources whatever their names.

A run that never got to its examples (Bundler refusing the Gemfile, a helper that does not load,
errors outside examples) is not loaded, with a :class:`~tasks.core.types.SuiteProblem` naming the
real cause.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from tasks.core.errors import CoverageError
from tasks.core.types import (
    CommandResult,
    FileCoverage,
    SuiteProblem,
    TestCaseResult,
    TestStatus,
    ValidationResult,
)
from tasks.facts.coverage import parse_coverage
from tasks.facts.evidence import body_lines_run
from tasks.facts.stacktrace import locations_from_trace
from tasks.toolchains.base import CommandRunner, SuiteResult, Toolchain, ToolchainError
from tasks.toolchains.ruby.diagnose import diagnose_rspec
from tasks.toolchains.runs import (
    copy_resource,
    join_messages,
    keep_reports,
    load_contexts,
    not_run,
    remove_scratch,
    scratch_dir,
    tail,
)

log = logging.getLogger(__name__)

HELPER_NAME = "autopilot_simplecov.rb"
CONTEXTS_NAME = "autopilot_rspec_contexts.rb"
#: Sources SimpleCov reports even when no spec loads them (so untested files show 0 %).
DEFAULT_TRACK = "{app,lib}/**/*.rb"
_ASSERTION_PREFIXES = ("RSpec::Expectations::", "RSpec::Mocks::")
_STATUS: dict[str, TestStatus] = {"passed": "passed", "failed": "failed", "pending": "skipped"}


def uses_bundler(repo: Path, gem: str) -> bool:
    """True when the project has a Gemfile naming `gem`: run it with `bundle exec`."""
    gemfile = repo / "Gemfile"
    if not gemfile.is_file():
        return False
    return gem in gemfile.read_text(encoding="utf-8", errors="replace")


def rspec_argv(
    repo: Path, specs: list[str], json_out: Path, requires: list[Path] | None = None
) -> list[str]:
    """The RSpec command: progress on stdout, the JSON report to `json_out`."""
    base = ["bundle", "exec", "rspec"] if uses_bundler(repo, "rspec") else ["rspec"]
    extra = [arg for path in requires or [] for arg in ("--require", str(path))]
    formats = ["--format", "progress", "--format", "json", "--out", str(json_out)]
    return [*base, *extra, *formats, *specs]


def run_tests(
    chain: Toolchain,
    repo: Path,
    specs: list[str],
    target: str | None,
    runner: CommandRunner,
    *,
    timeout_s: float | None,
    reports_dir: Path | None,
    exclude: list[str] | None = None,
    coverage: bool = True,
    contexts: bool = False,
) -> SuiteResult:
    """Run spec files (or the suite) with RSpec's JSON formatter and our SimpleCov helper.

    The helper is loaded with ``RUBYOPT=-r`` (the project's spec helper need not start
    SimpleCov); `exclude` names the remaining spec files, RSpec's --exclude-pattern being a
    single glob; `contexts` credits each spec file with the lines it ran. `chain` brings the
    ``prepare`` commands and the helper files. See :meth:`Toolchain.run_specs` for the
    arguments.
    """
    repo = repo.resolve()
    run_dir = scratch_dir(repo)
    prepared: list[str] = []
    try:
        json_out = run_dir / "rspec.json"
        env = run_env(chain, repo, run_dir, target, coverage=coverage)
        if exclude:
            # Name the remaining spec files: RSpec's --exclude-pattern is a single glob.
            skip = set(exclude)
            specs_run = sorted(
                rel
                for p in (repo / "spec").rglob("*_spec.rb")
                if (rel := p.relative_to(repo).as_posix()) not in skip
            )
        else:
            specs_run = specs
        requires: list[Path] = []
        contexts_out = run_dir / "contexts.json"
        if contexts and coverage:
            requires.append(copy_resource(chain.resource(CONTEXTS_NAME), run_dir))
            env["AUTOPILOT_CONTEXTS_FILE"] = str(contexts_out)
        try:
            prepared = chain.prepare_worktree(repo, runner, {"RAILS_ENV": "test"})
        except ToolchainError as exc:
            return not_run(chain.name, specs, target, "prepare", str(exc))
        argv = rspec_argv(repo, specs_run, json_out, requires)
        cmd = runner.run(argv, cwd=repo, env=env, timeout_s=timeout_s)
        result = parse_rspec_run(repo, json_out, cmd)
        result.specs = list(specs)
        result.target = target
        suite = SuiteResult(
            validation=result, prepared=prepared, load_errors=load_errors_by_file(json_out)
        )
        if coverage:
            suite.files = resultset_coverage(repo, run_dir)
        if contexts_out.is_file():
            suite.set_evidence(
                body_lines_run(load_contexts(contexts_out, repo), repo, chain.body_lines)
            )
        if target is not None:
            result.coverage = suite.files.get(target)
        if reports_dir is not None:
            keep_reports(run_dir, reports_dir, {*chain.resources, *chain.cache_dirs})
        return suite
    finally:
        remove_scratch(run_dir)


def run_env(
    chain: Toolchain, repo: Path, run_dir: Path, target: str | None, *, coverage: bool
) -> dict[str, str]:
    """A run's environment: the test environment and, when measuring, our SimpleCov helper
    (copied into `run_dir`) writing to ``run_dir/coverage``."""
    env = {"RAILS_ENV": "test"}
    if not coverage:
        return env
    helper = copy_resource(chain.resource(HELPER_NAME), run_dir)
    track = DEFAULT_TRACK if target is None else f"{{app/**/*.rb,lib/**/*.rb,{target}}}"
    return env | {
        "RUBYOPT": f"-r{helper}",
        "AUTOPILOT_COVERAGE_DIR": str((run_dir / "coverage").relative_to(repo)),
        "AUTOPILOT_COVERAGE_NAME": f"autopilot-{run_dir.name}",
        "AUTOPILOT_TRACK_FILES": track,
    }


def resultset_coverage(repo: Path, run_dir: Path) -> dict[str, FileCoverage]:
    """Every file's coverage from the run's SimpleCov resultset ({} when there is none)."""
    return _coverage(repo, run_dir / "coverage" / ".resultset.json")


_LOADING = re.compile(r"An error occurred while loading (?:\./)?(?P<path>\S+?_spec\.rb)")


def load_errors_by_file(json_out: Path) -> dict[str, str]:
    """Spec file -> RSpec's message about why it did not load, from the JSON report."""
    try:
        data = json.loads(json_out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    messages = data.get("messages") if isinstance(data, dict) else None
    out: dict[str, str] = {}
    for message in messages if isinstance(messages, list) else []:
        m = _LOADING.search(message) if isinstance(message, str) else None
        if m:
            out.setdefault(m.group("path"), message.strip())
    return out


def _coverage(repo: Path, resultset: Path) -> dict[str, FileCoverage]:
    if not resultset.is_file():
        log.warning("%s: SimpleCov wrote no resultset; no coverage for this run", repo)
        return {}
    try:
        return parse_coverage(resultset, repo)
    except CoverageError as exc:
        log.warning("coverage of %s unusable: %s", repo, exc)
        return {}


def parse_rspec_run(repo: Path, json_out: Path, cmd: CommandResult) -> ValidationResult:
    """Turn one rspec command and its JSON report into a ValidationResult.

    A missing or broken report, errors outside of examples, or a failing exit status with no
    example at all mean the specs did not load: ``loaded=False`` with the reason.
    """
    base = ValidationResult(
        toolchain="ruby-rspec", loaded=False, duration_s=cmd.duration_s, reason=cmd.reason
    )
    output = tail(cmd.stderr or cmd.stdout)
    try:
        data = json.loads(json_out.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        why = cmd.reason or f"no usable RSpec JSON report ({exc.__class__.__name__})"
        if cmd.reason:
            base.problem = SuiteProblem(
                tool="rspec", cause="environment", message=f"stopped: {cmd.reason}"
            )
        else:
            base.problem = diagnose_rspec(cmd.stdout + "\n" + cmd.stderr, cmd.exit_code, repo)
            if base.problem.message.startswith("rspec exited"):  # nothing more telling found
                base.problem.message = why
            why = base.problem.message
        base.load_error = f"rspec exited {cmd.exit_code}: {why}\n{output}".strip()
        return base
    base.examples = [_example(repo, e) for e in data.get("examples") or [] if isinstance(e, dict)]
    raw_summary = data.get("summary")
    summary: dict[str, Any] = raw_summary if isinstance(raw_summary, dict) else {}
    outside = _number(summary.get("errors_outside_of_examples_count"))
    messages = [m for m in data.get("messages") or [] if isinstance(m, str) and m.strip()]
    if outside or (cmd.exit_code != 0 and not base.examples):
        text = join_messages(messages) or output or f"rspec exited {cmd.exit_code}"
        base.load_error = text
        base.problem = diagnose_rspec(cmd.stdout + "\n" + cmd.stderr, cmd.exit_code, repo, messages)
        return base
    base.loaded = True
    return base


def _example(repo: Path, raw: dict[str, Any]) -> TestCaseResult:
    file = str(raw.get("file_path") or "").removeprefix("./") or None
    status = _STATUS.get(str(raw.get("status")), "error")
    exc = raw.get("exception") if isinstance(raw.get("exception"), dict) else None
    message = raw.get("pending_message") if status == "skipped" else None
    trace = None
    error_type = None
    if exc is not None:
        message = str(exc.get("message") or "").strip()
        error_type = str(exc.get("class") or "") or None
        if status == "failed" and error_type and not error_type.startswith(_ASSERTION_PREFIXES):
            # An exception other than a failed expectation: JUnit's "error", not "failure".
            status = "error"
        trace = "\n".join(str(line) for line in exc.get("backtrace") or [])
    locations = (
        [loc for loc in locations_from_trace(trace, repo) if not loc.path.startswith("/")]
        if trace
        else []
    )
    return TestCaseResult(
        id=str(raw.get("id") or f"{file}:{raw.get('line_number')}"),
        name=str(raw.get("full_description") or raw.get("description") or ""),
        classname=file or "",
        file=file,
        line=raw.get("line_number") if isinstance(raw.get("line_number"), int) else None,
        status=status,
        duration=_number(raw.get("run_time")),
        message=message,
        error_type=error_type,
        trace=trace,
        locations=locations,
    )


def _number(value: Any) -> float:
    """A number from an untrusted report field; anything else counts as 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value)
