"""Nightly report pieces without tools: merging accepted files, exit codes, the outcome store and
its content key, the archive of one file's exchanges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.core.config import load_settings
from tasks.generate.cache import OutcomeStore, outcome_key
from tasks.generate.context import FileText, PromptContext
from tasks.generate.report import (
    NO_MODEL,
    NightlyReport,
    archive_outcome,
    markdown_summary,
    merge_accepted,
    table_rows,
)
from tasks.generate.skills import choose_skill
from tasks.generate.targets import Target
from tasks.generate.types import Exchange, FileOutcome
from tasks.keep.archive import open_archive
from tasks.toolchains.registry import get_toolchain


def _outcome(source: str, verdict: str, files: dict[str, str] | None = None) -> FileOutcome:
    return FileOutcome(
        source=source,
        kind="model",
        spec=source.replace("app/", "spec/").replace(".rb", "_spec.rb"),
        verdict=verdict,  # type: ignore[arg-type]
        files=files or {},
        tokens=10,
    )


def test_merge_commits_accepted_files_only_and_refuses_conflicting_factories() -> None:
    a = _outcome("app/models/a.rb", "accepted", {"spec/a_spec.rb": "A", "spec/factories/x.rb": "X"})
    b = _outcome("app/models/b.rb", "rejected", {"spec/b_spec.rb": "B"})
    c = _outcome("app/models/c.rb", "accepted", {"spec/c_spec.rb": "C", "spec/factories/x.rb": "Y"})
    d = _outcome("app/models/d.rb", "accepted", {"spec/d_spec.rb": "D", "spec/factories/x.rb": "X"})

    merged = merge_accepted([a, b, c, d], prefix="sub")

    assert merged == {
        "sub/spec/a_spec.rb": b"A",
        "sub/spec/factories/x.rb": b"X",
        "sub/spec/d_spec.rb": b"D",
    }
    assert c.verdict == "error"
    assert c.reasons == [
        "sub/spec/factories/x.rb: also written for app/models/a.rb with other content; "
        "not committed"
    ]
    assert d.verdict == "accepted"  # the same factory content is no conflict


@pytest.mark.parametrize(
    ("verdicts", "code"),
    [
        (["accepted", "skipped"], 0),
        ([], 0),
        (["accepted", "rejected"], 1),
        (["error"], 1),
        (["budget"], 1),
    ],
)
def test_exit_code(verdicts: list[str], code: int) -> None:
    files = []
    for i, v in enumerate(verdicts):
        out = _outcome(f"app/models/m{i}.rb", "skipped" if v == "budget" else v)
        if v == "skipped":
            out.reasons = [NO_MODEL]
        if v == "budget":
            out.reasons = ["model call budget of 3 calls exhausted"]
        files.append(out)
    report = NightlyReport(run_id="r", repo="/x", base_commit="c" * 40, files=files)
    assert report.exit_code() == code


def test_table_and_summary_name_the_failed_gate() -> None:
    out = _outcome("app/models/a.rb", "rejected")
    out.gate, out.reasons, out.coverage_before, out.coverage_after = (
        "coverage",
        ["coverage 50% < 90%", "uncovered lines: 3, 4"],
        0.25,
        0.5,
    )
    report = NightlyReport(run_id="r", repo="/x", base_commit="c" * 40, files=[out])
    [row] = table_rows(report.files)
    assert row["failed gate"] == "coverage"
    assert (row["coverage before"], row["coverage after"], row["judge score"]) == (
        "25%",
        "50%",
        "-",
    )
    assert "`app/models/a.rb`: rejected at coverage: coverage 50% < 90%" in markdown_summary(report)


TARGET = Target(
    source="app/models/customer.rb",
    kind="model",
    spec="spec/models/customer_spec.rb",
    reason="untested",
    coverage_before=0.0,
)
CONTEXT = PromptContext(
    language="ruby",
    source="class Customer; end\n",
    context_files=[FileText(path="spec/factories/customers.rb", text="factory\n")],
    versions={"rails": "6.1.7"},
)


def test_outcome_key_changes_with_every_input_it_depends_on() -> None:
    settings = load_settings(None)
    skill = choose_skill(TARGET.source, TARGET.kind)
    base = {
        "target": TARGET,
        "context": CONTEXT,
        "skill": skill,
        "toolchain": "ruby-rspec",
        "toolchain_config": "c" * 64,
        "settings": settings,
        "max_iterations": 4,
    }
    key = outcome_key(**base)  # type: ignore[arg-type]
    assert outcome_key(**base) == key  # type: ignore[arg-type]
    variants = [
        {"context": CONTEXT.model_copy(update={"source": "class Customer; def x; end; end\n"})},
        {
            "context": CONTEXT.model_copy(
                update={"context_files": [FileText(path="spec/factories/customers.rb", text="2")]}
            )
        },
        {"settings": load_settings(None, {"models.generator": "other-model"})},
        {"settings": load_settings(None, {"gates.min_judge": 0.8})},
        {"max_iterations": 2},
        {"toolchain_config": "d" * 64},
        {"skill": choose_skill("lib/x.rb", "ruby")},
    ]
    keys = {outcome_key(**(base | v)) for v in variants}  # type: ignore[arg-type]
    assert key not in keys and len(keys) == len(variants)


def test_toolchain_config_digest_follows_the_project_tool_configuration(tmp_path: Path) -> None:
    ruby = get_toolchain("ruby-rspec")
    empty = ruby.config_digest(tmp_path)
    (tmp_path / ".rubocop.yml").write_text("AllCops:\n  NewCops: enable\n")
    with_config = ruby.config_digest(tmp_path)
    (tmp_path / "app.rb").write_text("class App; end\n")  # source is the context's business
    assert ruby.config_digest(tmp_path) == with_config != empty
    (tmp_path / ".rubocop.yml").write_text("AllCops:\n  NewCops: disable\n")
    assert ruby.config_digest(tmp_path) not in (with_config, empty)
    # The same project files under another toolchain are another configuration.
    assert get_toolchain("python-pytest").config_digest(tmp_path) != empty


def test_store_keeps_decisions_only_and_survives_damage(tmp_path: Path) -> None:
    store = OutcomeStore(tmp_path / "cache")
    key = "a" * 64
    accepted = _outcome("app/models/a.rb", "accepted", {"spec/a_spec.rb": "A"})
    assert store.get(key) is None
    assert store.put(key, accepted) is True
    hit = store.get(key)
    assert hit is not None and hit.cached and hit.tokens == 0
    assert hit.files == {"spec/a_spec.rb": "A"}
    assert store.put("b" * 64, _outcome("app/models/b.rb", "error")) is False
    assert store.get("b" * 64) is None
    (tmp_path / "cache" / f"{key}.json").write_text("{not json", encoding="utf-8")
    assert store.get(key) is None
    with pytest.raises(ValueError, match="invalid cache key"):
        store.get("../../etc/passwd")


def test_archive_of_one_file_keeps_every_prompt_reply_and_generated_file(tmp_path: Path) -> None:
    out = _outcome("app/models/a.rb", "accepted", {"spec/models/a_spec.rb": "it\n"})
    out.exchanges = [
        Exchange(
            iteration=1,
            prompt_name="generate",
            prompt_version="1.0.0",
            prompt_sha256="0" * 64,
            messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "usr"}],
            replies=["first reply", "re-asked reply"],
        )
    ]
    run = open_archive(str(tmp_path)).run("nightly", "run-1")
    archive_outcome(run, out)
    manifest = run.finalize()
    keys = {o.key for o in manifest.objects}
    base = "files/app__models__a.rb"
    assert keys == {
        f"{base}/round-1-generate-prompt.md",
        f"{base}/round-1-generate-reply-1.md",
        f"{base}/round-1-generate-reply-2.md",
        f"{base}/generated/spec/models/a_spec.rb",
        f"{base}/verdict.json",
    }
    root = tmp_path / "nightly" / run.date / "run-1"
    assert (
        root / base / "round-1-generate-prompt.md"
    ).read_text() == "## system\n\nsys\n\n## user\n\nusr\n"
    verdict = json.loads((root / base / "verdict.json").read_text())
    assert verdict["verdict"] == "accepted" and verdict["files"] == ["spec/models/a_spec.rb"]


def test_archive_holds_the_quality_chart_and_the_summary_links_it(tmp_path: Path) -> None:
    import datetime as dt

    from tasks.generate.report import archive_run

    out = _outcome("app/models/a.rb", "accepted")
    out.coverage_before, out.coverage_after, out.judge_score = 0.2, 0.95, 0.8
    report = NightlyReport(run_id="run-1", repo="/x", base_commit="c" * 40, files=[out])
    archive_run(report, None, [], str(tmp_path / "archive"), dt.date(2026, 12, 1))
    assert report.chart_uri is not None and report.chart_uri.endswith("quality-by-kind.png")
    run_dir = tmp_path / "archive/nightly/2026-12-01/run-1"
    png = (run_dir / "quality-by-kind.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert "quality-by-kind.png" in {o["key"] for o in manifest["objects"]}
    assert report.chart_uri in (run_dir / "summary.md").read_text()
