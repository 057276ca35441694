"""Source discovery and source -> spec mapping on small Rails-like and Python trees."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

from tasks.core.errors import BadInputError
from tasks.core.types import MappedFile
from tasks.toolchains.mapping import discover_sources, list_files, map_repo
from tasks.toolchains.registry import detect_toolchain, get_toolchain


def _tree(root: Path, files: Iterable[str] | dict[str, str]) -> Path:
    contents = files if isinstance(files, dict) else dict.fromkeys(files, "# x\n")
    for name, text in contents.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _by_source(files: list[MappedFile]) -> dict[str, MappedFile]:
    return {f.source: f for f in files}


# --- toolchain detection ------------------------------------------------------------------------


def test_detects_ruby_and_python(tmp_path: Path) -> None:
    ruby = _tree(tmp_path / "r", ["Gemfile", "spec/spec_helper.rb"])
    assert detect_toolchain(ruby) == "ruby-rspec"
    for marker in ("pyproject.toml", "setup.cfg", "setup.py"):
        py = _tree(tmp_path / marker, [marker, "tests/test_x.py"])
        assert detect_toolchain(py) == "python-pytest"


def test_both_toolchains_prefer_ruby_and_override_wins(tmp_path: Path) -> None:
    both = _tree(tmp_path, ["Gemfile", "spec/a_spec.rb", "pyproject.toml", "tests/test_a.py"])
    assert detect_toolchain(both) == "ruby-rspec"
    assert detect_toolchain(both, "python-pytest") == "python-pytest"


@pytest.mark.parametrize(
    "files",
    [
        ["Gemfile"],  # no spec/
        ["spec/a_spec.rb"],  # no Gemfile
        ["pyproject.toml"],  # no tests/
        ["README.md"],
    ],
)
def test_no_toolchain_is_a_clear_bad_input(tmp_path: Path, files: list[str]) -> None:
    _tree(tmp_path, files)
    with pytest.raises(BadInputError, match="no toolchain detected") as info:
        detect_toolchain(tmp_path)
    assert "\n" not in str(info.value) and str(tmp_path) in str(info.value)


def test_bad_override_and_missing_repo(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="unknown toolchain 'maven'"):
        detect_toolchain(tmp_path, "maven")
    with pytest.raises(BadInputError, match="not a directory"):
        map_repo(tmp_path / "missing")


# --- Rails ------------------------------------------------------------------------------------

RAILS_FILES = [
    "Gemfile",
    "config/application.rb",
    "config/routes.rb",
    "db/schema.rb",
    "db/migrate/001_create_users.rb",
    "bin/setup.rb",
    "test/models/user_test.rb",
    "vendor/gems/x/lib/x.rb",
    "app/models/application_record.rb",
    "app/models/user.rb",
    "app/models/user/profile.rb",
    "app/models/post.rb",
    "app/models/concerns/trackable.rb",
    "app/serializers/user_serializer.rb",
    "app/controllers/application_controller.rb",
    "app/controllers/admin/users_controller.rb",
    "app/controllers/posts_controller.rb",
    "app/controllers/sessions_controller.rb",
    "app/controllers/concerns/authn.rb",
    "app/mailers/application_mailer.rb",
    "app/mailers/user_mailer.rb",
    "app/helpers/posts_helper.rb",
    "app/jobs/application_job.rb",
    "app/jobs/cleanup_job.rb",
    "app/services/billing/charge.rb",
    "app/services/log/writer.rb",
    "app/views/users/index.html.erb",
    "app/views/users/show.json.rb",
    "app/assets/config/manifest.js",
    "app/assets/odd.rb",
    "app/channels/application_cable/connection.rb",
    "lib/x/y.rb",
    "lib/money.rb",
    "lib/tasks/cleanup.rake",
    "lib/generators/thing/templates/model.rb",
    "tmp/cache/x.rb",
    "log/x.rb",
    "spec/spec_helper.rb",
    "spec/rails_helper.rb",
    "spec/factories/users.rb",
    "spec/support/auth_helpers.rb",
    "spec/models/user_spec.rb",
    "spec/models/user/validations_spec.rb",
    "spec/models/user/scopes/active_spec.rb",
    "spec/models/user/profile_spec.rb",
    "spec/requests/admin/users_spec.rb",
    "spec/controllers/admin/users_controller_spec.rb",
    "spec/requests/posts_controller_spec.rb",
    "spec/mailers/user_mailer_spec.rb",
    "spec/services/billing/charge_spec.rb",
    "spec/lib/x/y_spec.rb",
    "spec/money_spec.rb",
]


@pytest.fixture
def rails(tmp_path: Path) -> Path:
    return _tree(tmp_path / "rails", RAILS_FILES)


def test_rails_sources_and_kinds_by_location(rails: Path) -> None:
    kinds = {s.path: s.kind for s in discover_sources(rails, "ruby-rspec")}
    assert kinds == {
        "app/models/user.rb": "model",
        "app/models/user/profile.rb": "model",
        "app/models/post.rb": "model",
        "app/models/concerns/trackable.rb": "ruby",
        "app/serializers/user_serializer.rb": "serializer",
        "app/controllers/admin/users_controller.rb": "controller",
        "app/controllers/posts_controller.rb": "controller",
        "app/controllers/sessions_controller.rb": "controller",
        "app/controllers/concerns/authn.rb": "ruby",
        "app/mailers/user_mailer.rb": "mailer",
        "app/helpers/posts_helper.rb": "helper",
        "app/jobs/cleanup_job.rb": "ruby",
        "app/services/billing/charge.rb": "ruby",
        "app/services/log/writer.rb": "ruby",
        "lib/x/y.rb": "ruby",
        "lib/money.rb": "ruby",
    }


def test_rails_mapping(rails: Path) -> None:
    mapping = map_repo(rails)
    assert mapping.toolchain == "ruby-rspec"
    got = {f.source: (f.specs, f.expected_spec) for f in mapping.files}
    assert got["app/models/user.rb"] == (
        # its own spec plus everything under spec/models/user/ except profile's exact spec
        [
            "spec/models/user/scopes/active_spec.rb",
            "spec/models/user/validations_spec.rb",
            "spec/models/user_spec.rb",
        ],
        "spec/models/user_spec.rb",
    )
    assert got["app/models/user/profile.rb"] == (
        ["spec/models/user/profile_spec.rb"],
        "spec/models/user/profile_spec.rb",
    )
    assert got["app/controllers/admin/users_controller.rb"] == (
        ["spec/controllers/admin/users_controller_spec.rb", "spec/requests/admin/users_spec.rb"],
        "spec/requests/admin/users_spec.rb",
    )
    assert got["app/controllers/posts_controller.rb"] == (
        ["spec/requests/posts_controller_spec.rb"],
        "spec/requests/posts_spec.rb",
    )
    assert got["app/controllers/sessions_controller.rb"] == ([], "spec/requests/sessions_spec.rb")
    assert got["app/controllers/concerns/authn.rb"] == (
        [],
        "spec/controllers/concerns/authn_spec.rb",
    )
    assert got["app/models/concerns/trackable.rb"] == ([], "spec/models/concerns/trackable_spec.rb")
    assert got["app/mailers/user_mailer.rb"] == (
        ["spec/mailers/user_mailer_spec.rb"],
        "spec/mailers/user_mailer_spec.rb",
    )
    assert got["app/services/billing/charge.rb"] == (
        ["spec/services/billing/charge_spec.rb"],
        "spec/services/billing/charge_spec.rb",
    )
    assert got["app/jobs/cleanup_job.rb"] == ([], "spec/jobs/cleanup_job_spec.rb")
    assert got["lib/x/y.rb"] == (["spec/lib/x/y_spec.rb"], "spec/lib/x/y_spec.rb")
    # The gem layout spec/money_spec.rb counts, but new specs go under spec/lib/.
    assert got["lib/money.rb"] == (["spec/money_spec.rb"], "spec/lib/money_spec.rb")
    assert mapping.untested == [
        "app/controllers/concerns/authn.rb",
        "app/controllers/sessions_controller.rb",
        "app/helpers/posts_helper.rb",
        "app/jobs/cleanup_job.rb",
        "app/models/concerns/trackable.rb",
        "app/models/post.rb",
        "app/serializers/user_serializer.rb",
        "app/services/log/writer.rb",
    ]
    # Support files and factories are not specs of anything.
    every_spec = {s for f in mapping.files for s in f.specs}
    assert not any(s.startswith(("spec/factories/", "spec/support/")) for s in every_spec)


def test_directory_specs_go_to_parent_when_no_exact_owner(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        ["Gemfile", "app/models/user.rb", "spec/models/user/profile_spec.rb"],
    )
    assert map_repo(repo).files[0].specs == ["spec/models/user/profile_spec.rb"]


# --- Python -------------------------------------------------------------------------------------

PY_SRC = {
    "pyproject.toml": "[project]\nname = 'inv'\n",
    "setup.py": "from setuptools import setup\nsetup()\n",
    "docs/conf.py": "project = 'inv'\n",
    "src/inv/__init__.py": (
        '"""Inventory."""\n\nfrom inv.models import Item\n\n__all__ = ["Item"]\n'
    ),
    "src/inv/models.py": "class Item: ...\n",
    "src/inv/utils.py": "def f() -> int:\n    return 1\n",
    "src/inv/store/__init__.py": "def connect() -> None:\n    pass\n",
    "src/inv/store/db.py": "X = 1\n",
    "src/inv/store/utils.py": "Y = 2\n",
    "src/inv/api/__init__.py": "",
    "src/inv/api/views.py": "Z = 3\n",
    "src/inv/conftest.py": "",
    "src/inv/tests/test_inner.py": "",
    "src/inv/migrations/0001_initial.py": "",
    "tests/__init__.py": "",
    "tests/conftest.py": "",
    "tests/helpers.py": "",
    "tests/test_models.py": "",
    "tests/models/test_edge_cases.py": "",
    "tests/store/test_db.py": "",
    "tests/test_inv_utils.py": "",
    "tests/test_store.py": "",
}


def test_python_src_layout(tmp_path: Path) -> None:
    mapping = map_repo(_tree(tmp_path, PY_SRC))
    assert mapping.toolchain == "python-pytest"
    got = {f.source: (f.specs, f.expected_spec) for f in mapping.files}
    assert all(f.kind == "python" for f in mapping.files)
    assert got == {
        # Empty and import-only __init__ files, conftest, tests, migrations, docs: skipped.
        "src/inv/models.py": (
            ["tests/models/test_edge_cases.py", "tests/test_models.py"],
            "tests/test_models.py",
        ),
        "src/inv/utils.py": (["tests/test_inv_utils.py"], "tests/test_utils.py"),
        # A non-trivial package __init__ is the module "store".
        "src/inv/store/__init__.py": (["tests/test_store.py"], "tests/test_store.py"),
        # tests/store/ mirrors the package without its top level: new tests go there too.
        "src/inv/store/db.py": (["tests/store/test_db.py"], "tests/store/test_db.py"),
        "src/inv/store/utils.py": ([], "tests/store/test_utils.py"),
        "src/inv/api/views.py": ([], "tests/test_views.py"),
    }
    assert mapping.untested == ["src/inv/api/views.py", "src/inv/store/utils.py"]


def test_python_flat_layout_mirrored_tests_and_name_clashes(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        {
            "setup.cfg": "",
            "tool.py": "def main() -> None: ...\n",
            "scripts/run.py": "",  # not a package: not a source
            "conftest.py": "",
            "pkg/__init__.py": "",
            "pkg/a/__init__.py": "",
            "pkg/a/helpers.py": "A = 1\n",
            "pkg/b/__init__.py": "",
            "pkg/b/helpers.py": "B = 1\n",
            "pkg/core.py": "C = 1\n",
            "tests/test_helpers.py": "",
            "tests/test_tool.py": "",
            "tests/pkg/test_core.py": "",
        },
    )
    mapping = map_repo(repo)
    got = {f.source: (f.specs, f.expected_spec) for f in mapping.files}
    assert got == {
        "tool.py": (["tests/test_tool.py"], "tests/test_tool.py"),
        "pkg/core.py": (["tests/pkg/test_core.py"], "tests/pkg/test_core.py"),
        # tests/pkg/ mirrors the whole package path; an ambiguous flat test counts for both.
        "pkg/a/helpers.py": (["tests/test_helpers.py"], "tests/pkg/a/test_helpers.py"),
        "pkg/b/helpers.py": (["tests/test_helpers.py"], "tests/pkg/b/test_helpers.py"),
    }


def test_python_clashing_expected_paths_are_made_unique(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        ["pyproject.toml", "tests/test_other.py", "pkg/__init__.py", "pkg/a/x.py", "pkg/b/x.py"],
    )
    expected = {f.source: f.expected_spec for f in map_repo(repo).files}
    assert expected == {
        "pkg/a/x.py": "tests/test_pkg_a_x.py",
        "pkg/b/x.py": "tests/test_pkg_b_x.py",
    }


def test_python_dir_mirror_of_module_and_suffix_tests(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        [
            "pyproject.toml",
            "src/app/engine.py",
            "tests/engine/test_start.py",
            "tests/engine/deep/test_stop.py",
            "tests/engine_test.py",
        ],
    )
    (mapped,) = map_repo(repo).files
    assert mapped.specs == [
        "tests/engine/deep/test_stop.py",
        "tests/engine/test_start.py",
        "tests/engine_test.py",
    ]


# --- listing ------------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.mark.slow
def test_git_repo_respects_gitignore_and_lists_untracked(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        {
            ".gitignore": "app/models/generated.rb\nscratch/\n",
            "Gemfile": "",
            "spec/models/user_spec.rb": "",
            "app/models/user.rb": "",
            "app/models/generated.rb": "",
            "scratch/app/models/z.rb": "",
            "vendor/bundle/lib/gem.rb": "",
        },
    )
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "init")
    (repo / "app/models/fresh.rb").write_text("")  # untracked, not ignored: listed
    (repo / "app/models/deleted.rb").write_text("")
    _git(repo, "add", "app/models/deleted.rb")
    (repo / "app/models/deleted.rb").unlink()  # in the index, gone from disk: not listed

    files = list_files(repo)
    assert "app/models/generated.rb" not in files
    assert "app/models/deleted.rb" not in files
    assert not any(f.startswith(("scratch/", "vendor/", ".git/")) for f in files)
    assert "app/models/fresh.rb" in files and ".gitignore" in files
    mapping = map_repo(repo)
    assert [f.source for f in mapping.files] == ["app/models/fresh.rb", "app/models/user.rb"]
    assert mapping.untested == ["app/models/fresh.rb"]


def test_walk_skips_tool_directories(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        [
            "lib/a.rb",
            "lib/cache/log/b.rb",
            "node_modules/x/lib/c.rb",
            "lib/node_modules/d.rb",
            "coverage/e.rb",
            "log/f.rb",
            "tmp/g.rb",
            "vendor/h.rb",
            ".venv/lib/i.py",
            "lib/__pycache__/j.pyc",
        ],
    )
    assert list_files(repo) == ["lib/a.rb", "lib/cache/log/b.rb"]


def test_python_init_files_with_only_imports_are_skipped(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        {
            "pyproject.toml": "",
            "manage.py": "import django\n",
            "tests/test_x.py": "",
            "pkg/__init__.py": '"""Doc."""\n__version__ = "1.0"\n',
            "pkg/typed/__init__.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from pkg.x import X\n"
                "try:\n    import ujson as json\nexcept ImportError:\n    import json\n"
                "__all__: list[str] = []\n"
            ),
            "pkg/logic/__init__.py": "import os\n\nDEBUG = os.environ.get('DEBUG')\n",
            "pkg/broken/__init__.py": "def oops(:\n",  # unparsable: kept, a human should look
        },
    )
    assert [s.path for s in discover_sources(repo, "python-pytest")] == [
        "pkg/broken/__init__.py",
        "pkg/logic/__init__.py",
    ]


@pytest.mark.slow
def test_project_inside_a_larger_git_repo(tmp_path: Path) -> None:
    outer = _tree(
        tmp_path,
        {
            ".gitignore": "scratch/\n*.generated.rb\n",
            "apps/shop/Gemfile": "",
            "apps/shop/spec/models/user_spec.rb": "",
            "apps/shop/app/models/user.rb": "",
            "apps/shop/app/models/cache.generated.rb": "",
            "scratch/copy/Gemfile": "",
            "scratch/copy/spec/spec_helper.rb": "",
            "scratch/copy/app/models/order.rb": "",
        },
    )
    _git(outer, "init", "-q")
    # A subdirectory project: paths are relative to it, the outer .gitignore still applies.
    shop = map_repo(outer / "apps/shop")
    assert [(f.source, f.specs) for f in shop.files] == [
        ("app/models/user.rb", ["spec/models/user_spec.rb"])
    ]
    # A project inside an ignored directory is still listed (by walking it).
    assert map_repo(outer / "scratch/copy").untested == ["app/models/order.rb"]


# --- layouts met in the field (issue 24) ------------------------------------------------------


def test_python_tests_inside_the_package(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        {
            "setup.cfg": "",
            "pkg/__init__.py": "",
            "pkg/core.py": "C = 1\n",
            "pkg/helpers.py": "H = 1\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/engine.py": "E = 1\n",
            "pkg/tests/__init__.py": "",
            "pkg/tests/test_core.py": "",
            "pkg/sub/tests/test_engine.py": "",
        },
    )
    assert detect_toolchain(repo) == "python-pytest"  # no top-level tests/: still pytest's
    got = {f.source: (f.specs, f.expected_spec) for f in map_repo(repo).files}
    assert got == {
        "pkg/core.py": (["pkg/tests/test_core.py"], "pkg/tests/test_core.py"),
        "pkg/sub/engine.py": (["pkg/sub/tests/test_engine.py"], "pkg/tests/test_engine.py"),
        # New tests go where the project keeps its tests.
        "pkg/helpers.py": ([], "pkg/tests/test_helpers.py"),
    }
    # pytest's testpaths naming the package means its test directories, never its code.
    (repo / "pytest.ini").write_text("[pytest]\ntestpaths = pkg\n")
    rules = get_toolchain("python-pytest").file_rules(repo)
    assert rules.test_roots == ["pkg/tests"]
    assert not rules.is_test_side("pkg/core.py") and rules.is_test_side("pkg/tests/test_core.py")
    assert map_repo(repo).files[1].expected_spec == "pkg/tests/test_helpers.py"


def test_python_test_tree_named_after_the_package(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        [
            "pyproject.toml",
            "src/pkg/__init__.py",
            "src/pkg/core.py",
            "src/pkg/io/__init__.py",
            "src/pkg/io/reader.py",
            "tests/test_pkg/__init__.py",
            "tests/test_pkg/test_core.py",
            "tests/test_pkg/test_io/test_reader.py",
            "tests/test_pkg/io/test_reader_errors.py",
        ],
    )
    got = {f.source: f.specs for f in map_repo(repo).files}
    assert got == {
        "src/pkg/core.py": ["tests/test_pkg/test_core.py"],
        "src/pkg/io/reader.py": [
            "tests/test_pkg/io/test_reader_errors.py",
            "tests/test_pkg/test_io/test_reader.py",
        ],
    }
    # A package's own tests: in its folder under any name, or named after __init__.
    tree = {
        "pkg/__init__.py": "X = 1\n",
        "pkg/utils/__init__.py": "def f():\n    return 1\n",
        "pkg/parsers/__init__.py": "",
        "pkg/parsers/rst/__init__.py": "class Parser:\n    pass\n",
        "pkg/parsers/rst/tables.py": "T = 1\n",
    }
    specs = [
        "test/test__init__.py",
        "test/test_utils/test__init__.py",
        "test/test_parsers/test_rst/test_block_quotes.py",
        "test/test_parsers/test_rst/test_tables.py",
    ]
    docs = _tree(tmp_path / "d", {**tree, "setup.py": "", **dict.fromkeys(specs, "")})
    assert {f.source: f.specs for f in map_repo(docs).files} == {
        "pkg/__init__.py": ["test/test__init__.py"],
        "pkg/utils/__init__.py": ["test/test_utils/test__init__.py"],
        "pkg/parsers/rst/__init__.py": ["test/test_parsers/test_rst/test_block_quotes.py"],
        "pkg/parsers/rst/tables.py": ["test/test_parsers/test_rst/test_tables.py"],
    }
    # A top-level tree named after the package is its test root.
    other = _tree(
        tmp_path / "o", ["setup.py", "lib/__init__.py", "lib/x.py", "lib_tests/test_x.py"]
    )
    assert {f.source: f.specs for f in map_repo(other).files} == {
        "lib/x.py": ["lib_tests/test_x.py"]
    }


def test_python_private_modules_are_tested_under_their_public_name(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        [
            "pyproject.toml",
            "src/pkg/_base.py",
            "src/pkg/_impl/__init__.py",
            "src/pkg/_impl/_engine.py",
            "src/pkg/_util.py",
            "src/pkg/util.py",
            "tests/test_base.py",
            "tests/impl/test_engine.py",
            "tests/test_util.py",
        ],
    )
    mapping = map_repo(repo)
    got = {f.source: f.specs for f in mapping.files}
    # A new test of a private module is named as its public name.
    expected = {f.source: f.expected_spec for f in mapping.files}
    assert expected["src/pkg/_impl/_engine.py"] == "tests/impl/test_engine.py"
    assert got == {
        "src/pkg/_base.py": ["tests/test_base.py"],
        "src/pkg/_impl/_engine.py": ["tests/impl/test_engine.py"],
        # The exact spelling wins when both exist.
        "src/pkg/util.py": ["tests/test_util.py"],
        "src/pkg/_util.py": [],
    }


def test_python_more_test_files_per_module(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path,
        [
            "pyproject.toml",
            "src/pkg/lazy_loader.py",
            "src/pkg/graph.py",
            "src/pkg/graph_view.py",
            "tests/test_lazy_loader.py",
            "tests/test_lazy_loader_trace.py",
            "tests/test_lazy_loader_fb.py",
            "tests/test_graph_view.py",
            "tests/test_graph_view_extra.py",
            "tests/graph_slow_test.py",
        ],
    )
    got = {f.source: f.specs for f in map_repo(repo).files}
    assert got == {
        "src/pkg/lazy_loader.py": [
            "tests/test_lazy_loader.py",
            "tests/test_lazy_loader_fb.py",
            "tests/test_lazy_loader_trace.py",
        ],
        # The longest module name that a file's name starts with takes it.
        "src/pkg/graph_view.py": ["tests/test_graph_view.py", "tests/test_graph_view_extra.py"],
        "src/pkg/graph.py": ["tests/graph_slow_test.py"],
    }
