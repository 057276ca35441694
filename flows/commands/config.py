"""`autopilot config show [--repo PATH] [--set NAME=VALUE]... [--json]`: the effective settings.

Each setting with its value (secrets masked, a URL's password hidden) and where it came from:
default, autopilot.toml, environment or option (``--set``, as a command's option would). A value
of the repository's autopilot.toml that only the operator may set is shown as ignored (the JSON
row's ``ignored``: file, value, reason, only on such rows; and the document's ``ignored`` list,
with the setting's name, only when there is one).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from flows.commands.render import Column, print_lines, print_table
from tasks.core.errors import AutopilotError, BadInputError
from tasks.core.settings_view import SettingRow, effective_settings_report


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
        rows, ignored = effective_settings_report(repo, parse_sets(sets))
    except AutopilotError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    if json_out:
        doc: dict[str, Any] = {"settings": [_row(r) for r in rows]}
        if ignored:  # only when something was: the document only gains a key
            doc["ignored"] = [i.model_dump() for i in ignored]
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        sys.stdout.flush()
        return 0
    columns = [Column("setting"), Column("value", path=True), Column("source"), Column("env")]
    table = [[r.name, _value(r), _source(r), r.env] for r in rows]
    print_table("Effective settings", columns, table)
    notes = [i.line() for i in ignored]
    notes.append("secrets are masked; precedence: option > environment > autopilot.toml > default")
    print_lines(*notes)
    return 0


def _row(row: SettingRow) -> dict[str, Any]:
    """A row of the JSON document: `ignored` only where the repository's value was ignored."""
    return row.model_dump(exclude={"secret"} | ({"ignored"} if row.ignored is None else set()))


def _source(row: SettingRow) -> str:
    return f"{row.source} (autopilot.toml ignored)" if row.ignored is not None else row.source
