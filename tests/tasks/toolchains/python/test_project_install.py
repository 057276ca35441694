"""What keys a project's installed metadata: the version git gives the worktree (hatch-vcs,
setuptools-scm), the version a module spells (flit, hatch's path), else nothing beyond the
build files."""

from __future__ import annotations

from pathlib import Path

from tasks.toolchains.python.project_install import build_env, installable, key_values
from tests.examples_repo import git
from tests.field_repos import make_repo, write_tree

FLIT = (
    '[build-system]\nrequires = ["flit_core>=3"]\nbuild-backend = "flit_core.buildapi"\n'
    '[project]\nname = "my-mod"\ndynamic = ["version", "description"]\n'
)


def test_a_version_from_git_is_the_worktrees(tmp_path: Path) -> None:
    text = (
        '[build-system]\nrequires = ["hatchling", "hatch-vcs"]\n'
        '[project]\nname = "v"\ndynamic = ["version"]\n[tool.hatch.version]\nsource = "vcs"\n'
    )
    repo = make_repo(tmp_path / "v", {"pyproject.toml": text, "v/__init__.py": ""})
    git(repo, "tag", "2.0.0")
    assert key_values(repo) == {"(project version from git)": "2.0.0"}
    assert build_env(repo)["SETUPTOOLS_SCM_PRETEND_VERSION"] == "2.0.0"
    write_tree(repo, {"x.txt": "x"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "next")
    assert key_values(repo)["(project version from git)"].startswith("2.0.1.dev1+g")


def test_a_version_spelled_in_a_module_keys_by_its_value(tmp_path: Path) -> None:
    init = '"""Doc."""\n\n__version__ = "1.4"\n\n\ndef f():\n    return 1\n'
    repo = write_tree(tmp_path / "f", {"pyproject.toml": FLIT, "my_mod/__init__.py": init})
    assert key_values(repo) == {"(project version in my_mod/__init__.py)": "1.4"}
    # Another edit of the module is no other environment; another version is.
    (repo / "my_mod/__init__.py").write_text(init.replace("return 1", "return 2"))
    assert key_values(repo) == {"(project version in my_mod/__init__.py)": "1.4"}
    assert build_env(repo) == {}


def test_a_static_version_is_in_the_build_files_already(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "s", {"pyproject.toml": '[project]\nname = "s"\nversion = "1"\n'})
    assert installable(repo) and key_values(repo) == {}
    assert not installable(write_tree(tmp_path / "n", {"requirements.txt": "x\n"}))
