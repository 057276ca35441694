"""Patches judged by what git will write: real git on real repositories, the auditor's sandbox
re-run for real, and disguised patches that must end with a person (RISKY), never committed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tasks.core.config import RepairSettings, load_settings
from tasks.facts.reports.read import parse_reports
from tasks.repair.branch import Applied, apply_in_order
from tasks.repair.patch import GitView, git_view
from tasks.repair.review import review_patch
from tasks.repair.risk import parse_patch, risk_reasons
from tasks.repair.scout import group_failures
from tasks.repair.state import FailureGroup
from tasks.toolchains.registry import get_toolchain
from tests.examples_repo import git
from tests.flows.test_post_merge import PRICING, patch_to, regressed_repo

pytestmark = pytest.mark.slow

GROUP = FailureGroup(
    id="g1", signature="s", error_type="AssertionError", message_shape="m", frame="", tests=[]
)


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    r = tmp_path / "r"
    for rel, data in {
        "app/a.rb": b"one\ntwo\n",
        "src/crlf.txt": b"a\r\nb\r\n",
        "src/tool.sh": b"echo\n",
        "docs/notes.sql": b"-- notes\n",
        "spec/a_spec.rb": b"it { expect(a).to eq(1) }\nit { expect(b).to eq(2) }\n",
    }.items():
        (r / rel).parent.mkdir(parents=True, exist_ok=True)
        (r / rel).write_bytes(data)
    git(r, "init", "-q", "-b", "main")
    git(r, "add", ".")
    git(r, "commit", "-qm", "base")
    return r, git(r, "rev-parse", "HEAD").strip()


def view(repo: tuple[Path, str], diff: str, sub: str = "") -> GitView:
    v = git_view(repo[0], sub, repo[1], diff)
    assert isinstance(v, GitView), v
    return v


RUBY = get_toolchain("ruby-rspec")
RB_RULES = RUBY.file_rules(Path("/nonexistent-project"))


def risks(v: GitView) -> list[str]:
    return risk_reasons(v.info, None, GROUP, RepairSettings(), RUBY, RB_RULES)


FIX = "@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"


def test_other_prefixes_hide_a_ci_file_from_the_headers_but_not_from_git(
    repo: tuple[Path, str],
) -> None:
    diff = f"--- x/app/a.rb\n+++ y/app/a.rb\n{FIX}--- /dev/null\n+++ y/.github/workflows/evil.yml\n"
    diff += "@@ -0,0 +1 @@\n+on: push\n"
    # The headers' own reading (strip a/ and b/ only) misses it...
    assert not any(
        "CI" in r
        for r in risk_reasons(parse_patch(diff), None, GROUP, RepairSettings(), RUBY, RB_RULES)
    )
    # ...git writes .github/workflows/evil.yml, and that is what is judged.
    v = view(repo, diff)
    assert sorted(v.info.files) == [".github/workflows/evil.yml", "app/a.rb"]
    assert ".github/workflows/evil.yml: CI configuration" in risks(v)


def test_p0_paths_are_judged_where_git_puts_them(repo: tuple[Path, str]) -> None:
    # Without prefixes, git strips the first component anyway.
    new = view(repo, "--- /dev/null\n+++ .github/workflows/x.yml\n@@ -0,0 +1 @@\n+on: push\n")
    assert new.info.files == ["workflows/x.yml"]
    changed = git_view(repo[0], "", repo[1], f"--- app/a.rb\n+++ app/a.rb\n{FIX}")
    assert changed == "a.rb: does not exist in index"


def test_renames_are_a_deletion_and_an_addition(repo: tuple[Path, str]) -> None:
    diff = (
        "diff --git a/docs/notes.sql b/db/migrate/001_notes.sql\nsimilarity index 100%\n"
        "rename from docs/notes.sql\nrename to db/migrate/001_notes.sql\n"
    )
    v = view(repo, diff)
    assert sorted(v.info.files) == ["db/migrate/001_notes.sql", "docs/notes.sql"]
    assert v.info.deleted == ["docs/notes.sql"]
    assert "db/migrate/001_notes.sql: database migration or schema" in risks(v)


def test_copies_mode_changes_and_dev_null_sides(repo: tuple[Path, str]) -> None:
    copy = view(
        repo,
        "diff --git a/app/a.rb b/Gemfile\nsimilarity index 100%\n"
        "copy from app/a.rb\ncopy to Gemfile\n",
    )
    assert copy.info.files == ["Gemfile"]
    assert "Gemfile: dependency manifest or lock file" in risks(copy)
    mode = view(repo, "diff --git a/src/tool.sh b/src/tool.sh\nold mode 100644\nnew mode 100755\n")
    assert mode.info.mode_changes == ["src/tool.sh: mode 100644 -> 100755"]
    assert any("file mode change needs a person" in r for r in risks(mode))
    gone = view(
        repo,
        "diff --git a/spec/a_spec.rb b/spec/a_spec.rb\ndeleted file mode 100644\n"
        "--- a/spec/a_spec.rb\n+++ /dev/null\n@@ -1,2 +0,0 @@\n"
        "-it { expect(a).to eq(1) }\n-it { expect(b).to eq(2) }\n",
    )
    assert gone.info.deleted == ["spec/a_spec.rb"]
    assert "spec/a_spec.rb: deletes a test file" in risks(gone)


def test_crlf_lines_count_as_git_counts_them(repo: tuple[Path, str]) -> None:
    crlf = view(repo, "--- a/src/crlf.txt\n+++ b/src/crlf.txt\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+B\r\n")
    assert (crlf.info.files, crlf.info.changed_lines) == (["src/crlf.txt"], 2)
    lf = git_view(
        repo[0],
        "",
        repo[1],
        "--- a/src/crlf.txt\n+++ b/src/crlf.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n",
    )
    assert isinstance(lf, str) and "patch does not apply" in lf


def test_a_header_that_disagrees_with_its_hunks(repo: tuple[Path, str]) -> None:
    # diff --git names one file, ---/+++ another: git decides, and its decision is judged.
    moved = view(
        repo,
        f"diff --git a/app/a.rb b/app/a.rb\n--- a/app/a.rb\n+++ b/.github/workflows/c.yml\n{FIX}",
    )
    assert sorted(moved.info.files) == [".github/workflows/c.yml", "app/a.rb"]
    assert moved.info.deleted == ["app/a.rb"]
    assert ".github/workflows/c.yml: CI configuration" in risks(moved)
    # Hunk counts that disagree with the hunk's lines: git refuses the patch.
    corrupt = git_view(
        repo[0], "", repo[1], "--- a/app/a.rb\n+++ b/app/a.rb\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n"
    )
    assert isinstance(corrupt, str) and "corrupt patch" in corrupt


def test_removed_assertions_are_read_from_what_git_writes(repo: tuple[Path, str]) -> None:
    weakened = (
        "--- x/spec/a_spec.rb\n+++ y/spec/a_spec.rb\n@@ -1,2 +1,2 @@\n it { expect(a).to eq(1) }\n"
        "-it { expect(b).to eq(2) }\n+it { b }\n"
    )
    assert "spec/a_spec.rb: removes 1 assertion(s)" in risks(view(repo, weakened))


def test_paths_stay_in_the_project_and_out_of_git(repo: tuple[Path, str]) -> None:
    escape = git_view(
        repo[0], "app", repo[1], "--- /dev/null\n+++ b/../../x.txt\n@@ -0,0 +1 @@\n+x\n"
    )
    assert isinstance(escape, str)
    inside_git = git_view(
        repo[0], "", repo[1], "--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+x\n"
    )
    assert isinstance(inside_git, str)
    sub = view(repo, "--- a/a.rb\n+++ b/a.rb\n" + FIX, sub="app")
    assert sub.info.files == ["a.rb"] and list(sub.changes) == ["app/a.rb"]


def test_a_commit_must_hold_the_audited_change(repo: tuple[Path, str]) -> None:
    r, base = repo
    audited = view(repo, f"--- a/app/a.rb\n+++ b/app/a.rb\n{FIX}")
    other = (
        f"--- a/app/a.rb\n+++ b/app/a.rb\n{FIX}--- /dev/null\n+++ b/extra.txt\n@@ -0,0 +1 @@\n+x\n"
    )
    [same] = apply_in_order(r, "", base, [f"--- a/app/a.rb\n+++ b/app/a.rb\n{FIX}"], [audited.tree])
    assert isinstance(same, Applied) and same.tree == audited.tree
    [refused] = apply_in_order(r, "", base, [other], [audited.tree])
    assert isinstance(refused, str) and refused.startswith("not the audited change")
    assert "extra.txt" in refused


# --- the auditor, end to end -------------------------------------------------------------------


def _fix_hunk() -> str:
    """The real fix of the regressed example, as a hunk without file headers."""
    return patch_to(5).split(f"+++ b/{PRICING}\n", 1)[1].removesuffix("```\n")


DISGUISED = {
    "ci-behind-prefixes": (
        f"--- x/{PRICING}\n+++ y/{PRICING}\n{{fix}}"
        "--- /dev/null\n+++ y/.github/workflows/ci.yml\n@@ -0,0 +1,2 @@\n+on: push\n+jobs: {{}}\n",
        ".github/workflows/ci.yml: CI configuration",
    ),
    "migration-behind-a-rename": (
        f"--- x/{PRICING}\n+++ y/{PRICING}\n{{fix}}"
        "diff --git x/docs/notes.sql y/db/migrate/002_notes.sql\nsimilarity index 100%\n"
        "rename from docs/notes.sql\nrename to db/migrate/002_notes.sql\n",
        "db/migrate/002_notes.sql: database migration or schema",
    ),
    "manifest-behind-a-copy": (
        f"--- x/{PRICING}\n+++ y/{PRICING}\n{{fix}}"
        "diff --git x/pyproject.toml y/constraints.txt\nsimilarity index 100%\n"
        "copy from pyproject.toml\ncopy to constraints.txt\n",
        "constraints.txt: dependency manifest or lock file",
    ),
}


@pytest.mark.parametrize("case", sorted(DISGUISED))
def test_a_disguised_patch_that_fixes_the_tests_is_risky_never_passed(
    tmp_path: Path, case: str
) -> None:
    repo, report, _ = regressed_repo(tmp_path)
    (repo / "docs").mkdir()
    (repo / "docs" / "notes.sql").write_text("-- notes\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "notes")
    head = git(repo, "rev-parse", "HEAD").strip()
    template, risk = DISGUISED[case]
    patch = template.format(fix=_fix_hunk())
    cases = parse_reports([report], repo=repo).cases
    chain = get_toolchain("python-pytest")
    failing = [c for c in cases if c.status in ("failed", "error")]
    [group] = group_failures(failing, chain.file_rules(repo))

    audit = review_patch(
        repo_root=repo,
        sub="",
        base_commit=head,
        chain=chain,
        patch=patch,
        group=group,
        diagnosis=None,
        known_failures=[],
        settings=load_settings(repo),
    )

    assert audit.rerun_output.endswith("all passed"), audit.feedback  # the fix really works
    assert audit.verdict == "RISKY", audit.feedback
    assert risk in audit.risks
    assert PRICING in audit.changed_files and audit.tree is not None
    # The tree the audit saw is exactly git's application of the patch on the base commit.
    shown = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "--name-only", audit.tree],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert risk.split(":")[0] in shown
    assert git(repo, "status", "--porcelain") == ""  # the user's checkout never changed


def test_git_view_says_why_a_patch_does_not_apply(repo: tuple[Path, str]) -> None:
    good = view(repo, "--- a/app/a.rb\n+++ b/app/a.rb\n@@ -1,2 +1,2 @@\n-one\n+uno\n two\n")
    assert good.info.files == ["app/a.rb"] and good.info.added_text["app/a.rb"] == ["uno"]
    stale = git_view(repo[0], "", repo[1], "--- a/app/a.rb\n+++ b/app/a.rb\n@@ -1 +1 @@\n-9\n+2\n")
    assert isinstance(stale, str) and "app/a.rb" in stale and "patch does not apply" in stale
    missing = git_view(repo[0], "", repo[1], "--- a/nope.rb\n+++ b/nope.rb\n@@ -1 +1 @@\n-x\n+y\n")
    assert isinstance(missing, str) and "nope.rb" in missing
    garbage = git_view(repo[0], "", repo[1], "this is not a diff")
    assert isinstance(garbage, str) and garbage
    assert git(repo[0], "status", "--porcelain") == ""  # nothing was written
