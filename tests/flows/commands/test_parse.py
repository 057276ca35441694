"""`autopilot parse` end to end, as a subprocess of the installed console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.facts.reports.read import parse_reports
from tests.paths import REPO_ROOT, TESTS

ROOT = REPO_ROOT
AUTOPILOT = ROOT / ".venv" / "bin" / "autopilot"
FIXTURES = TESTS / "fixtures" / "reports"

CASE_KEYS = {
    "id",
    "name",
    "classname",
    "file",
    "line",
    "status",
    "duration",
    "message",
    "error_type",
    "trace",
    "locations",
    "other_results",
    "duplicate_of",
}


def autopilot(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # a wide table: ids are not folded
    return subprocess.run(
        [str(AUTOPILOT), "parse", *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.slow
def test_json_document_matches_the_library(tmp_path: Path) -> None:
    reports = [FIXTURES / "surefire.xml", FIXTURES / "nested.xml", FIXTURES / "jest-junit.xml"]
    done = autopilot("--json", *map(str, reports))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert list(doc) == ["summary", "cases", "errors"]
    assert doc["errors"] == []
    assert list(doc["summary"]) == [
        "tests",
        "passed",
        "failed",
        "errors",
        "skipped",
        "duration",
        "duplicates",
    ]
    assert all(set(case) == CASE_KEYS for case in doc["cases"])
    # The streamed output is exactly what the typed models dump (the CLI skips validation).
    expected = json.loads(parse_reports(reports).model_dump_json())
    assert doc["summary"] == expected["summary"]
    assert doc["cases"] == expected["cases"]
    assert doc["summary"]["tests"] == 12
    failed = next(c for c in doc["cases"] if c["name"] == "totalIncludesTax")
    assert failed["locations"][1] == {"path": "com/example/shop/CartTest.java", "line": 31}


@pytest.mark.slow
def test_bad_file_exits_2_with_one_line_per_file_and_keeps_the_rest(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.xml"
    truncated.write_text('<testsuite><testcase name="a"/><testcase name="b"')
    missing = tmp_path / "missing.xml"
    done = autopilot("--json", str(FIXTURES / "ant.xml"), str(truncated), str(missing))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"autopilot: error: {truncated}: malformed or truncated JUnit XML")
    assert lines[1] == f"autopilot: error: {missing}: no such file"
    doc = json.loads(done.stdout)
    assert doc["summary"]["tests"] == 3  # ant.xml only: the truncated file's cases are dropped
    assert [c["name"] for c in doc["cases"]] == ["testEmpty", "testNested", "testNull"]
    assert doc["errors"] == [
        {"file": str(truncated), "error": lines[0].split(f"{truncated}: ", 1)[1]},
        {"file": str(missing), "error": "no such file"},
    ]


@pytest.mark.slow
def test_only_bad_files_gives_an_empty_valid_document(tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_bytes(b"\x00\x01\x02binary")
    done = autopilot("--json", str(junk))
    assert done.returncode == 2
    doc = json.loads(done.stdout)
    assert doc["cases"] == [] and doc["summary"]["tests"] == 0
    assert done.stderr.strip() == (
        f"autopilot: error: {junk}: not a JUnit XML or RSpec JSON report (binary data)"
    )


@pytest.mark.slow
def test_human_readable_output_lists_failures_and_summary() -> None:
    done = autopilot(str(FIXTURES / "ant.xml"), str(FIXTURES / "gradle.xml"))
    assert done.returncode == 0, done.stderr
    assert "com.acme.ParserTest::testNested" in done.stdout
    assert "java.lang.NullPointerException" in done.stdout
    assert "2 report(s): 6 tests, 2 passed, 2 failed, 1 errors, 1 skipped" in done.stdout
    assert done.stderr == ""


@pytest.mark.slow
def test_parse_does_not_import_prefect(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom flows.cli import app\n"
        "try:\n    app(['parse', '--json', sys.argv[1]])\nexcept SystemExit:\n    pass\n"
        "assert 'prefect' not in sys.modules, 'prefect imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(FIXTURES / "ant.xml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_fast_case_json_is_byte_identical_to_the_encoder() -> None:
    from tasks.facts.reports.json_out import case_json
    from tasks.facts.reports.read import iter_records

    records = [
        r for name in ("surefire.xml", "nested.xml", "jest-junit.xml")
        for r in iter_records(FIXTURES / name)
    ]  # fmt: skip
    records.append(dict(records[0], id='quote " \\ caf\u00e9 \u2603', line=7, file="a/b.py"))
    for record in records:
        del record["stdout"], record["stderr"]
        assert case_json(record) == json.dumps(record)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["--json", "ant.xml", "gradle.xml"],
        ["ant.xml", "--json", "missing.xml"],
        ["ant.xml", "nested.xml"],
        ["surefire.xml"],
    ],
)
def test_fast_start_prints_exactly_what_the_typer_cli_prints(args: list[str]) -> None:
    argv = ["parse", *[a if a.startswith("-") else str(FIXTURES / a) for a in args]]
    env = {**os.environ, "COLUMNS": "200"}
    fast = subprocess.run(
        [str(AUTOPILOT), *argv], capture_output=True, text=True, timeout=120, env=env
    )
    typer_cli = subprocess.run(
        [sys.executable, "-m", "flows.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        typer_cli.returncode,
        typer_cli.stdout,
        typer_cli.stderr,
    )


@pytest.mark.slow
def test_fast_start_imports_neither_typer_nor_pydantic_nor_rich() -> None:
    code = (
        "import sys\nfrom flows.entry import main\n"
        "sys.argv = ['autopilot', 'parse', '--json', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "loaded = {'typer', 'pydantic', 'rich', 'prefect'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(FIXTURES / "ant.xml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_other_forms_go_to_typer() -> None:
    from flows.entry import fast_parse_args

    assert fast_parse_args(["--json", "a.xml"]) == ([Path("a.xml")], True)
    for args in ([], ["--json"], ["--help"], ["a.xml", "-v"], ["--", "a.xml"], ["-"]):
        assert fast_parse_args(args) is None


CORPUS = TESTS / "data" / "reports"


@pytest.mark.slow
def test_json_equals_the_typed_models_on_the_whole_corpus(tmp_path: Path) -> None:
    """The lean JSON path (passing cases as tuples, ids claimed per batch) against the typed
    models, on every dialect at once: duplicates across files, multi-result cases, disabled
    tests, and a broken file (the entity one) that must contribute nothing."""
    reports = sorted(p for p in CORPUS.iterdir() if p.name != "expected.json" and p.is_file())
    reports = [p for p in reports if p.suffix in (".xml", ".json")]
    reports += reports[:3]  # the same files again: every case a duplicate
    done = autopilot("--json", *map(str, reports))
    doc = json.loads(done.stdout)
    expected = json.loads(parse_reports(reports).model_dump_json())
    assert doc == expected
    assert doc["summary"]["duplicates"] > 10
    assert done.returncode == (2 if expected["errors"] else 0)


def test_rows_write_what_their_records_write() -> None:
    from tasks.facts.reports.cases import expand
    from tasks.facts.reports.json_out import case_json, cases_json, row_json

    rows = [
        ("a::b", "b", "a", None, None, 0.25),
        ('q"\\ caf\u00e9', "n\n", "", "x/y.py", 7, 0.0),
        ("z", "z", "", None, 0, -0.0),  # -0.0 is written as -0.0 by json, never cached as 0.0
        ("big", "big", "", None, None, 1e300),
        ("inf", "inf", "", None, None, float("inf")),  # json writes Infinity
    ]
    for row in rows * 2:  # twice: the cached texts must not change the output
        record = expand(row)
        assert row_json(row) == case_json(record) == _dumps_without_output(record)
    batch = [*rows, expand(rows[0])]
    assert cases_json(batch) == "".join(
        ",\n" + _dumps_without_output(expand(c) if isinstance(c, tuple) else c) for c in batch
    )
    assert cases_json([]) == ""


def _dumps_without_output(record: dict[str, object]) -> str:
    return json.dumps({k: v for k, v in record.items() if k not in ("stdout", "stderr")})
