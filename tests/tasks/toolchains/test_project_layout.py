"""What Autopilot reads from a project without running it: package roots, generated version
files, the isolated test interpreter, function bodies (for evidence), and the name rules."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tasks.facts.evidence import exercised_by
from tasks.toolchains.mapping import list_specs, map_repo
from tasks.toolchains.python.env import isolated_python
from tasks.toolchains.python.project import (
    package_roots,
    project_packages,
    scm_version,
    write_version_files,
)
from tasks.toolchains.python.syntax import body_lines as python_body_lines
from tasks.toolchains.registry import get_toolchain
from tasks.toolchains.ruby.syntax import body_lines as ruby_body_lines
from tests.examples_repo import git
from tests.field_repos import make_repo, write_tree


@pytest.mark.parametrize(
    ("files", "roots"),
    [
        ({"src/a/__init__.py": ""}, ["src"]),
        ({"pyproject.toml": '[tool.setuptools]\npackage-dir = {"" = "lib"}\n'}, ["lib"]),
        ({"pyproject.toml": '[tool.setuptools.packages.find]\nwhere = ["code"]\n'}, ["code"]),
        ({"pyproject.toml": '[tool.hatch.build.targets.wheel]\npackages = ["py/a"]\n'}, ["py"]),
        (
            {"pyproject.toml": '[tool.poetry]\npackages = [{include = "a", from = "lib"}]\n'},
            ["lib"],
        ),
        ({"setup.cfg": "[options]\npackage_dir =\n    =lib\n"}, ["lib"]),
        ({"setup.cfg": "[options.packages.find]\nwhere = code\n"}, ["code"]),
        # Outside the project, or the project itself: never a root.
        ({"pyproject.toml": '[tool.setuptools]\npackage-dir = {"" = ".."}\n'}, []),
        ({"pyproject.toml": '[tool.setuptools]\npackage-dir = {"" = "."}\n'}, []),
    ],
)
def test_package_roots_follow_the_build_configuration(
    tmp_path: Path, files: dict[str, str], roots: list[str]
) -> None:
    repo = write_tree(tmp_path / "p", files)
    for name in ("src", "lib", "code", "py"):
        if any(name in f or name in t for f, t in files.items()):
            (repo / name / "a").mkdir(parents=True, exist_ok=True)
            (repo / name / "a" / "__init__.py").write_text("")
    got = [p.relative_to(repo.resolve()).as_posix() for p in package_roots(repo)]
    assert got == roots


def test_project_packages_are_found_in_the_roots_and_at_the_top(tmp_path: Path) -> None:
    repo = write_tree(
        tmp_path,
        {
            "src/calc/__init__.py": "",
            "src/single.py": "",
            "flat/__init__.py": "",
            "tests/__init__.py": "",
            "docs/__init__.py": "",
            "setup.py": "",
        },
    )
    assert project_packages(repo, package_roots(repo)) == ["calc", "flat", "single"]


def _tagged_repo(tmp_path: Path, tag: str | None, commits_after: int) -> Path:
    repo = make_repo(tmp_path / "v", {"a.txt": "a\n"})
    if tag:
        git(repo, "tag", tag)
    for n in range(commits_after):
        write_tree(repo, {"a.txt": f"{n}\n"})
        git(repo, "commit", "-qam", f"c{n}")
    return repo


@pytest.mark.parametrize(
    ("tag", "after", "expected"),
    [
        ("v1.4.0", 0, "1.4.0"),
        ("v1.4.0", 2, "1.4.1.dev2+g"),
        ("2.0", 1, "2.1.dev1+g"),
        (None, 0, "0.1.dev1+g"),
    ],
)
def test_the_version_follows_setuptools_scms_default_scheme(
    tmp_path: Path, tag: str | None, after: int, expected: str
) -> None:
    repo = _tagged_repo(tmp_path, tag, after)
    version, scm = scm_version(repo)
    assert version.startswith(expected)
    if "+g" in expected:
        sha = git(repo, "rev-parse", "--short=8", "HEAD").strip()
        assert version.endswith(f"+g{sha}") and scm.short_node == f"g{sha}"


def test_version_files_are_written_only_when_missing_and_inside(tmp_path: Path) -> None:
    repo = _tagged_repo(tmp_path, "v3.0.0", 0)
    write_tree(
        repo,
        {
            "pyproject.toml": (
                '[tool.setuptools_scm]\nversion_file = "pkg/_v.py"\nwrite_to = "../escape.py"\n\n'
                '[tool.hatch.build.hooks.vcs]\nversion-file = "pkg/VERSION"\n'
                'template = "{version} {scm_version.nonsense}"\n'
            ),
        },
    )
    notes = write_version_files(repo)
    assert [n.split(":")[0] for n in notes] == ["pkg/_v.py", "pkg/VERSION"]
    namespace: dict[str, object] = {}
    exec((repo / "pkg/_v.py").read_text(), namespace)
    assert namespace["__version__"] == "3.0.0" and namespace["version_tuple"] == (3, 0, 0)
    # A template that cannot be filled falls back to the default for its kind.
    assert (repo / "pkg/VERSION").read_text() == "3.0.0\n"
    assert not (tmp_path / "escape.py").exists()
    assert write_version_files(repo) == []  # present now: left alone


def test_the_isolated_interpreter_has_pytest_and_coverage_and_nothing_else(tmp_path: Path) -> None:
    python = isolated_python(tmp_path)
    assert python == isolated_python(tmp_path)  # built once
    probe = (
        "import importlib.util as u\n"
        "print(*[m for m in ('pytest', 'coverage', 'pluggy', 'rich', 'prefect', 'yaml', 'pydantic')"
        " if u.find_spec(m)])"
    )
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["pytest", "coverage", "pluggy"]


@pytest.mark.slow
def test_the_isolated_interpreter_needs_nothing_of_autopilots_installation(
    tmp_path: Path,
) -> None:
    """Self-contained: a sandbox that shows the system, the base interpreter and the
    environment's own directory, and not Autopilot's venv, runs pytest with coverage."""
    import os
    import shutil
    import sys

    if shutil.which("bwrap") is None:
        pytest.skip("bwrap not installed")
    env = isolated_python(tmp_path / "home").parent.parent
    assert not any(p.is_symlink() for p in (env / "lib").rglob("*"))
    base = os.path.realpath(sys.base_prefix)
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--dev", "/dev", "--proc", "/proc"]
    for system in ("/usr", "/bin", "/lib", "/lib64", "/etc"):
        if os.path.exists(system):
            argv += ["--ro-bind", system, system]
    argv += ["--tmpfs", "/tmp", "--ro-bind", base, base, "--ro-bind", str(env), str(env)]
    assert not sys.prefix.startswith((str(env), base))  # Autopilot's venv stays hidden
    code = "import pytest, coverage, sys; print(pytest.__version__, sys.prefix)"
    done = subprocess.run(
        [*argv, "--", str(env / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == str(env)


def test_function_bodies_are_what_counts_as_evidence(tmp_path: Path) -> None:
    py = "import os\n\nX = 1\n\n\ndef f(a):\n    if a:\n        return 1\n    return 2\n"
    assert python_body_lines(py) == {7, 8, 9}
    rb = "class A\n  has_many :b\n\n  def f\n    1\n  end\n\n  def g = 2\nend\n"
    assert ruby_body_lines(rb) == {5, 8}
    (tmp_path / "m.py").write_text(py)
    contexts = {"m.py": {"tests/test_load.py": {1, 3, 6}, "tests/test_f.py": {6, 7, 8}}}
    body_lines = get_toolchain("python-pytest").body_lines
    assert exercised_by(contexts, tmp_path, body_lines) == {"m.py": ["tests/test_f.py"]}


def _pyrepo(tmp_path: Path, files: dict[str, str]) -> Path:
    return write_tree(tmp_path / "p", {"pyproject.toml": '[project]\nname = "shop-db"\n', **files})


def test_plural_and_singular_test_names_map_exact_ones_first(tmp_path: Path) -> None:
    repo = _pyrepo(
        tmp_path,
        {
            "shopdb/__init__.py": "",
            "shopdb/table.py": "T = 1\n",
            "shopdb/query.py": "Q = 1\n",
            "shopdb/items.py": "I = 1\n",
            "shopdb/item.py": "J = 1\n",
            "tests/test_tables.py": "",
            "tests/test_queries.py": "",
            "tests/test_item.py": "",
        },
    )
    got = {f.source: f.specs for f in map_repo(repo).files}
    assert got["shopdb/table.py"] == ["tests/test_tables.py"]
    assert got["shopdb/query.py"] == ["tests/test_queries.py"]
    # test_item.py names item.py exactly: the plural-matching items.py does not get it.
    assert (got["shopdb/item.py"], got["shopdb/items.py"]) == (["tests/test_item.py"], [])


def test_a_suite_named_after_the_project_goes_to_what_defines_that_name(tmp_path: Path) -> None:
    repo = _pyrepo(
        tmp_path,
        {
            "src/shopdb/__init__.py": "from .database import ShopDB\n",
            "src/shopdb/database.py": "class ShopDB:\n    pass\n",
            "src/shopdb/other.py": "O = 1\n",
            "tests/test_shop_db.py": "",
        },
    )
    got = {f.source: f.specs for f in map_repo(repo).files}
    assert got == {
        "src/shopdb/database.py": ["tests/test_shop_db.py"],
        "src/shopdb/other.py": [],
    }


def test_the_projects_python_files_decide_what_a_test_file_is(tmp_path: Path) -> None:
    repo = _pyrepo(
        tmp_path,
        {
            "pytest.ini": "[pytest]\npython_files = check_*.py\n",
            "pkg/__init__.py": "",
            "pkg/core.py": "C = 1\n",
            "tests/check_core.py": "def test_c():\n    pass\n",
            "tests/test_core.py": "def test_c():\n    pass\n",
            "tests/helpers.py": "def make():\n    pass\n",
        },
    )
    assert list_specs(repo, "python-pytest") == ["tests/check_core.py"]
    mapping = map_repo(repo)
    assert mapping.warnings == [
        "tests/test_core.py: defines tests but pytest does not collect it (its name matches no "
        "python_files pattern: test_*.py or *_test.py by default)"
    ]


def test_ruby_sources_in_any_app_folder_and_misnamed_specs(tmp_path: Path) -> None:
    repo = write_tree(
        tmp_path / "r",
        {
            "Gemfile": "",
            "app/models/user.rb": "",
            "app/lib/tokens.rb": "",
            "app/controllers/private/posts_controller.rb": "",
            "spec/requests/private_posts_spec.rb": "",
            "extras/importer.rb": "",
            "engines/billing/lib/billing.rb": "",
            "config/initializers/x.rb": "",
            "db/seeds.rb": "",
            "features/step_definitions/steps.rb": "",
            "spec/extras/importer_spec.rb": "",
            "spec/models/user_test.rb": "RSpec.describe User do\nend\n",
            "spec/support/helpers.rb": "RSpec.configure do |c|\nend\n",
            "spec/factories/users.rb": "FactoryBot.define do\nend\n",
        },
    )
    mapping = map_repo(repo)
    got = {f.source: f.specs for f in mapping.files}
    assert got == {
        # The namespace flattened into the request spec's name.
        "app/controllers/private/posts_controller.rb": ["spec/requests/private_posts_spec.rb"],
        "app/lib/tokens.rb": [],
        "app/models/user.rb": [],
        "engines/billing/lib/billing.rb": [],
        "extras/importer.rb": ["spec/extras/importer_spec.rb"],
    }
    assert mapping.warnings == [
        "spec/models/user_test.rb: holds examples but RSpec only loads files ending in _spec.rb "
        "(rename it spec/models/user_test_spec.rb)"
    ]
    (repo / ".rspec").write_text("--pattern spec/**/*_test.rb\n")
    assert map_repo(repo).warnings == []
