"""The labelled calibration cases (judge/calibration/*.yaml) and their loader.

Besides loading, each case is checked against the static rubric (exactly its expected rules) and
run for real (rspec / pytest): a case labelled as loading must pass, the does-not-load case must
fail to load, so the labels describe specs that really behave as claimed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from judge.calibration import CalibrationCase, default_cases_dir, load_cases
from judge.static import check_spec, gate_passes
from tasks.core.errors import BadInputError
from tasks.toolchains.registry import by_language

CASES = load_cases()


def test_cases_cover_the_required_kinds() -> None:
    ruby = [c for c in CASES if c.language == "ruby"]
    python = [c for c in CASES if c.language == "python"]
    assert any(c.label >= 0.8 for c in ruby), "a precise Ruby case"
    assert any(c.label in (0.4, 0.2) for c in ruby), "a vague Ruby case"
    assert any(not c.loads and c.label == 0.0 for c in ruby), "a does-not-load Ruby case"
    assert any({"over-mocking", "any-instance-mock"} & set(c.expected_rules) for c in ruby)
    assert any("private-call" in c.expected_rules and c.label == 0.0 for c in ruby)
    assert len(python) >= 2
    assert any(c.label == 1.0 for c in python) and any(c.label <= 0.2 for c in python)
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_static_rubric_finds_exactly_the_expected_rules(case: CalibrationCase) -> None:
    verdict = check_spec(case.spec_path, case.spec, by_language(case.language)())
    assert sorted(f.rule for f in verdict.findings) == case.expected_rules
    if case.loads:
        assert "syntax" not in case.expected_rules
    else:
        assert verdict.score == 0.0 and not gate_passes(verdict)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gate_agrees_with_the_label_at_the_extremes(case: CalibrationCase) -> None:
    verdict = check_spec(case.spec_path, case.spec, by_language(case.language)())
    if case.label >= 0.6:
        assert gate_passes(verdict)
    if case.label == 0.0:
        assert not gate_passes(verdict)


@pytest.mark.parametrize("language", ["ruby", "python"])
def test_static_score_orders_cases_like_their_labels(language: str) -> None:
    scored = [
        (c.label, check_spec(c.spec_path, c.spec, by_language(c.language)()).score, c.id)
        for c in CASES
        if c.language == language
    ]
    for label_a, score_a, id_a in scored:
        for label_b, score_b, id_b in scored:
            if label_a > label_b:
                assert score_a >= score_b, f"{id_a} ({label_a}) scored below {id_b} ({label_b})"


def _write_case(case: CalibrationCase, root: Path) -> None:
    files = {case.source_path: case.source, case.spec_path: case.spec, **case.extra_sources}
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BUNDLE", "RUBY", "GEM_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # The cases need no plugin; the project venv's plugins (prefect, moto...) cost seconds.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("rspec") is None, reason="rspec not installed")
@pytest.mark.parametrize("case", [c for c in CASES if c.language == "ruby"], ids=lambda c: c.id)
def test_ruby_case_behaves_as_labelled_under_rspec(case: CalibrationCase, tmp_path: Path) -> None:
    _write_case(case, tmp_path)
    out = tmp_path / "rspec.json"
    proc = _run(
        ["rspec", "-I", "lib", "--format", "json", "--out", str(out), case.spec_path], tmp_path
    )
    report = json.loads(out.read_text())
    summary = report["summary"]
    if case.loads:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert summary["errors_outside_of_examples_count"] == 0
        assert summary["example_count"] > 0 and summary["failure_count"] == 0
    else:
        assert proc.returncode != 0
        assert summary["errors_outside_of_examples_count"] == 1
        assert summary["example_count"] == 0
        assert "SyntaxError" in " ".join(report.get("messages", []))


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c.language == "python"], ids=lambda c: c.id)
def test_python_case_behaves_as_labelled_under_pytest(
    case: CalibrationCase, tmp_path: Path
) -> None:
    _write_case(case, tmp_path)
    proc = _run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", case.spec_path],
        tmp_path,
    )
    if case.loads:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert " passed" in proc.stdout and "failed" not in proc.stdout
    else:
        assert proc.returncode != 0


def _copy_cases(dest: Path) -> Path:
    dest.mkdir()
    for path in default_cases_dir().glob("*.yaml"):
        shutil.copy(path, dest / path.name)
    return dest


def _edit(path: Path, **changes: object) -> None:
    data = yaml.safe_load(path.read_text())
    data.update(changes)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_loader_reads_a_copy_and_validates(tmp_path: Path) -> None:
    cases_dir = _copy_cases(tmp_path / "cases")
    assert [c.id for c in load_cases(cases_dir)] == [c.id for c in CASES]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"label": 0.5}, "label: Value error, label 0.5 is not a rubric level"),
        ({"expected_rules": ["made-up"]}, "unknown static rules ['made-up']"),
        ({"id": "another-id"}, "id 'another-id' must equal the file name"),
        ({"spec_path": "../outside_spec.rb"}, "must be a relative path"),
        ({"language": "java"}, "language: Value error, no toolchain writes 'java' tests"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
    ],
)
def test_loader_rejects_an_invalid_case_naming_it(
    tmp_path: Path, changes: dict[str, object], reason: str
) -> None:
    cases_dir = _copy_cases(tmp_path / "cases")
    _edit(cases_dir / "ruby-vague.yaml", **changes)
    with pytest.raises(BadInputError) as err:
        load_cases(cases_dir)
    message = str(err.value)
    assert "ruby-vague.yaml" in message and reason in message
    assert "\n" not in message


def test_loader_reports_every_broken_file_at_once(tmp_path: Path) -> None:
    cases_dir = _copy_cases(tmp_path / "cases")
    (cases_dir / "ruby-precise.yaml").write_text("id: [unclosed\n")
    (cases_dir / "python-vague.yaml").write_text("- just a list\n")
    with pytest.raises(BadInputError) as err:
        load_cases(cases_dir)
    message = str(err.value)
    assert "ruby-precise.yaml: cannot read" in message
    assert "python-vague.yaml: a case must be a YAML mapping" in message


def test_loader_rejects_a_missing_or_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="calibration directory not found"):
        load_cases(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInputError, match="no calibration case"):
        load_cases(tmp_path / "empty")
