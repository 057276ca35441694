"""End to end on examples/node_orders, the third stack through the same flows and gates:
``autopilot map``, ``audit`` (its coverage equal to Jest's own report of the same run),
``nightly`` (a first draft that does not compile, fixed on the next round), ``repair`` (a merged
regression, the suite run in the sandbox) and ``eval``, with the scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flows.commands import audit, nightly, repair
from flows.commands import eval as eval_cmd
from flows.commands import map as map_cmd
from tasks.core.config import SandboxSettings
from tasks.evaluate.mutations import choose
from tasks.sandbox.make import make_runner
from tasks.toolchains.node.jest import default_config
from tasks.toolchains.node.run import coverage_sources
from tasks.toolchains.node.toolchain import NodeJestToolchain
from tests.examples_repo import SubprocessRunner, git, make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_post_merge import is_surgeon
from tests.tasks.generate.test_loop import judge_reply
from tests.tasks.toolchains.node.test_loop import DRAFT, FIXED

pytestmark = pytest.mark.slow

DATES = "src/util/dates.ts"
DATES_TEST = "src/util/dates.test.ts"
MONEY = "src/util/money.ts"
GOOD_LINE = "  return Array.from({ length: parts }, (_, i) => base + (i < extra ? 1 : 0));"
BAD_LINE = GOOD_LINE.replace("i < extra", "i <= extra")


def ts_reply(text: str, path: str = DATES_TEST) -> str:
    return f"Here is the test file.\n\n{path}\n```typescript\n{text}```\n"


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, dict)
    return doc


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__MAX_RETRIES", "0")
    return make_example_repo("node_orders", tmp_path / "orders")


def _jest_summary(repo: Path, tmp_path: Path) -> dict[str, Any]:
    """Jest's own coverage summary (istanbul's json-summary reporter) of the same suite with
    the same configuration, run plainly, outside Autopilot."""
    chain = NodeJestToolchain()
    tools = chain.tools(repo)
    out = tmp_path / "jest-own"
    config = default_config(repo, tools, coverage_sources(repo), tmp_path / "jest-cache")
    (tmp_path / "jest.config.json").write_text(json.dumps(config))
    argv = [
        tools.node,
        tools.jest,
        "--config",
        str(tmp_path / "jest.config.json"),
        "--ci",
        "--runInBand",
        "--coverage",
        "--coverageReporters=json-summary",
        f"--coverageDirectory={out}",
    ]
    done = SubprocessRunner().run(argv, cwd=repo, env={"NODE_PATH": tools.node_path()})
    assert done.exit_code == 0, done.stderr[-2000:]
    summary = json.loads((out / "coverage-summary.json").read_text())
    return {Path(k).relative_to(repo).as_posix(): v for k, v in summary.items() if k != "total"}


def test_map_and_audit_whose_coverage_is_jests_own(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert map_cmd.run(repo, json_out=True) == 0
    mapped = _json(capsys)
    assert mapped["toolchain"] == "node-jest"
    assert sorted(mapped["untested"]) == [
        "src/components/statusBadge.ts",
        "src/discounts.ts",
        "src/server.ts",
        DATES,
    ]

    code = audit.run(repo, "HEAD", json_out=True)
    report = _json(capsys)
    assert code == 0, report
    assert report["toolchain"] == "node-jest" and report["suite"]["ran"]
    by = {f["source"]: f for f in report["files"]}
    assert by["src/components/orderSummary.ts"]["findings"]  # the weak spec
    jest_own = _jest_summary(repo, tmp_path)
    assert set(jest_own) == set(by)
    for source, lines in ((s, v["lines"]) for s, v in jest_own.items()):
        expected = lines["covered"] / lines["total"] if lines["total"] else 1.0
        assert by[source]["coverage"] == pytest.approx(expected, abs=1e-4), source
    assert by[DATES]["coverage"] == 0.0 and by[DATES]["status"] == "untested"


def test_nightly_a_draft_that_does_not_compile_is_fixed_on_the_next_round(
    repo: Path,
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.9)]))
    mistral_server.add(Rule(about=DATES, replies=[ts_reply(DRAFT), ts_reply(FIXED)]))

    code = nightly.run(repo, only=[DATES], json_out=True, archive=str(tmp_path / "arch"))

    doc = _json(capsys)
    assert code == 0, doc["files"][0]["reasons"]
    [file] = doc["files"]
    assert (file["source"], file["kind"], file["verdict"]) == (DATES, "node-utility", "accepted")
    assert file["spec"] == DATES_TEST and file["iterations"] == 2
    assert file["coverage_before"] == 0.0 and file["coverage_after"] == 1.0
    # The second request carried the compiler's real message about the first draft.
    fix = [r for r in mistral_server.requests if DATES in r.text and r.schema_name is None][1]
    assert "TS2322" in fix.text and "not assignable to type 'string'" in fix.text
    written = git(repo, "show", f"{doc['branch']}:{DATES_TEST}")
    assert "const friday" in written  # ESLint --fix, re-proved by a run
    assert git(repo, "branch", "--show-current").strip() == "main"


def _regress(repo: Path) -> str:
    source = repo / MONEY
    source.write_text(source.read_text().replace(GOOD_LINE, BAD_LINE))
    git(repo, "commit", "-qam", "Merge: share the remainder differently")
    return git(repo, "rev-parse", "HEAD").strip()


def _diagnosis(path: str, line: int) -> str:
    return json.dumps(
        {
            "root_cause": "The merge gives the extra cent to one share too many.",
            "affected_code_blocks": [
                {"file_path": path, "start_line": line, "end_line": line, "description": "x"}
            ],
            "repair_strategy": "Compare with < again.",
            "confidence": 0.9,
            "wrong_side": "code",
            "alternatives": [],
        }
    )


def _revert(path: str, line: int, good: str, bad: str, before: str, after: str) -> str:
    return (
        f"```diff\n--- a/{path}\n+++ b/{path}\n@@ -{line - 1},3 +{line - 1},3 @@\n"
        f" {before}\n-{bad}\n+{good}\n {after}\n```\n"
    )


def test_repair_runs_the_suite_in_the_sandbox_and_fixes_the_regression(
    repo: Path,
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    head = _regress(repo)
    lines = (repo / MONEY).read_text().splitlines()
    n = lines.index(BAD_LINE) + 1
    mistral_server.add(Rule(schema_name="diagnosis", replies=[_diagnosis(MONEY, n)]))
    surgeon = _revert(MONEY, n, GOOD_LINE, BAD_LINE, lines[n - 2], lines[n])
    mistral_server.add(Rule(when=is_surgeon, replies=[surgeon]))

    code = repair.run(repo, [], json_out=True, archive=str(tmp_path / "arch"))

    doc = _json(capsys)
    assert code == 0, doc
    [group] = doc["groups"]
    assert group["outcome"] == "fixed" and doc["failures"] >= 1
    assert all(t.startswith("src/util/money.test.ts") for t in group["tests"])
    diag = next(r for r in mistral_server.requests if r.schema_name == "diagnosis")
    assert "splitCents" in diag.text and MONEY in diag.text
    assert GOOD_LINE in git(repo, "show", f"{doc['branch']}:{MONEY}")
    assert git(repo, "rev-parse", "HEAD").strip() == head  # the user's branch untouched


def test_eval_injects_a_regression_that_the_repair_fixes(
    repo: Path,
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scratch = make_example_repo("node_orders", tmp_path / "scratch")
    chain = NodeJestToolchain()
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=180),
        scratch,
        toolchain_dirs=chain.sandbox_dirs(scratch),
        cache_dir=tmp_path / "cache",
    )
    suite = chain.run_suite(scratch, runner)
    sources = {p: (scratch / p).read_text() for p in suite.files}
    # Files are visited in order: the first regression lands in orderSummary.ts, whose only
    # spec is the example's weak one (toBeTruthy), so no test notices it; the second lands in
    # the route handlers, whose spec checks exact statuses and bodies.
    seed = 0
    [survivor, mutation], texts = choose(sources, suite.files, 2, chain, seed=seed)
    assert survivor.path == "src/components/orderSummary.ts"
    assert mutation.path == "src/handlers/orders.ts"
    old, new = sources[mutation.path].splitlines(), texts[mutation.path].splitlines()
    n = mutation.line
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.9)]))
    mistral_server.add(Rule(about=DATES, replies=[ts_reply(FIXED)]))
    mistral_server.add(Rule(schema_name="diagnosis", replies=[_diagnosis(mutation.path, n)]))
    surgeon = _revert(mutation.path, n, old[n - 1], new[n - 1], old[n - 2], old[n])
    mistral_server.add(Rule(when=is_surgeon, replies=[surgeon]))

    code = eval_cmd.run(repo, regressions=2, seed=seed, json_out=True, only=[DATES])

    doc = _json(capsys)
    assert code == 0, doc
    assert doc["mutations"] == [survivor.describe(), mutation.describe()]
    assert [g["outcome"] for g in doc["repair"]["groups"]] == ["fixed"], doc["repair"]
    assert doc["table"]["autonomous_fix_rate"] == 1.0
    assert git(repo, "status", "--porcelain") == ""
    assert (repo / mutation.path).read_text() == sources[mutation.path]
    assert (repo / survivor.path).read_text() == sources[survivor.path]
