"""A Node project with a package-lock.json gets its node_modules from a prepared environment:
``npm ci --ignore-scripts`` once per lock (real npm, real registry, in the install sandbox),
reused, then run by the real node-jest toolchain in the bwrap sandbox; npm's failures are one
line with a cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.core.config import SandboxSettings
from tasks.envs import EnvProblem, EnvSettings, PreparedEnv, prepare_environment
from tasks.sandbox.make import make_runner
from tasks.toolchains.node.toolchain import NodeJestToolchain
from tests.envs_projects import node_project

pytestmark = pytest.mark.slow
NODE = NodeJestToolchain().env_builder()
#: The root package's own install script (run in the package root, the environment): npm ci
#: runs it unless --ignore-scripts.
POSTINSTALL = "node -e \"require('fs').writeFileSync('SCRIPT-RAN', '')\""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, PreparedEnv]:
    """The ts_shape project (with an install script of its own) and its environment."""
    tmp = tmp_path_factory.mktemp("node-env")
    project = node_project("ts_shape", tmp / "ts_shape")
    package = json.loads((project / "package.json").read_text())
    package["scripts"]["postinstall"] = POSTINSTALL
    (project / "package.json").write_text(json.dumps(package, indent=2) + "\n")
    home = tmp / "home"
    env = prepare_environment(project, NODE, home=home)
    assert isinstance(env, PreparedEnv), env
    return project, home, env


def test_built_once_with_ci_and_no_script(built: tuple[Path, Path, PreparedEnv]) -> None:
    project, home, env = built
    assert env.built and env.stack == "node" and env.interpreter is None
    assert env.inputs == ["package-lock.json", "package.json"]
    # No install script ran (the project's own would have written this).
    assert not (Path(env.path) / "SCRIPT-RAN").exists() and not (project / "SCRIPT-RAN").exists()
    record = json.loads((Path(env.path) / ".autopilot" / "env.json").read_text())
    assert record["commands"][0].startswith("npm ci --ignore-scripts --no-audit --no-fund")
    modules = Path(env.path) / "node_modules"
    for package in ("jest", "ts-jest", "typescript", "@types/jest"):
        assert (modules / package / "package.json").is_file(), package
    assert not (project / "node_modules").exists()  # nothing was written to the project
    log_before = Path(env.log).read_bytes()
    again = prepare_environment(project, NODE, home=home)
    assert isinstance(again, PreparedEnv) and not again.built
    assert again.path == env.path and Path(again.log).read_bytes() == log_before


def test_the_toolchain_runs_the_suite_with_it(built: tuple[Path, Path, PreparedEnv]) -> None:
    project, _, env = built
    chain = NodeJestToolchain().using_env(env)
    runner = make_runner(
        SandboxSettings(backend="bwrap", timeout_s=180),
        project,
        toolchain_dirs=[*env.needs(project).dirs, *chain.sandbox_dirs(project)],
        cache_dir=project.parent / "cache",
    )
    suite = chain.run_suite(project, runner)
    v = suite.validation
    assert v.loaded and v.passed, v.load_error
    assert len(v.examples) == 6
    assert {e.file for e in v.examples} == {
        "src/stack.test.ts",
        "test/math.test.ts",
        "test/format.test.ts",
        "test/checkout.test.ts",
    }
    link = project / "node_modules"
    assert link.is_symlink() and link.resolve() == (Path(env.path) / "node_modules").resolve()
    assert any(p.startswith("node_modules: the prepared environment") for p in suite.prepared)


def test_a_lock_out_of_sync_is_one_line(tmp_path: Path) -> None:
    project = node_project("cjs_js", tmp_path / "p")
    package = json.loads((project / "package.json").read_text())
    package["devDependencies"]["jest"] = "29.6.0"
    (project / "package.json").write_text(json.dumps(package))
    got = prepare_environment(project, NODE, home=tmp_path / "home")
    assert isinstance(got, EnvProblem), got
    assert got.cause == "lock_unresolvable", got.message
    assert "jest@29.7.0 does not satisfy jest@29.6.0" in got.message
    assert "npm install" in got.message and "\n" not in got.one_line()


def test_offline_without_the_packages_is_one_line(tmp_path: Path) -> None:
    project = node_project("cjs_js", tmp_path / "p")
    got = prepare_environment(
        project, NODE, home=tmp_path / "home", settings=EnvSettings(network=False)
    )
    assert isinstance(got, EnvProblem), got
    assert got.cause == "no_registry_access", got.message
    assert "the network was not allowed" in got.message


def test_an_unknown_package_is_one_line(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    name = "autopilot-surely-not-a-package-xyz"
    deps = {"devDependencies": {name: "1.0.0"}}
    (project / "package.json").write_text(json.dumps({"name": "p", "version": "1.0.0", **deps}))
    lock = {
        "name": "p",
        "version": "1.0.0",
        "lockfileVersion": 3,
        "requires": True,
        "packages": {
            "": {"name": "p", "version": "1.0.0", **deps},
            f"node_modules/{name}": {"version": "1.0.0", "dev": True},
        },
    }
    (project / "package-lock.json").write_text(json.dumps(lock))
    got = prepare_environment(project, NODE, home=tmp_path / "home")
    assert isinstance(got, EnvProblem), got
    assert got.cause == "unknown_package", got.message
    assert f"{name}@1.0.0 not found" in got.message
