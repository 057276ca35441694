"""`autopilot config show [--repo PATH] [--set NAME=VALUE]... [--json]`: the effective settings.

Each setting with its value (secrets masked, a URL's password hidden) and where it came from:
default, autopilot.toml, environment or option (``--set``, as a command's option would).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from flows.commands.render import Column, print_lines, print_table
from tasks.core.errors import AutopilotError, BadInputError
from tasks.core.settings_view import SettingRow, effective_settings


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """``NAME=VALUE`` options as overrides; a VALUE that reads as JSON is taken as JSON."""
    overrides: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            raise BadInputError(f"--set {pair!r}: expected NAME=VALUE, e.g. gates.min_judge=0.8")
        try:
            overrides[name.strip()] = json.loads(raw)
        except ValueError:
            overrides[name.strip()] = raw
    return overrides


def _value(row: SettingRow) -> str:
    if row.value is None:
        return "(unset)"
    return row.value if isinstance(row.value, str) else json.dumps(row.value)


def run(repo: Path | None, sets: list[str], json_out: bool) -> int:
    """Print the effective settings and their sources.

    Returns:
        0 when the settings load; 2 when they do not (one line on stderr).
    """
    try:
        if repo is not None and not repo.is_dir():
            raise BadInputError(f"{repo}: not a directory")
        rows = effective_settings(repo, parse_sets(sets))
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    if json_out:
        doc = {"settings": [r.model_dump(exclude={"secret"}) for r in rows]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        sys.stdout.flush()
        return 0
    columns = [Column("setting"), Column("value", path=True), Column("source"), Column("env")]
    print_table("Effective settings", columns, [[r.name, _value(r), r.source, r.env] for r in rows])
    print_lines("secrets are masked; precedence: option > environment > autopilot.toml > default")
    return 0
