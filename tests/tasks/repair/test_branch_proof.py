"""The fix branch's whole proof (issue 15): the fixed groups' tests run together on the tree
holding every fix (real git worktree, real pytest in the sandbox) before the branch is made."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from tasks.core.config import load_settings
from tasks.repair.branch_proof import TOGETHER_RUNS, prove_fix_branch, together_specs
from tasks.repair.loop import RepairEnv
from tasks.repair.state import Attempt, FailureGroup, GroupState, PatchReview
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import git, make_example_repo
from tests.tasks.repair.test_units import case

PRICING = "src/inventory/pricing.py"
FAILING = "tests/test_pricing.py::test_ten_units_get_five_percent"


def _group(gid: str, test_id: str, file: str, specs: list[str]) -> GroupState:
    group = FailureGroup(
        id=gid,
        signature=gid,
        error_type="AssertionError",
        message_shape="m",
        frame="",
        tests=[case(test_id, "boom", file=file, error_type="AssertionError")],
    )
    audit = PatchReview(verdict="PASSED", rerun_specs=specs)
    attempt = Attempt(number=1, diagnosis_index=0, patch=f"p-{gid}", audit=audit)
    return GroupState(group=group, attempts=[attempt], final_patch=f"p-{gid}")


def _env(repo: Path) -> RepairEnv:
    settings = load_settings(repo, {})
    head = git(repo, "rev-parse", "HEAD").strip()
    chain = get_toolchain("python-pytest")
    return RepairEnv(cast(Any, None), settings, repo, "", head, chain, repo, [])


def _tree(repo: Path, ref: str = "HEAD") -> str:
    return git(repo, "rev-parse", f"{ref}^{{tree}}").strip()


def test_together_specs_are_the_audits_reruns_and_the_groups_files() -> None:
    a = _group("a", "tests/test_a.py::x", "tests/test_a.py", ["tests/test_a.py", "tests/test_n.py"])
    b = _group("b", "tests/test_b.py::y", "tests/test_b.py", ["tests/test_n.py"])
    assert together_specs([a, b]) == ["tests/test_a.py", "tests/test_n.py", "tests/test_b.py"]


def test_fixes_that_fail_together_leave_the_branch_by_their_owner(tmp_path: Path) -> None:
    repo = make_example_repo("py_inventory", tmp_path / "inv")
    specs = ["tests/test_pricing.py", "tests/test_units.py"]
    owner = _group("g-pricing", FAILING, "tests/test_pricing.py", specs)
    other = _group("g-units", "tests/test_units.py::nothing", "tests/test_units.py", specs)
    env = _env(repo)
    # The tree of every fix together: clean, both stay.
    assert prove_fix_branch(env, _tree(repo), [owner, other]) == {}
    # A tree on which the first group's test fails when everything runs together.
    source = repo / PRICING
    source.write_text(source.read_text().replace("(10, 5))", "(10, 6))"))
    git(repo, "commit", "-qam", "together they break")
    dropped = prove_fix_branch(env, _tree(repo), [owner, other])
    assert list(dropped) == ["g-pricing"]
    assert f"(run 1 of {TOGETHER_RUNS})" in dropped["g-pricing"]
    assert "test_ten_units_get_five_percent" in dropped["g-pricing"]
    # One group alone: its audit already ran these tests together; nothing runs again.
    assert prove_fix_branch(env, _tree(repo), [owner]) == {}
