"""The Jest command of one run: its configuration, command line and environment (pure).

A project with its own Jest configuration (``jest.config.{js,ts,mjs,cjs,json}`` or a ``jest``
key in ``package.json``) runs with it, as its maintainers run it; Autopilot only adds what it
must read back (``--json``, jest-junit, istanbul JSON coverage into its scratch directory) and
``--ci --forceExit``. A project without one gets a generated configuration
(:func:`default_config`): TypeScript (and JavaScript, unless the project configures Babel)
through ts-jest with type checking, the node environment (a test file opts into jsdom with a
``@jest-environment jsdom`` docblock), coverage from every mapped source, and Autopilot's
type packages visible to the TypeScript compiler when the project has no ``node_modules``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from tasks.toolchains.node.tools import NodeTools

#: Jest configuration files, in Jest's own order of precedence.
CONFIG_FILES = (
    "jest.config.js",
    "jest.config.ts",
    "jest.config.mjs",
    "jest.config.cjs",
    "jest.config.json",
)
BABEL_CONFIGS = (
    "babel.config.js",
    "babel.config.json",
    "babel.config.cjs",
    "babel.config.mjs",
    ".babelrc",
    ".babelrc.js",
    ".babelrc.json",
)
#: Up to this many test files run in Jest's own process (``--runInBand``).
IN_BAND_FILES = 20
#: Test files as Jest finds them by default, plus ``.mjs``/``.cjs``/``.mts``/``.cts`` ones.
TEST_MATCH = [
    "**/__tests__/**/*.[jt]s?(x)",
    "**/?(*.)+(spec|test).[jt]s?(x)",
    "**/?(*.)+(spec|test).[cm][jt]s",
]
SCRATCH_PATTERN = "<rootDir>/.autopilot-tmp/"


def project_config(repo: Path) -> str | None:
    """The project's Jest configuration file (repository-relative), ``package.json`` when
    its ``jest`` key configures Jest, or None."""
    for name in CONFIG_FILES:
        if (repo / name).is_file():
            return name
    try:
        package = json.loads((repo / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return "package.json" if isinstance(package, dict) and "jest" in package else None


#: Node options a project's test script may give Jest's process that change what runs:
#: native ES modules (Jest's ``vm`` modules).
NODE_FLAGS = ("--experimental-vm-modules",)
_RUNS_JEST = re.compile(r"\bjest\b")


MAKEFILES = ("GNUmakefile", "makefile", "Makefile")


def node_flags(repo: Path) -> list[str]:
    """The :data:`NODE_FLAGS` the project's scripts start Jest with (``node
    --experimental-vm-modules node_modules/.bin/jest``, ``NODE_OPTIONS=... jest``), in its
    ``package.json`` scripts or its Makefile's recipes: a project of native ES modules runs
    only with them, as its maintainers run it."""
    texts: list[str] = []
    try:
        package = json.loads((repo / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        package = None
    scripts = package.get("scripts") if isinstance(package, dict) else None
    if isinstance(scripts, dict):
        texts += [t for t in scripts.values() if isinstance(t, str)]
    for name in MAKEFILES:
        try:
            texts += (repo / name).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
    jest = [t for t in texts if _RUNS_JEST.search(t)]
    return [flag for flag in NODE_FLAGS if any(flag in t for t in jest)]


def _has_babel(repo: Path) -> bool:
    if any((repo / name).is_file() for name in BABEL_CONFIGS):
        return True
    try:
        package = json.loads((repo / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(package, dict) and "babel" in package


def _declares_paths(repo: Path) -> bool:
    """Whether the project's tsconfig sets ``paths`` (ours would replace them)."""
    try:
        text = (repo / "tsconfig.json").read_text(encoding="utf-8")
    except OSError:
        return False
    return re.search(r'"paths"\s*:', text) is not None


def compiler_overrides(repo: Path, tools: NodeTools) -> dict[str, object]:
    """ts-jest's ``tsconfig`` overrides (merged over the project's tsconfig.json): plain
    diagnostics, and Autopilot's type packages and modules when the project has no
    ``node_modules`` of its own."""
    options: dict[str, object] = {"pretty": False}
    outside = tools.unreachable(repo)
    if tools.project_modules is None or outside is not None:
        # The compiler looks for packages by walking up from each file: it would find neither
        # ours nor a project node_modules outside the tree that could not be linked in.
        roots = [str(m) for m in (outside, tools.modules) if m is not None]
        options["typeRoots"] = [f"{r}/@types" for r in roots] + [
            str(repo / "node_modules" / "@types")
        ]
        if not _declares_paths(repo):
            options["paths"] = {"*": [p for r in roots for p in (f"{r}/@types/*", f"{r}/*")]}
    return options


