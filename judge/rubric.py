"""Load judge/rubric.md, the single source of the scoring levels, into a typed Rubric.

The markdown is written for a model to read; this module makes the same file machine-readable:
the YAML front matter gives the version and the "Levels" table gives score -> meaning.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict

from tasks.core.errors import BadInputError
from tasks.core.resources import resource_path

#: The scores the rubric must define, exactly (MISSION.md "The judge rubric").
RUBRIC_LEVELS: frozenset[float] = frozenset({1.0, 0.8, 0.6, 0.4, 0.2, 0.0})


def default_rubric_path() -> Path:
    """judge/rubric.md as shipped with Autopilot (checkout or installed wheel)."""
    return resource_path("judge/rubric.md")


_LEVELS_HEADING = "## levels"
_STATIC_GATE_HEADING = "## static gate"
_GATE_RULE = re.compile(r"^- `([a-z][a-z0-9-]*)`")


class Rubric(BaseModel):
    """The parsed rubric.

    Attributes:
        text: The markdown body (front matter removed): what a judge prompt embeds.
        version: The front matter's version, recorded with every judge verdict.
        sha256: Hash of the whole file, so a changed rubric changes cache keys.
        levels: Score -> meaning, exactly the levels in RUBRIC_LEVELS.
        static_gate: The static rule ids the `static` gate rejects by default (the bullets of
            the "Static gate" section; `gates.static_reject` overrides them).
    """

    model_config = ConfigDict(frozen=True)

    text: str
    version: str
    sha256: str
    levels: dict[float, str]
    static_gate: tuple[str, ...] = ()

    def nearest_level(self, score: float) -> float:
        """Snap a score to the closest rubric level (a tie goes to the upper level).

        Ties go up so that snapping never changes a gate decision at a threshold between two
        levels: the default ``min_judge`` 0.7 lies between 0.6 and 0.8, and a judge answering
        exactly 0.7 reaches it, as the raw score does.

        Args:
            score: Any number; values outside 0..1 snap to the nearest end.

        Returns:
            One of the rubric's levels.
        """
        # Distances rounded: 0.7 - 0.6 and 0.8 - 0.7 differ in binary floating point.
        return min(
            sorted(self.levels, reverse=True), key=lambda level: round(abs(level - score), 9)
        )


def _split_front_matter(raw: str, name: str) -> tuple[dict[str, object], str]:
    lines = raw.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise BadInputError(f"{name}: rubric has no YAML front matter")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            try:
                meta = yaml.safe_load("".join(lines[1:i])) or {}
            except yaml.YAMLError as exc:
                reason = str(exc).splitlines()[0]
                raise BadInputError(f"{name}: invalid front matter: {reason}") from exc
            if not isinstance(meta, dict):
                raise BadInputError(f"{name}: front matter is not a mapping")
            return meta, "".join(lines[i + 1 :])
    raise BadInputError(f"{name}: front matter is not closed by '---'")


def _parse_levels(body: str, name: str) -> dict[float, str]:
    """Read the two-column table under the "## Levels" heading."""
    levels: dict[float, str] = {}
    in_section = False
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("## "):
            in_section = stripped.lower() == _LEVELS_HEADING
            continue
        if not in_section or not stripped.startswith("|"):
            continue
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if len(cells) != 2:
            raise BadInputError(f"{name}: levels row needs 2 cells: {stripped}")
        try:
            score = float(cells[0])
        except ValueError:
            continue  # the header row and the |---| separator
        if score in levels:
            raise BadInputError(f"{name}: level {score} defined twice")
        levels[score] = cells[1]
    if set(levels) != RUBRIC_LEVELS:
        found = sorted(levels, reverse=True)
        raise BadInputError(
            f"{name}: levels must be exactly {sorted(RUBRIC_LEVELS, reverse=True)}, found {found}"
        )
    return levels


def _parse_static_gate(body: str, name: str) -> tuple[str, ...]:
    """The rule ids listed (one bullet each, "- `rule-id`: why") under "## Static gate"."""
    rules: list[str] = []
    in_section = False
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("## "):
            in_section = stripped.lower() == _STATIC_GATE_HEADING
            continue
        if in_section and (match := _GATE_RULE.match(stripped)):
            rules.append(match.group(1))
    if not rules:
        raise BadInputError(f"{name}: the 'Static gate' section lists no rule")
    return tuple(dict.fromkeys(rules))


def load_rubric(path: Path | None = None) -> Rubric:
    """Load and validate the rubric.

    Args:
        path: A rubric markdown file; defaults to judge/rubric.md beside this module.

    Returns:
        The parsed Rubric.

    Raises:
        BadInputError: The file is missing, has no version, or its levels are not exactly
            1.0, 0.8, 0.6, 0.4, 0.2 and 0.0.
    """
    path = path or default_rubric_path()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read rubric: {exc.strerror}") from exc
    raw = data.decode("utf-8")
    meta, body = _split_front_matter(raw, str(path))
    version = meta.get("version")
    if not isinstance(version, str | int | float) or isinstance(version, bool):
        raise BadInputError(f"{path}: front matter needs a version")
    return Rubric(
        text=body.strip() + "\n",
        version=str(version),
        sha256=hashlib.sha256(data).hexdigest(),
        levels=_parse_levels(body, str(path)),
        static_gate=_parse_static_gate(body, str(path)),
    )
