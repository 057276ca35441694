"""The node-jest skills (skills/node-*.md, loaded with the others): the same front matter as
the other skills, one per kind, globs that agree with the mapping, and examples that really
run green under Jest, pass the static rubric and lint clean."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

from tasks.generate.skills import SkillMeta, glob_match
from tasks.toolchains.node.layout import NodeKind, source_kind
from tasks.toolchains.node.lint import lint
from tasks.toolchains.node.rubric import analyse
from tasks.toolchains.node.run import run_jest
from tests.examples_repo import git, make_example_repo
from tests.paths import REPO_ROOT
from tests.tasks.toolchains.node.helpers import bwrap_runner, tools_for

SKILLS_DIR = REPO_ROOT / "skills"
SKILL_FILES = sorted(SKILLS_DIR.glob("node-*.md"))
_FRONT = re.compile(r"\A---\n(.*?\n)---\n", re.DOTALL)
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)
#: Where each skill's example lands in examples/node_orders (it tests an untested file there).
TARGETS = {
    "node-module": "src/discounts.test.ts",
    "node-utility": "src/util/dates.test.ts",
    "node-component": "src/components/statusBadge.test.ts",
    "node-route": "src/server.test.ts",
}


def _load(path: Path) -> tuple[dict[str, object], str, list[tuple[str, str]]]:
    text = path.read_text(encoding="utf-8")
    m = _FRONT.match(text)
    assert m is not None, f"{path.name}: no front matter"
    meta = yaml.safe_load(m.group(1))
    body = text[m.end() :]
    return meta, body, [(x.group(1), x.group(2)) for x in _FENCE.finditer(body)]


@pytest.mark.parametrize("path", SKILL_FILES, ids=[p.stem for p in SKILL_FILES])
def test_front_matter_is_the_skills_format(path: Path) -> None:
    meta, body, examples = _load(path)
    # Every field is validated by the skills' own model (the kind against the registry).
    SkillMeta.model_validate(meta)
    assert NodeKind(str(meta["kind"])).value == path.stem
    assert meta["name"] == path.stem
    assert re.fullmatch(r"\d+\.\d+\.\d+", str(meta["version"]))
    assert str(meta["description"]).startswith("Use for")
    for section in ("## Scope", "## Example", "## Critical rules"):
        assert re.search(rf"^{section}\s*$", body, re.MULTILINE), section
    assert [lang for lang, _ in examples] == ["typescript"]
    assert len(hashlib.sha256(path.read_bytes()).hexdigest()) == 64


def test_one_skill_per_kind() -> None:
    kinds = sorted(str(_load(p)[0]["kind"]) for p in SKILL_FILES)
    assert kinds == sorted(k.value for k in NodeKind)


LOCATIONS = {
    "src/orders.ts": NodeKind.MODULE,
    "lib/index.js": NodeKind.MODULE,
    "src/util/money.ts": NodeKind.UTILITY,
    "src/helpers/strings.js": NodeKind.UTILITY,
    "src/components/statusBadge.ts": NodeKind.COMPONENT,
    "src/Button.tsx": NodeKind.COMPONENT,
    "src/handlers/orders.ts": NodeKind.ROUTE,
    "src/routes/users.js": NodeKind.ROUTE,
    "src/api/health.ts": NodeKind.ROUTE,
    "src/server.ts": NodeKind.ROUTE,
}


@pytest.mark.parametrize(("path", "kind"), LOCATIONS.items())
def test_globs_are_disjoint_and_agree_with_the_mapping(path: str, kind: NodeKind) -> None:
    matching = []
    for skill in SKILL_FILES:
        meta = _load(skill)[0]
        applies = any(glob_match(str(g), path) for g in meta["applies_to"])  # type: ignore[attr-defined]
        excluded = any(glob_match(str(g), path) for g in meta["excludes"])  # type: ignore[attr-defined]
        if applies and not excluded:
            matching.append(meta["kind"])
    assert matching == [kind.value]
    text = "export function Button() { return <b/>; }" if path.endswith(".tsx") else ""
    if path == "src/server.ts":
        text = "http.createServer(async (raw, out) => {})\nconst h = (req, res) => 1"
    assert source_kind(path, text) is kind


@pytest.mark.parametrize("path", SKILL_FILES, ids=[p.stem for p in SKILL_FILES])
def test_examples_follow_the_rules_they_teach(path: Path) -> None:
    _, body, examples = _load(path)
    code = examples[0][1]
    target = TARGETS[path.stem]
    findings, tests = analyse(target, code, target.replace(".test", ""))
    assert findings == [] and tests >= 2
    assert (
        re.search(r"toBeTruthy|toBeFalsy|toBeDefined|toMatchSnapshot|\.only|\.skip", code) is None
    )
    rules = body.split("## Critical rules", 1)[1]
    phrases = ["toBeTruthy", "toBeDefined", "snapshot", "jest.mock", ".only", "type-check"]
    if path.stem in ("node-module", "node-utility"):
        phrases += ['toThrow("exact message")', "it.each"]
    for phrase in phrases:
        assert phrase in rules, phrase


@pytest.mark.slow
def test_examples_run_green_and_lint_clean(tmp_path: Path) -> None:
    repo = make_example_repo("node_orders", tmp_path / "orders")
    for skill in SKILL_FILES:
        (repo / TARGETS[skill.stem]).write_text(_load(skill)[2][0][1])
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "skill examples")
    tools = tools_for(repo)
    runner = bwrap_runner(repo, tools)
    specs = sorted(TARGETS.values())
    result = run_jest(repo, specs, None, runner, tools)
    v = result.validation
    assert v.passed, v.load_error or [e.message for e in v.examples if e.status != "passed"]
    assert {e.file for e in v.examples} == set(specs)
    for source in ("src/discounts.ts", "src/util/dates.ts", "src/components/statusBadge.ts"):
        assert result.files[source].uncovered_lines == [], source
    assert lint(repo, specs, False, runner, tools) == []
