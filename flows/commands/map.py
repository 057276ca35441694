"""`autopilot map --repo PATH [--json]`: source -> spec mapping, file kinds, untested files.

No Prefect import: mapping is a quick read-only look at a repository. The toolchain comes from
the settings (``AUTOPILOT_TOOLCHAIN`` or the repository's autopilot.toml) when set, else it is
detected from the repository's files.
"""

from __future__ import annotations

import sys
from pathlib import Path

from flows.commands.render import Column, print_lines, print_table
from tasks.core.config import load_settings
from tasks.core.errors import BadInputError
from tasks.core.types import Mapping
from tasks.toolchains.mapping import map_repo


def _print_table(mapping: Mapping) -> None:
    columns = [Column("source", path=True), Column("kind"), Column("specs", path=True)]
    columns.append(Column("status", style={"tested": "green", "untested": "yellow"}))
    rows = [
        [
            f.source,
            f.kind,
            f.specs or [f"new: {f.expected_spec}"],
            "tested" if f.specs else "untested",
        ]
        for f in mapping.files
    ]
    print_table(f"Source -> spec mapping ({mapping.toolchain})", columns, rows)
    print_lines(f"{len(mapping.files)} files, {len(mapping.untested)} untested")
    print_lines(*(f"warning: {w}" for w in mapping.warnings))


def run(repo: Path, json_out: bool) -> int:
    """Map a repository's sources to their specs and print the result.

    Args:
        repo: The target repository.
        json_out: Print one JSON document ``{"toolchain", "files", "untested", "warnings"}``
            on stdout, each file being ``{"source", "kind", "specs", "expected_spec"}``.

    Returns:
        0 when mapped; 2 when the repository cannot be used (one line on stderr).
    """
    try:
        if not repo.is_dir():
            raise BadInputError(f"{repo}: not a directory")
        mapping = map_repo(repo, load_settings(repo).toolchain)
    except BadInputError as exc:
        print(f"autopilot: error: {exc}", file=sys.stderr)
        return 2
    if json_out:
        sys.stdout.write(mapping.model_dump_json(indent=2) + "\n")
        sys.stdout.flush()
    else:
        _print_table(mapping)
    return 0
