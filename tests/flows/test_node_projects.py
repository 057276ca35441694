"""Node projects with a lock file of their own, as a clean clone has them (no node_modules):
``autopilot audit`` runs the suite with the prepared environment (``npm ci --ignore-scripts``)
linked into the worktree and counts and covers what the maintainers' ``npm test`` does on the
same node_modules; the nightly feeds a TypeScript compile error back and accepts the fix.

The TypeScript project is the shape of issue 24: ts-jest preset, ``roots: ["<rootDir>/src",
"<rootDir>/test"]``, ``@types/jest`` in devDependencies. Before the node_modules was linked into
the worktree, its audit set both test files aside (``error TS2582: Cannot find name
'describe'``) and said ``suite did not run: jest found no tests``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flows.commands import audit, nightly
from tasks.envs import PreparedEnv, prepare_environment
from tasks.toolchains.node.toolchain import NodeJestToolchain
from tests.envs_projects import node_project
from tests.examples_repo import git
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.generate.test_loop import judge_reply

pytestmark = pytest.mark.slow

SLUG = "src/slug.ts"
SLUG_TEST = "test/slug.test.ts"
DRAFT = """import { slugify } from "../src/slug";

describe("slugify", () => {
  it("joins words with dashes", () => {
    const slug: number = slugify("Hello World");
    expect(slug).toBe("hello-world");
  });
});
"""
FIXED = """import { slugify } from "../src/slug";

describe("slugify", () => {
  it("joins the words of a title with dashes", () => {
    expect(slugify("Hello, World!")).toBe("hello-world");
  });

  it("drops accents", () => {
    expect(slugify("Crème Brûlée")).toBe("creme-brulee");
  });

  it("stops before the word that would pass the limit", () => {
    expect(slugify("one two three", 7)).toBe("one-two");
  });

  it("is empty for a title without letters or digits", () => {
    expect(slugify("!!!")).toBe("");
  });
});
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One AUTOPILOT_HOME for the module: each lock's environment is built once."""
    return tmp_path_factory.mktemp("node-home")


@pytest.fixture
def shared_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("AUTOPILOT_HOME", str(home))
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__MAX_RETRIES", "0")
    yield home


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, dict)
    return doc


#: The variables the maintainers' ``make test`` gives ``npm test`` (esm_make's Makefile).
BY_MAKE = {"esm_make": {"NODE_OPTIONS": "--experimental-vm-modules"}}


def _npm_test(
    repo: Path, env: PreparedEnv, tmp_path: Path, variables: dict[str, str]
) -> tuple[dict[str, Any], dict]:
    """The maintainers' own run, outside Autopilot: ``npm test`` in a plain copy of the
    project holding a copy of the same node_modules, with Jest's JSON result and its own
    coverage summary (istanbul's json-summary reporter)."""
    copy = tmp_path / "by-hand"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git", "node_modules"))
    shutil.copytree(Path(env.path) / "node_modules", copy / "node_modules", symlinks=True)
    out = tmp_path / "jest-own"
    args = [
        "--ci",
        "--json",
        f"--outputFile={out / 'jest.json'}",
        "--coverage",
        "--coverageReporters=json-summary",
        f"--coverageDirectory={out}",
    ]
    done = subprocess.run(
        ["npm", "test", "--silent", "--", *args],
        cwd=copy,
        env={**os.environ, **variables},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "coverage-summary.json").read_text())
    lines = {
        Path(k).relative_to(copy).as_posix(): v["lines"] for k, v in summary.items() if k != "total"
    }
    return json.loads((out / "jest.json").read_text()), lines


