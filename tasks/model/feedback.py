"""The failure output a fix prompt (and a surgeon's revision) carries: exactly what the tools
said about the last run, nothing summarised away. ``autopilot eval`` reads its sections back."""

from __future__ import annotations

from tasks.core.types import ValidationResult


def format_failure_output(result: ValidationResult) -> str:
    """The exact feedback a fix prompt carries: what failed in the last validation run.

    Includes the load error, the sandbox reason, every failing example with its error type,
    message and trace, the uncovered lines of the target, and the remaining lint offences.
    Nothing is summarised away: the model must see what the tools said.

    Args:
        result: The validation run of the previous files.

    Returns:
        Plain text, one section per kind of problem; "" when nothing failed.
    """
    out: list[str] = []
    if not result.loaded:
        out.append("Load error (the test file could not be loaded):")
        out.append(result.load_error or "(no message)")
    if result.reason:
        out.append(f"Run stopped: {result.reason}")
    failing = [e for e in result.examples if e.status in ("failed", "error")]
    if result.loaded and not result.examples:
        out.append("No example ran: the file defines no test.")
    if failing:
        out.append(f"Failing examples ({len(failing)} of {len(result.examples)}):")
        for case in failing:
            where = f" ({case.file}:{case.line})" if case.file and case.line else ""
            out.append(f"- {case.id}: {case.name}{where} [{case.status}]")
            head = ": ".join(s for s in (case.error_type, case.message) if s)
            if head:
                out.append("  " + head.replace("\n", "\n  "))
            if case.trace:
                out.append("  " + case.trace.strip().replace("\n", "\n  "))
    cov = result.coverage
    if cov is not None and cov.uncovered_lines:
        lines = ", ".join(str(n) for n in cov.uncovered_lines)
        out.append(
            f"Coverage of {cov.path}: {cov.ratio:.1%} ({cov.covered_lines}/"
            f"{cov.executable_lines} lines); uncovered lines: {lines}"
        )
    if result.lint:
        out.append(f"Lint offences remaining ({len(result.lint)}):")
        out.extend(f"- {o.path}:{o.line}:{o.column} {o.rule}: {o.message}" for o in result.lint)
    return "\n".join(out)
