"""Target choice: untested first, then failing/low coverage, then weak static score; globs, caps."""

from __future__ import annotations

import pytest

from tasks.audit.report import AuditFile, AuditReport, AuditSummary
from tasks.core.errors import BadInputError
from tasks.core.types import MappedFile, Mapping
from tasks.generate.targets import choose_targets


def _file(source: str, status: str, coverage: float, static: float | None = None) -> AuditFile:
    specs = [] if status == "untested" else [f"spec/{source.split('/')[-1][:-3]}_spec.rb"]
    return AuditFile(
        source=source,
        kind="model",
        specs=specs,
        status=status,  # type: ignore[arg-type]
        coverage=coverage,
        uncovered_lines=[3, 4] if coverage < 1 else [],
        static_score=static,
    )


FILES = [
    _file("app/models/good.rb", "tested", 1.0, 1.0),
    _file("app/models/weak.rb", "tested", 0.95, 0.4),
    _file("app/models/low.rb", "tested", 0.5, 1.0),
    _file("app/models/lower.rb", "tested", 0.2, 1.0),
    _file("app/models/new_b.rb", "untested", 0.0),
    _file("app/models/new_a.rb", "untested", 0.3),
    _file("app/models/broken.rb", "failing", 0.9, 1.0),
    _file("lib/tool.rb", "untested", 0.0),
]
REPORT = AuditReport(
    repo="r",
    commit="c" * 40,
    toolchain="ruby-rspec",
    summary=AuditSummary(files=8, untested=3, line_coverage=0.5, specs_passing=4, specs_failing=1),
    files=FILES,
)
MAPPING = Mapping(
    toolchain="ruby-rspec",
    files=[
        MappedFile(
            source=f.source,
            kind=f.kind,
            specs=f.specs,
            expected_spec="spec/models/" + f.source.split("/")[-1][:-3] + "_spec.rb",
        )
        for f in FILES
    ],
    untested=[f.source for f in FILES if f.status == "untested"],
)


def test_order_untested_then_failing_or_low_coverage_then_weak_static() -> None:
    targets = choose_targets(REPORT, MAPPING, min_coverage=0.9, min_static=0.7)
    assert [(t.source, t.reason) for t in targets] == [
        ("app/models/new_b.rb", "untested"),
        ("lib/tool.rb", "untested"),
        ("app/models/new_a.rb", "untested"),
        ("app/models/lower.rb", "low-coverage"),
        ("app/models/low.rb", "low-coverage"),
        ("app/models/broken.rb", "failing"),
        ("app/models/weak.rb", "weak-static"),
    ]
    # A fully covered, statically clean file is never a target.
    assert "app/models/good.rb" not in [t.source for t in targets]


def test_spec_path_is_the_existing_spec_or_the_mapped_new_one() -> None:
    by = {t.source: t for t in choose_targets(REPORT, MAPPING, min_coverage=0.9, min_static=0.7)}
    assert by["app/models/new_a.rb"].spec == "spec/models/new_a_spec.rb"
    assert by["app/models/new_a.rb"].coverage_before == 0.3
    assert by["app/models/low.rb"].spec == "spec/low_spec.rb"
    assert by["app/models/low.rb"].uncovered_lines == [3, 4]


def test_thresholds_decide_membership() -> None:
    lenient = choose_targets(REPORT, MAPPING, min_coverage=0.4, min_static=0.3)
    assert [t.source for t in lenient if t.reason != "untested"] == [
        "app/models/lower.rb",
        "app/models/broken.rb",
    ]


def test_only_globs_are_repeatable_and_max_files_cuts_after_ordering() -> None:
    targets = choose_targets(
        REPORT,
        MAPPING,
        min_coverage=0.9,
        min_static=0.7,
        only=["lib/**", "app/models/low*.rb"],
        max_files=2,
    )
    assert [t.source for t in targets] == ["lib/tool.rb", "app/models/lower.rb"]
    assert choose_targets(REPORT, MAPPING, min_coverage=0.9, min_static=0.7, max_files=0) == []


def test_bad_options_are_bad_input() -> None:
    with pytest.raises(BadInputError, match="max-files"):
        choose_targets(REPORT, MAPPING, min_coverage=0.9, min_static=0.7, max_files=-1)
    with pytest.raises(BadInputError, match="empty glob"):
        choose_targets(REPORT, MAPPING, min_coverage=0.9, min_static=0.7, only=[" "])
