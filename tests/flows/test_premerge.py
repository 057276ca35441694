"""``autopilot premerge`` end to end on each example stack: a pull request's worth of changes (a
branch adding a method to a tested source, a docs page, a binary and a lock file), the real
toolchain in bwrap, the real model client against the scripted server, a real git branch and
the fake forge (GitHub for two stacks, GitLab for the third): the diff coverage before and
after, the branch on top of the head, the comment (once, updated by a second run, never
duplicated) and the head's commit status."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flows.commands import premerge
from tasks.premerge.comment import MARKER
from tests.examples_repo import git, make_example_repo
from tests.fakes.forge_server import FakeForge, forge_fixture  # noqa: F401
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.tasks.generate.test_loop import judge_reply

pytestmark = pytest.mark.slow

PR = 7


@dataclass(frozen=True)
class Stack:
    """One example, the method its pull request adds, and the test the model answers with."""

    example: str
    source: str
    anchor: str  # the new method goes just before this line
    method: str
    test_path: str
    test: str
    fence: str
    forge: str
    extra: dict[str, bytes] = field(default_factory=dict)


PY = Stack(
    example="py_inventory",
    source="src/inventory/stock.py",
    anchor="    def _check(self, sku: str, quantity: int) -> None:\n",
    method=(
        "    def value_cents(self, sku: str) -> int:\n"
        '        """What the units of `sku` on hand are worth."""\n'
        "        return self.quantity(sku) * self.items[sku].unit_price_cents\n\n"
    ),
    test_path="tests/test_stock_value.py",
    test=(
        "import pytest\n\n"
        "from inventory.errors import UnknownItemError\n"
        "from inventory.stock import Item, Stock\n\n\n"
        "def test_value_cents_multiplies_the_level_by_the_price():\n"
        "    stock = Stock()\n"
        '    stock.register(Item("A1", "Apple", 150), 4)\n'
        '    assert stock.value_cents("A1") == 600\n\n\n'
        "def test_value_cents_of_an_unknown_sku_raises():\n"
        "    with pytest.raises(UnknownItemError, match=\"unknown item 'Z9'\"):\n"
        '        Stock().value_cents("Z9")\n'
    ),
    fence="python",
    forge="github",
    extra={"yarn.lock": b"# yarn lockfile v1\n\nleft-pad@1.3.0:\n  version 1.3.0\n"},
)
RB = Stack(
    example="rails_shop",
    source="app/models/product.rb",
    anchor="  def reserve!(quantity)\n",
    method=(
        "  def restock!(quantity)\n"
        '    raise ArgumentError, "quantity must be positive" unless quantity.positive?\n\n'
        "    update!(stock: stock + quantity)\n"
        "  end\n\n"
    ),
    test_path="spec/models/product/restock_spec.rb",
    test=(
        "# frozen_string_literal: true\n\n"
        'require "rails_helper"\n\n'
        "RSpec.describe Product, type: :model do\n"
        '  describe "#restock!" do\n'
        '    it "adds the quantity to the stock" do\n'
        "      product = create(:product, stock: 3)\n"
        "      expect { product.restock!(4) }.to change { product.reload.stock }.from(3).to(7)\n"
        "    end\n\n"
        '    it "refuses a quantity that is not positive" do\n'
        "      product = create(:product, stock: 3)\n"
        "      expect { product.restock!(0) }\n"
        '        .to raise_error(ArgumentError, "quantity must be positive")\n'
        "      expect(product.reload.stock).to eq(3)\n"
        "    end\n"
        "  end\n"
        "end\n"
    ),
    fence="ruby",
    forge="github",
    extra={"yarn.lock": b"# yarn lockfile v1\n"},
)
TS = Stack(
    example="node_orders",
    source="src/util/money.ts",
    anchor="/** Split `cents` into `parts` shares",
    method=(
        "/** The sum of `amounts`, each whole cents. */\n"
        "export function sumCents(amounts: number[]): number {\n"
        "  return amounts.reduce((total, cents) => {\n"
        "    if (!Number.isInteger(cents)) {\n"
        "      throw new MoneyError(`cents must be an integer, got ${cents}`);\n"
        "    }\n"
        "    return total + cents;\n"
        "  }, 0);\n"
        "}\n\n"
    ),
    test_path="src/util/sumCents.test.ts",
    test=(
        'import { MoneyError, sumCents } from "./money";\n\n'
        'describe("sumCents", () => {\n'
        '  it("adds whole cents", () => {\n'
        "    expect(sumCents([1250, 5, 0])).toBe(1255);\n"
        "  });\n\n"
        '  it("is zero for no amounts", () => {\n'
        "    expect(sumCents([])).toBe(0);\n"
        "  });\n\n"
        '  it("rejects fractional cents", () => {\n'
        "    expect(() => sumCents([1, 2.5])).toThrow(\n"
        '      new MoneyError("cents must be an integer, got 2.5"),\n'
        "    );\n"
        "  });\n"
        "});\n"
    ),
    fence="typescript",
    forge="gitlab",
    extra={"src/generated/schema.ts": b"// @generated by the schema tool\nexport const v = 1;\n"},
)


def open_pull_request(repo: Path, stack: Stack) -> tuple[str, str]:
    """A branch ``feature`` with the new method, a docs page, a binary and a generated file,
    committed; the checkout back on ``main``. Returns (main's sha, the head's sha)."""
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "switch", "-q", "-c", "feature")
    source = repo / stack.source
    text = source.read_text()
    assert stack.anchor in text
    source.write_text(text.replace(stack.anchor, stack.method + stack.anchor, 1))
    (repo / "docs").mkdir(exist_ok=True)
    (repo / "docs" / "premerge.md").write_text("# Notes\n\nThe new method.\n")
    (repo / "assets").mkdir(exist_ok=True)
    (repo / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR")
    for rel, data in stack.extra.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "Add a method")
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "switch", "-q", "main")
    return base, head


def _forge_env(monkeypatch: pytest.MonkeyPatch, forge: FakeForge, kind: str) -> None:
    monkeypatch.setenv("AUTOPILOT_FORGE__KIND", kind)
    monkeypatch.setenv("AUTOPILOT_FORGE__REPOSITORY", "acme/shop")
    api = forge.url if kind == "github" else f"{forge.url}/api/v4"
    monkeypatch.setenv("AUTOPILOT_FORGE__API_URL", api)
    monkeypatch.setenv("AUTOPILOT_FORGE_TOKEN", forge.state.token)


def _run(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = premerge.run(
        repo,
        base="main",
        head="feature",
        pr_number=PR,
        json_out=True,
        archive=str(tmp_path / "archive"),
    )
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("stack", [PY, RB, TS], ids=lambda s: s.example)
def test_premerge_tests_the_changed_lines_comments_once_and_sets_the_status(
    stack: Stack,
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__MAX_RETRIES", "0")
    _forge_env(monkeypatch, forge, stack.forge)
    repo = make_example_repo(stack.example, tmp_path / stack.example)
    _, head = open_pull_request(repo, stack)
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.9)]))
    reply = f"The new method's tests.\n\n{stack.test_path}\n```{stack.fence}\n{stack.test}```\n"
    generator = mistral_server.add(Rule(about=stack.source, replies=[reply]))

    code, doc = _run(repo, tmp_path, capsys)

    assert code == 0, doc
    changed = {f["path"]: f for f in doc["changed"]}
    source = changed[stack.source]
    assert source["skipped"] is None and source["changed_lines"]
    assert changed["docs/premerge.md"]["skipped"].startswith("not a source file")
    assert changed["assets/logo.png"]["skipped"] == "binary"
    for rel in stack.extra:
        assert changed[rel]["skipped"].startswith("generated")
    [target] = doc["files"]
    assert (target["source"], target["verdict"]) == (stack.source, "accepted"), target
    assert target["changed_lines"] == source["changed_lines"]
    cov = doc["diff_coverage"]
    assert cov["before"] < 1.0 and cov["after"] == 1.0 and cov["min"] == 0.9
    assert cov["covered_before"] < cov["covered_after"] == cov["measured_lines"]
    assert source["diff_coverage_before"] == cov["before"] and source["diff_coverage_after"] == 1.0
    # The generator was shown the changed lines, marked.
    [asked] = [r for r in mistral_server.requests if r.schema_name is None]
    assert "## Changed lines: the pull request's" in asked.text
    # The branch: on top of the head, the head itself untouched, the user on main.
    assert doc["branch"] == f"autopilot/premerge-{PR}" and doc["head_commit"] == head
    assert git(repo, "rev-parse", f"{doc['branch']}^").strip() == head
    assert git(repo, "rev-parse", "feature").strip() == head
    assert git(repo, "show", f"{doc['branch']}:{stack.test_path}") == stack.test
    assert git(repo, "branch", "--show-current").strip() == "main"
    # The forge: one comment with the numbers, the status on the head.
    [comment] = forge.state.comments_on(PR)
    assert comment.body.startswith(MARKER)
    assert f"diff coverage {cov['before']:.0%} -> 100%" in comment.body
    assert f"`{stack.test_path}` for `{stack.source}`" in comment.body
    assert "`assets/logo.png`: binary" in comment.body
    [status] = forge.state.statuses
    assert status["sha"] == head and status["state"] == "success"
    assert (status.get("context") or status.get("name")) == "autopilot/premerge"
    assert doc["comment"]["action"] == "created" and doc["status"]["action"] == "set"

    # Again on the same pull request: nothing asked again, the comment updated, not duplicated.
    generator.replies = ["the model must not be asked again"]
    code, again = _run(repo, tmp_path, capsys)

    assert code == 0, again
    assert again["model_calls"] == 0
    assert again["diff_coverage"] == cov
    assert again["branch"] == f"autopilot/premerge-{PR}-2"
    assert [c.id for c in forge.state.comments_on(PR)] == [comment.id]
    assert again["comment"]["action"] == "updated"
    edits = [r for r in forge.requests if r.method in ("PATCH", "PUT")]
    assert len(edits) == 1 and str(comment.id) in edits[0].path
    assert [s["state"] for s in forge.state.statuses] == ["success", "success"]


def test_a_forge_that_fails_loses_nothing_and_says_so_in_one_line(
    tmp_path: Path,
    prefect_harness: None,
    mistral_server: MistralServer,
    forge: FakeForge,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every request answered 500 (after the retries: the comment's look-up, the status):
    the branch and the archive with the comment's text are there, each failure is one line on
    stderr and in the document, and the exit code is 1."""
    monkeypatch.setenv("AUTOPILOT_GATES__FLAKY_RUNS", "1")
    monkeypatch.setenv("AUTOPILOT_MODEL__JUDGE_SAMPLES", "1")
    _forge_env(monkeypatch, forge, "github")
    forge.state.fail_next = [500] * 6
    repo = make_example_repo(PY.example, tmp_path / PY.example)
    open_pull_request(repo, PY)
    mistral_server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.9)]))
    reply = f"The tests.\n\n{PY.test_path}\n```python\n{PY.test}```\n"
    mistral_server.add(Rule(about=PY.source, replies=[reply]))

    code = premerge.run(
        repo, base="main", head="feature", pr_number=PR, json_out=True, archive=str(tmp_path / "a")
    )

    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 1
    assert doc["files"][0]["verdict"] == "accepted" and doc["diff_coverage"]["after"] == 1.0
    for name in ("comment", "status"):
        assert doc[name]["action"] == "failed" and "500" in doc[name]["error"]
    problems = [ln for ln in captured.err.splitlines() if ln.startswith("autopilot: ")]
    assert len(problems) == 2 and all("GitHub failed on" in ln for ln in problems)
    assert git(repo, "show", f"{doc['branch']}:{PY.test_path}") == PY.test
    archived = Path(doc["archive_uri"])
    assert (archived / "comment.md").read_text().startswith(MARKER)
    assert json.loads((archived / "premerge.json").read_text())["branch"] == doc["branch"]
    assert forge.state.comments == {} and forge.state.statuses == []