def default_config(
    repo: Path, tools: NodeTools, coverage_from: Sequence[str], cache_dir: Path
) -> dict[str, object]:
    """The Jest configuration for a project that has none (see the module docstring)."""
    ts_jest = str(tools.package("ts-jest"))
    options = {"tsconfig": compiler_overrides(repo, tools)}
    transform: dict[str, object] = {r"^.+\.[cm]?tsx?$": [ts_jest, options]}
    if not _has_babel(repo):
        js_options = {"tsconfig": {**compiler_overrides(repo, tools), "allowJs": True}}
        transform[r"^.+\.[cm]?jsx?$"] = [ts_jest, js_options]
    return {
        "rootDir": str(repo),
        "testEnvironment": "node",
        "testMatch": TEST_MATCH,
        "moduleFileExtensions": ["js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "json"],
        "transform": transform,
        "testPathIgnorePatterns": ["/node_modules/", SCRATCH_PATTERN],
        "modulePathIgnorePatterns": [SCRATCH_PATTERN],
        "coveragePathIgnorePatterns": ["/node_modules/", SCRATCH_PATTERN],
        "collectCoverageFrom": list(coverage_from),
        "coverageProvider": "babel",
        "cacheDirectory": str(cache_dir),
    }


def jest_env(tools: NodeTools, run_dir: Path) -> dict[str, str]:
    """The environment of a Jest run: our modules as the last resort of resolution,
    jest-junit's options, no colours."""
    return {
        "NODE_PATH": tools.node_path(),
        "JEST_JUNIT_OUTPUT_DIR": str(run_dir),
        "JEST_JUNIT_OUTPUT_NAME": "junit.xml",
        "JEST_JUNIT_ADD_FILE_ATTRIBUTE": "true",
        "JEST_JUNIT_REPORT_TEST_SUITE_ERRORS": "true",
        "CI": "true",
        "FORCE_COLOR": "0",
        "NO_COLOR": "1",
    }


def jest_argv(
    tools: NodeTools,
    run_dir: Path,
    *,
    config: Path | None,
    specs: Sequence[str],
    exclude: Sequence[str] = (),
    coverage: bool = True,
    coverage_from: Sequence[str] = (),
    cache_dir: Path | None = None,
    in_band: bool = True,
    node_options: Sequence[str] = (),
    reporters: Sequence[str] = (),
) -> list[str]:
    """The command line of one run.

    Args:
        tools: the run's programs.
        run_dir: the scratch directory the reports go to.
        config: the generated configuration file; None runs with the project's own.
        specs: test files to run (repository-relative); empty runs the suite.
        exclude: test files left out of a suite run.
        coverage: measure coverage (istanbul JSON into ``run_dir/coverage``).
        coverage_from: files to measure, overriding the project's ``collectCoverageFrom``
            (with the project's configuration; the generated one carries its own).
        cache_dir: Jest's cache (with the project's configuration).
        in_band: run the test files in Jest's own process (``--runInBand``), else in two
            workers: worker start-up costs more than it saves for a few files on two cores.
        node_options: options of Jest's Node process (:func:`node_flags`).
        reporters: more reporters (the contexts reporter of a suite run that records which
            test file ran which lines).
    """
    argv = [tools.node, *node_options, tools.jest]
    if config is not None:
        argv += ["--config", str(config)]
    elif cache_dir is not None:
        argv.append(f"--cacheDirectory={cache_dir}")
    argv += [
        "--ci",
        "--forceExit",
        "--watchman=false",
        "--json",
        f"--outputFile={run_dir / 'jest.json'}",
        "--testLocationInResults",
        "--reporters=default",
        f"--reporters={tools.junit_reporter}",
        *(f"--reporters={r}" for r in reporters),
        "--runInBand" if in_band else "--maxWorkers=2",
    ]
    if coverage:
        argv += [
            "--coverage",
            "--coverageReporters=json",
            f"--coverageDirectory={run_dir / 'coverage'}",
        ]
        if config is None:
            argv += [f"--collectCoverageFrom={glob}" for glob in coverage_from]
    else:
        argv.append("--coverage=false")
    if specs:
        argv += ["--runTestsByPath", *specs]
    elif exclude:
        patterns = ["/node_modules/", r"/\.autopilot-tmp/", *(re.escape(p) + "$" for p in exclude)]
        argv += [f"--testPathIgnorePatterns={p}" for p in patterns]
    return argv
