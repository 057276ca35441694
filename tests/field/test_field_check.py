"""scripts/field-check.sh --list: the field rehearsal's table, on a small Python project written
for this test and the bundled Rails example (both run offline), with the real tools: the audit
and the framework's own run (pytest + coverage.py, RSpec + SimpleCov) in the same prepared run
and sandbox, one row each."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.field_repos import write_tree
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.slow

TALLY = {
    "pyproject.toml": '[project]\nname = "tally"\nversion = "1.0"\n',
    "src/tally/__init__.py": "",
    "src/tally/counter.py": (
        "def count(words):\n    out = {}\n    for w in words:\n"
        "        out[w] = out.get(w, 0) + 1\n    return out\n"
    ),
    # Only data: its lines run when it is loaded, whoever loads it.
    "src/tally/labels.py": 'TITLE = "Words"\nSEPARATOR = ": "\n',
    "src/tally/report.py": (
        "from tally.counter import count\nfrom tally.labels import SEPARATOR, TITLE\n\n\n"
        "def report(text):\n    counts = count(text.split())\n"
        "    lines = [f'{w}{SEPARATOR}{n}' for w, n in sorted(counts.items())]\n"
        "    return '\\n'.join([TITLE, *lines])\n"
    ),
    "tests/test_counter.py": (
        "from tally.counter import count\n\n\ndef test_counts_each_word():\n"
        "    assert count(['a', 'b', 'a']) == {'a': 2, 'b': 1}\n"
    ),
    # Named after no module: report.py is tested through what this file runs.
    "tests/test_summary.py": (
        "from tally.report import report\n\n\ndef test_report_lists_words_in_order():\n"
        "    assert report('b a b') == 'Words\\na: 1\\nb: 2'\n"
    ),
}


def _rows(table: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split(" | ") for line in table.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells] for cells in rows[1:]}


def test_the_list_prints_one_row_per_project_against_the_frameworks_own_run(
    tmp_path: Path,
) -> None:
    write_tree(tmp_path / "tally", TALLY)
    listing = tmp_path / "projects.txt"
    listing.write_text(
        f"# a comment\ntally  dir:{tmp_path / 'tally'}  # ours\n"
        "rails_shop dir:examples/rails_shop\n"
    )
    work = tmp_path / "work"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}

    script = str(REPO_ROOT / "scripts" / "field-check.sh")
    done = subprocess.run(
        ["bash", script, "--list", str(listing), "--work", str(work)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    rows = _rows(done.stdout)
    assert list(rows) == ["tally", "rails_shop"], done.stdout
    tally = rows["tally"]
    # project, stack, ran, ours, theirs, same, coverage agrees, exercised: untested,
    # declarations only, seconds
    assert tally[1:8] == ["python-pytest", "yes", "2: 2/0/0", "2: 2/0/0", "=", "3/3", "2: 0"]
    assert tally[8] == "1", done.stdout  # labels.py: loaded, no function body
    assert (work / "out" / "tally" / "declarations.txt").read_text() == "src/tally/labels.py\n"
    shop = rows["rails_shop"]
    assert shop[1:6] == ["ruby-rspec", "yes", "14: 14/0/0", "14: 14/0/0", "="], done.stdout
    agree, compared = shop[6].split("/")
    assert agree == compared and int(compared) > 0
    assert shop[7].endswith(": 0"), done.stdout  # every exercised source mapped or evidenced
    for name in ("tally", "rails_shop"):
        kept = work / "out" / name
        assert {"map.json", "audit.json", "reference.json"} <= {p.name for p in kept.iterdir()}
        assert (kept / "misses.txt").read_text() == ""
        assert (kept / "differ.txt").read_text() == ""
