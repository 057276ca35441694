"""The pull request's comment and commit status, as text.

The comment starts with :data:`MARKER`, a hidden HTML comment the next run finds it by (and
updates it instead of adding another). Every path and reason in it comes from the pull request
(untrusted): each is shown as inline code with backticks, pipes and line breaks neutralised,
so a file name cannot close the table, start a link or forge the marker.
"""

from __future__ import annotations

from typing import Literal

from tasks.generate.numbered import line_ranges
from tasks.generate.types import FileOutcome
from tasks.premerge.report import PremergeReport
from tasks.premerge.targets import ALL_RAN

MARKER = "<!-- autopilot-premerge -->"
#: Files listed at most per section; the rest are counted.
MAX_LISTED = 30
#: GitHub's limit on a commit status's description.
MAX_DESCRIPTION = 140


def code(text: str) -> str:
    """`text` as inline code that cannot break out of its cell."""
    flat = " ".join(text.split()).replace("`", "'").replace("|", "\\|")
    flat = flat.replace("<!--", "<! --")
    return f"`{flat}`"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _plain(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split()).replace("<!--", "<! --").replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def headline(report: PremergeReport) -> str:
    """Diff coverage before -> after, against the threshold (one line)."""
    before, after = report.before, report.after
    return (
        f"diff coverage {_pct(before.ratio)} -> {_pct(after.ratio)} "
        f"(min {report.min_diff_coverage:.0%}; {after.covered}/{after.measured} changed lines run)"
    )


def _accepted(out: FileOutcome) -> str:
    tests = [p for p in sorted(out.files) if p == out.spec] or sorted(out.files)[:1]
    judge = f"judge {out.judge_score:.2f}" if out.judge_score is not None else "judge -"
    mutation = f", mutation {out.mutation_score:.2f}" if out.mutation_score is not None else ""
    return (
        f"- {code(', '.join(tests) or out.spec)} for {code(out.source)}: "
        f"changed lines {_pct(out.diff_coverage_before)} -> {_pct(out.diff_coverage_after)}, "
        f"{judge}{mutation}"
    )


def _rejected(out: FileOutcome) -> str:
    why = "; ".join(out.reasons[:2]) or "no reason recorded"
    return f"- {code(out.source)}: {out.verdict} at **{out.gate or '-'}**: {_plain(why)}"


def _listed(lines: list[str]) -> list[str]:
    more = len(lines) - MAX_LISTED
    return lines[:MAX_LISTED] + ([f"- ... and {more} more"] if more > 0 else [])


def comment_body(report: PremergeReport, flow_run_url: str | None = None) -> str:
    """The comment's markdown: the diff coverage, the branch, every accepted test, every
    rejection with its reason, the files not worked on."""
    run = report.run
    out = [MARKER, "### Autopilot pre-merge: tests for the changed lines", ""]
    out.append(f"**{headline(report)}**")
    out.append("")
    if run.baseline_error:
        out += [f"Nothing generated: {_plain(run.baseline_error)}", ""]
    if run.branch:
        out.append(
            f"Accepted tests are on branch {code(run.branch)} (on top of "
            f"{code(report.changes.head[:12])}): merge it into this pull request to keep them."
        )
        out.append("")
    accepted = [o for o in run.files if o.verdict == "accepted"]
    if accepted:
        out += ["#### Accepted tests", *_listed([_accepted(o) for o in accepted]), ""]
    rejected = [o for o in run.files if o.verdict != "accepted"]
    if rejected:
        out += ["#### Not accepted", *_listed([_rejected(o) for o in rejected]), ""]
    covered = [f for f in report.changes.files if f.skipped == ALL_RAN]
    if covered:
        lines = [f"- {code(f.path)}: lines {line_ranges(f.lines)}" for f in covered]
        out += ["#### Changed lines the suite already runs", *_listed(lines), ""]
    skipped = [f for f in report.changes.files if f.skipped not in (None, ALL_RAN)]
    if skipped:
        lines = [f"- {code(f.path)}: {_plain(f.skipped or '')}" for f in skipped]
        out += ["#### Not worked on", *_listed(lines), ""]
    cut = [f for f in report.changes.files if f.cut]
    for f in cut:
        out.append(f"{code(f.path)}: {f.cut} changed line(s) past the budget were left out.")
    foot = [f"run `{run.run_id}`", f"head `{report.changes.head[:12]}`"]
    if run.archive_uri:
        foot.append(f"archive {code(run.archive_uri)}")
    if flow_run_url:
        foot.append(f"[flow run]({flow_run_url})")
    out += ["", "<sub>" + " · ".join(foot) + "</sub>"]
    return "\n".join(out) + "\n"


StatusState = Literal["success", "failure", "error"]


def status_of(report: PremergeReport) -> tuple[StatusState, str]:
    """The commit status: ``success`` when the run is done with nothing failed, ``error``
    when the baseline did not run, else ``failure``; and its description (at most 140
    characters)."""
    run = report.run
    accepted = sum(o.verdict == "accepted" for o in run.files)
    state: StatusState = "success"
    if run.baseline_error:
        state = "error"
    elif not report.passed or any(o.verdict != "accepted" for o in run.files):
        state = "failure"
    text = f"{headline(report)}; {accepted}/{len(run.files)} accepted"
    if len(text) > MAX_DESCRIPTION:
        text = text[: MAX_DESCRIPTION - 3] + "..."
    return state, text
