"""The CLI's JSON documents, per command, against recorded ones: same keys, same order, same
types, same values where a value does not vary by run.

Each command runs on the bundled examples (the model is the scripted server); what varies by
run (run ids, times, durations, temporary paths, commit shas) is normalised before comparing.
A document changes only on purpose: set ``RECORD_GOLDEN=1`` to record them again,
and say why in the commit (DESIGN.md keeps the JSON shapes a public contract).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.examples_repo import git, make_example_repo
from tests.fakes.mistral_server import MistralServer, RecordedRequest, Rule, ok
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.paths import TESTS

GOLDEN = TESTS / "data" / "golden"
RECORD = os.environ.get("RECORD_GOLDEN") == "1"
AUTOPILOT = str(Path(sys.executable).with_name("autopilot"))
REPORTS = TESTS / "data" / "reports"
TOKENS = {"prompt_tokens": 100, "completion_tokens": 10}

_SHA = re.compile(r"\b[0-9a-f]{40}\b")
_SHORT_SHA = re.compile(r"\b(autopilot/(?:fix|premerge)-)[0-9a-f]{7,12}\b")
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_STAMP = re.compile(r"\b\d{8}T\d{6}\d*Z\b")
#: A temporary directory Autopilot made (tempfile's random part).
_SCRATCH = re.compile(r"/tmp/autopilot-[a-z]+-[a-z0-9_]+")
#: Keys whose numbers are measured times.
_TIMED = ("duration", "latency", "mean_time_to_fix")


def _normal(value: Any, key: str, roots: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _normal(v, k, roots) for k, v in value.items()}
    if isinstance(value, list):
        items = [_normal(v, key, roots) for v in value]
        if key == "examples":  # a run's examples come in the runner's (random) order
            items.sort(key=lambda e: str(e.get("id")) if isinstance(e, dict) else str(e))
        return items
    if isinstance(value, float) and any(t in key for t in _TIMED):
        return "<seconds>"
    if isinstance(value, str):
        for path, name in roots.items():
            value = value.replace(path, name)
        value = _SCRATCH.sub("<scratch>", value)
        value = _UUID.sub("<uuid>", _SHA.sub("<sha>", value))
        value = _SHORT_SHA.sub(r"\1<sha7>", value)
        return _STAMP.sub("<stamp>", _DATE.sub("<date>", value))
    return value


def normalise(doc: Any, roots: dict[str, str]) -> Any:
    """`doc` with run-dependent values replaced by placeholders (`roots`: path -> name)."""
    longest_first = dict(sorted(roots.items(), key=lambda item: -len(item[0])))
    return _normal(doc, "", longest_first)


def shape(doc: Any) -> Any:
    """Keys in order and value types: what a consumer of the document relies on."""
    if isinstance(doc, dict):
        return [[k, shape(v)] for k, v in doc.items()]
    if isinstance(doc, list):
        return [shape(v) for v in doc]
    return type(doc).__name__


def check(name: str, doc: Any, roots: dict[str, str]) -> None:
    """Compare `doc` (normalised) with ``tests/data/golden/<name>.json``: shape first (keys,
    order, types), then the values."""
    got = normalise(doc, roots)
    path = GOLDEN / f"{name}.json"
    if RECORD:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n", encoding="utf-8")
        return
    want = json.loads(path.read_text(encoding="utf-8"))
    assert shape(got) == shape(want), f"{name}: keys, order or types changed"
    assert got == want, f"{name}: values changed"


def _cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, Any]:
    environ = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    done = subprocess.run(
        [AUTOPILOT, *args, "--json"],
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
        timeout=600,
    )
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def _roots(tmp_path: Path) -> dict[str, str]:
    return {
        str(tmp_path.resolve()): "<tmp>",
        str(tmp_path): "<tmp>",
        os.environ["AUTOPILOT_HOME"]: "<home>",
        str(REPORTS): "<reports>",
        os.path.realpath(sys.base_prefix): "<python>",
        sys.base_prefix: "<python>",
    }


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    base = tmp_path_factory.mktemp("golden-examples")
    yield {
        "py": make_example_repo("py_inventory", base / "inv"),
        "rb": make_example_repo("rails_shop", base / "shop"),
        "base": base,
    }


def test_parse(tmp_path: Path) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuite><testcase name='x'>")
    reports = [REPORTS / "rspec-junit-formatter.xml", REPORTS / "rspec.json", broken]
    code, doc = _cli("parse", *map(str, reports))
    assert code == 2
    check("parse", doc, _roots(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("stack", ["py", "rb"])
def test_map(examples: dict[str, Path], stack: str) -> None:
    code, doc = _cli("map", "--repo", str(examples[stack]))
    assert code == 0
    check(f"map-{stack}", doc, _roots(examples["base"]))


@pytest.mark.slow
@pytest.mark.parametrize("stack", ["py", "rb"])
def test_audit(examples: dict[str, Path], stack: str) -> None:
    code, doc = _cli("audit", "--repo", str(examples[stack]))
    assert code == 0, doc
    check(f"audit-{stack}", doc, _roots(examples["base"]))


@pytest.mark.slow
def test_judge(examples: dict[str, Path], mistral_server: MistralServer) -> None:
    verdict = json.dumps({"score": 0.8, "reasons": ["exact values"], "missing": ["nil amount"]})
    mistral_server.add(Rule(replies=[ok(verdict, **TOKENS)], schema_name="judge_verdict"))
    spec = "spec/helpers/price_helper_spec.rb"
    code, doc = _cli("judge", spec, "--repo", str(examples["rb"]))
    assert code == 0, doc
    check("judge", doc, _roots(examples["base"]))


# --- the flows: in this process, on the session's Prefect test server --------------------------

# Imports a name errors.py does not define: a first draft that cannot even be collected.
NOT_LOADING = (
    "from inventory.errors import NoSuchError\n\n\ndef test_x():\n    assert NoSuchError\n"
)
ONLY = ["src/inventory/errors.py", "src/inventory/reports.py", "src/inventory/csv_import.py"]


def _about(name: str) -> Callable[[RecordedRequest], bool]:
    """A generator request (first draft or fix) about ``src/inventory/<name>`` itself (its
    context may name other files)."""
    source = f"## Source file: src/inventory/{name}\n"
    return lambda req: source in req.text


@pytest.fixture
def scripted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mistral_server: MistralServer
) -> tuple[Path, MistralServer]:
    """py_inventory with two files fixed by the scripted generator and one never loading."""
    from tests.flows.commands.test_nightly import ERRORS_TEST
    from tests.tasks.generate.test_loop import GOOD, files_reply, judge_reply

    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__MAX_RETRIES", "0")
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    (repo / "autopilot.toml").write_text("[gates]\nmin_coverage = 0.85\nmin_judge = 0.0\n")
    git(repo, "add", "autopilot.toml")
    git(repo, "commit", "-qm", "golden settings")
    server = mistral_server
    server.add(Rule(schema_name="judge_verdict", replies=[ok(judge_reply(0.8), **TOKENS)]))
    server.add(Rule(when=_about("reports.py"), replies=[ok(files_reply(GOOD), **TOKENS)]))
    server.add(
        Rule(
            when=_about("errors.py"),
            replies=[
                ok(files_reply(NOT_LOADING, "tests/test_errors.py"), **TOKENS),
                ok(files_reply(ERRORS_TEST, "tests/test_errors.py"), **TOKENS),
            ],
        )
    )
    server.add(
        Rule(
            when=_about("csv_import.py"),
            replies=[ok(files_reply(NOT_LOADING, "tests/test_csv_import.py"), **TOKENS)],
        )
    )
    return repo, server


@pytest.mark.slow
def test_nightly(
    scripted: tuple[Path, MistralServer],
    tmp_path: Path,
    prefect_harness: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from flows.commands.nightly import run

    repo, _ = scripted
    code = run(repo, only=ONLY, max_iterations=2, json_out=True, archive=str(tmp_path / "arch"))
    doc = json.loads(capsys.readouterr().out)
    assert code == 1, doc  # csv_import.py is rejected
    check("nightly", doc, _roots(tmp_path))


@pytest.mark.slow
def test_eval(
    scripted: tuple[Path, MistralServer],
    tmp_path: Path,
    prefect_harness: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from flows.commands.eval import run

    repo, _ = scripted
    code = run(repo, json_out=True, only=ONLY[:2])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    check("eval", doc, _roots(tmp_path))


@pytest.mark.slow
def test_repair(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from flows.commands.repair import run
    from tests.flows.test_post_merge import patch_to, regressed_repo, script

    repo, report, _ = regressed_repo(tmp_path)
    script(mistral_server, [patch_to(5)])
    code = run(repo, [report], human_timeout=0, json_out=True, archive=str(tmp_path / "arch"))
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    check("repair", doc, _roots(tmp_path))


@pytest.mark.slow
def test_premerge(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from flows.commands.premerge import run
    from tests.flows.test_premerge import PY, open_pull_request
    from tests.tasks.generate.test_loop import judge_reply

    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__MAX_RETRIES", "0")
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    open_pull_request(repo, PY)
    reply = f"The tests.\n\n{PY.test_path}\n```python\n{PY.test}```\n"
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[ok(judge_reply(0.8), **TOKENS)]))
    mistral_server.add(Rule(about=PY.source, replies=[ok(reply, **TOKENS)]))
    code = run(repo, base="main", head="feature", json_out=True, archive=str(tmp_path / "arch"))
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    check("premerge", doc, _roots(tmp_path))