@pytest.mark.parametrize("name", ["ts_shape", "esm_js", "cjs_js", "esm_make"])
def test_audit_counts_and_covers_what_npm_test_does(
    name: str, shared_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = node_project(name, tmp_path / name)
    assert not (repo / "node_modules").exists()  # a clean clone

    code = audit.run(repo, "HEAD", json_out=True)

    report = _json(capsys)
    assert code == 0, report["suite"]
    assert report["toolchain"] == "node-jest" and report["suite"]["ran"], report["suite"]
    assert report["suite"]["set_aside"] == {}
    assert any("the prepared environment node-" in p for p in report["prepared"])
    env = prepare_environment(repo, NodeJestToolchain().env_builder(), home=shared_home)
    assert isinstance(env, PreparedEnv) and not env.built  # the audit's, reused
    jest_own, lines = _npm_test(repo, env, tmp_path, BY_MAKE.get(name, {}))
    tests = report["summary"]["tests"]
    assert tests["tests"] == jest_own["numTotalTests"] and tests["tests"] > 0
    assert tests["passed"] == jest_own["numPassedTests"]
    # A test.todo is skipped as Jest counts it (jest-junit writes it as a case without result).
    assert tests["skipped"] == jest_own["numPendingTests"] + jest_own["numTodoTests"]
    assert jest_own["numTodoTests"] == (1 if name == "cjs_js" else 0)
    if name == "esm_make":  # no configuration of its own: Jest's defaults, as npx jest
        assert any(p.startswith("jest configuration: Jest's defaults") for p in report["prepared"])
    by = {f["source"]: f for f in report["files"]}
    # Jest's summary holds the files the tests loaded (the projects set no collectCoverageFrom);
    # the audit adds every other source, untested and at 0.
    assert lines and set(lines) <= set(by)
    for source, counts in lines.items():
        expected = counts["covered"] / counts["total"] if counts["total"] else 1.0
        assert by[source]["coverage"] == pytest.approx(expected, abs=1e-4), source
    others = {s: (f["coverage"], f["status"]) for s, f in by.items() if s not in lines}
    assert others == ({SLUG: (0.0, "untested")} if name == "ts_shape" else {})
    if name == "ts_shape":
        _evidence_from_each_test_files_own_coverage(by)
    assert git(repo, "status", "--porcelain") == ""  # the checkout untouched


def _evidence_from_each_test_files_own_coverage(by: dict[str, Any]) -> None:
    """ts_shape's checkout test is named after a feature and imports the barrel src/index.ts
    only: the sources whose functions it ran (through source maps, on TypeScript's own lines)
    are tested by evidence; a module it merely loaded, with no function of its own, is not."""
    cart = by["src/cart.ts"]
    assert (cart["specs"], cart["status"]) == ([], "tested")
    assert cart["covered_by"] == ["test/checkout.test.ts"]
    assert by["src/math.ts"]["covered_by"] == ["test/checkout.test.ts"]  # clamp, via cart
    assert by["src/index.ts"]["specs"] == ["test/checkout.test.ts"]  # what it imports
    currency = by["src/currency.ts"]
    assert (currency["coverage"], currency["status"], currency["covered_by"]) == (
        1.0,
        "untested",
        [],
    )


def test_the_checkouts_own_node_modules_without_a_prepared_environment(
    shared_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's own setting: the checkout installed with ``npm ci`` (here: a copy of the
    environment's node_modules), nothing prepared: the checkout's node_modules is linked."""
    repo = node_project("ts_shape", tmp_path / "ts_shape")
    env = prepare_environment(repo, NodeJestToolchain().env_builder(), home=shared_home)
    assert isinstance(env, PreparedEnv)
    shutil.copytree(Path(env.path) / "node_modules", repo / "node_modules", symlinks=True)
    monkeypatch.setenv("AUTOPILOT_ENVS__PREPARE", "false")

    code = audit.run(repo, "HEAD", json_out=True)

    report = _json(capsys)
    assert code == 0, report["suite"]
    assert report["summary"]["tests"]["tests"] == 6 and report["suite"]["set_aside"] == {}
    assert f"node_modules: the checkout's (linked), {repo / 'node_modules'}" in report["prepared"]


def test_nightly_feeds_the_compile_error_back_and_accepts_the_fix(
    shared_home: Path,
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = node_project("ts_shape", tmp_path / "ts_shape")
    reply = "Here is the test file.\n\n{path}\n```typescript\n{text}```\n"
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.9)]))
    drafts = [reply.format(path=SLUG_TEST, text=t) for t in (DRAFT, FIXED)]
    mistral_server.add(Rule(about=SLUG, replies=drafts))

    code = nightly.run(repo, only=[SLUG], json_out=True, archive=str(tmp_path / "arch"))

    doc = _json(capsys)
    assert code == 0, doc["files"]
    [file] = doc["files"]
    assert (file["source"], file["spec"], file["verdict"]) == (SLUG, SLUG_TEST, "accepted")
    assert file["iterations"] == 2
    assert file["coverage_before"] == 0.0 and file["coverage_after"] == 1.0
    # The second request carried the compiler's message about the first draft: the project's
    # own types were found (no TS2582 about `describe`), the draft's own error was reported.
    fix = [r for r in mistral_server.requests if SLUG in r.text and r.schema_name is None][1]
    assert "TS2322" in fix.text and "not assignable to type 'number'" in fix.text
    assert "TS2582" not in fix.text
    assert 'it("drops accents"' in git(repo, "show", f"{doc['branch']}:{SLUG_TEST}")
    assert git(repo, "branch", "--show-current").strip() == "main"
