"""`autopilot map --repo PATH [--json]`: source -> spec mapping, file kinds, untested files.

No Prefect import: mapping is a quick read-only look at a repository. The toolchain comes from
the settings (``AUTOPILOT_TOOLCHAIN`` or the repository's autopilot.toml) when set, else it is
detected from the repository's files.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tasks.core.config import load_settings
from tasks.core.errors import BadInputError
from tasks.core.types import Mapping
from tasks.toolchains.mapping import map_repo


def _print_table(mapping: Mapping) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    table = Table(title=f"Source -> spec mapping ({mapping.toolchain})")
    for column in ("source", "kind", "specs", "status"):
        table.add_column(column, overflow="fold")
    for f in mapping.files:
        # Text, not markup: file names come from the repository and may contain "[".
        specs = Text("\n".join(f.specs)) if f.specs else Text(f"new: {f.expected_spec}", "dim")
        status = "tested" if f.specs else "untested"
        table.add_row(Text(f.source), f.kind, specs, status)
    console.print(table)
    console.print(f"{len(mapping.files)} files, {len(mapping.untested)} untested", markup=False)
    for warning in mapping.warnings:
        console.print(f"warning: {warning}", markup=False)


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
