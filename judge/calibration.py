"""Labelled judge calibration cases: versioned YAML files under judge/calibration/.

Each file is one case: the source file under test, a spec for it, the rubric level a careful
reviewer gives that spec, and the static-rubric rules the spec must trigger. They serve three
purposes: regression tests of the static rubric, few-shot material for the judge, and a way to
measure how far an LLM judge strays from the labels (calibration).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from judge.rubric import RUBRIC_LEVELS
from judge.static import RULES
from tasks.core.errors import BadInputError
from tasks.core.resources import resource_path
from tasks.toolchains import registry


def default_cases_dir() -> Path:
    """judge/calibration/ as shipped with Autopilot (checkout or installed wheel)."""
    return resource_path("judge/calibration")


class CalibrationCase(BaseModel):
    """One labelled case.

    Attributes:
        id: Unique id, equal to the file's stem.
        version: Bumped whenever the case's code or label changes.
        language: The tests' language: a registered toolchain's (ruby for RSpec, python for
            pytest).
        label: The rubric level this spec deserves (one of RUBRIC_LEVELS).
        description: Why it deserves that level.
        notes: Anything else a reader should know (e.g. "the judge must never see this").
        loads: False when the spec cannot even load: execution gates it before any judge.
        source_path: Repository path of the file under test.
        source: Its content.
        extra_sources: Other repository files the spec needs to run (path -> content).
        spec_path: Repository path of the spec.
        spec: The spec's content.
        expected_rules: Static-rubric rule ids the spec triggers, one entry per finding.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    version: int = Field(ge=1)
    language: str
    label: float
    description: str = Field(min_length=10)
    notes: str = ""
    loads: bool = True
    source_path: str
    source: str
    extra_sources: dict[str, str] = Field(default_factory=dict)
    spec_path: str
    spec: str
    expected_rules: list[str] = Field(default_factory=list)

    @field_validator("language")
    @classmethod
    def _language_has_a_toolchain(cls, value: str) -> str:
        known = {c.language for c in registry.toolchain_classes()}
        if value not in known:
            raise ValueError(f"no toolchain writes {value!r} tests (known: {sorted(known)})")
        return value

    @field_validator("label")
    @classmethod
    def _label_is_a_level(cls, value: float) -> float:
        if value not in RUBRIC_LEVELS:
            raise ValueError(f"label {value} is not a rubric level {sorted(RUBRIC_LEVELS)}")
        return value

    @field_validator("expected_rules")
    @classmethod
    def _rules_exist(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(RULES))
        if unknown:
            raise ValueError(f"unknown static rules {unknown}")
        return sorted(value)

    @field_validator("source_path", "spec_path")
    @classmethod
    def _relative_path(cls, value: str) -> str:
        path = Path(value)
        if path.is_absolute() or ".." in path.parts or not value:
            raise ValueError(f"{value!r} must be a relative path inside the repository")
        return value


def _load_one(path: Path) -> CalibrationCase:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BadInputError(f"{path.name}: cannot read: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise BadInputError(f"{path.name}: a case must be a YAML mapping")
    try:
        case = CalibrationCase.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "case"
        raise BadInputError(f"{path.name}: {where}: {first['msg']}") from exc
    if case.id != path.stem:
        raise BadInputError(f"{path.name}: id {case.id!r} must equal the file name")
    return case


def load_cases(dir: Path | None = None) -> list[CalibrationCase]:
    """Load and validate every `*.yaml` case of a directory, sorted by id.

    Every file is checked before failing, so one error message lists every broken case.

    Args:
        dir: The cases directory; defaults to judge/calibration/.

    Returns:
        The cases.

    Raises:
        BadInputError: The directory is missing or empty, or a case is invalid (the message
            names each bad file and its reason).
    """
    root = dir or default_cases_dir()
    if not root.is_dir():
        raise BadInputError(f"{root}: calibration directory not found")
    cases: list[CalibrationCase] = []
    errors: list[str] = []
    for path in sorted(root.glob("*.yaml")):
        try:
            cases.append(_load_one(path))
        except BadInputError as exc:
            errors.append(str(exc))
    if errors:
        raise BadInputError("invalid calibration cases: " + "; ".join(errors))
    if not cases:
        raise BadInputError(f"{root}: no calibration case (*.yaml) found")
    return sorted(cases, key=lambda c: c.id)
