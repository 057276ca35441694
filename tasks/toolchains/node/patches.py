"""Repair patches of a JavaScript/TypeScript project: syntax checks of the changed files and the
risk of what a patch touches.

Syntax: ``node --check`` for ``.js``/``.mjs``/``.cjs`` (a file whose ES module syntax the Node
at hand refuses outside a module is parsed by TypeScript instead); the TypeScript compiler's
parser for ``.ts``/``.tsx``/``.mts``/``.cts``/``.jsx`` (syntax only: a patch is checked before
the project's types are). Both run through the command runner (the sandbox).

Risk: dependency manifests and lock files (``package.json``, ``package-lock.json``,
``yarn.lock``, ``pnpm-lock.yaml``, ``.npmrc``...) and the configuration that decides how tests
run or are checked (``jest.config.*``, ``tsconfig*.json``, Babel and ESLint configuration, jest
setup files) need a person even when the tests pass.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
from pathlib import Path, PurePosixPath

from tasks.core.resources import resource_path
from tasks.toolchains.base import CommandRunner
from tasks.toolchains.node.layout import TEST_ROOTS, is_test_file
from tasks.toolchains.node.tools import NodeTools
from tasks.toolchains.runs import remove_scratch, scratch_dir

TSCHECK = "autopilot_tscheck.cjs"
NODE_CHECKED = (".js", ".mjs", ".cjs")
TS_CHECKED = (".ts", ".tsx", ".mts", ".cts", ".jsx")
MANIFESTS = frozenset(
    {
        "package.json",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "pnpm-workspace.yaml",
        "bun.lockb",
        "bun.lock",
        ".npmrc",
        ".yarnrc",
        ".yarnrc.yml",
        ".nvmrc",
        ".node-version",
    }
)
TEST_CONFIG_GLOBS = (
    "jest.config.*",
    "jest.setup.*",
    "jest-setup.*",
    "setupTests.*",
    "tsconfig.json",
    "tsconfig.*.json",
    "babel.config.*",
    ".babelrc",
    ".babelrc.*",
    "eslint.config.*",
    ".eslintrc",
    ".eslintrc.*",
    ".swcrc",
)
_OUTSIDE_MODULE = re.compile(
    r"Cannot use import statement outside a module|Unexpected token 'export'"
)


def risk_reason(path: str) -> str | None:
    """Why a patch touching `path` needs a person, or None (see the module docstring)."""
    name = PurePosixPath(path).name
    if name in MANIFESTS:
        return f"{path}: dependency manifest or lock file"
    if any(fnmatch.fnmatchcase(name, glob) for glob in TEST_CONFIG_GLOBS):
        return f"{path}: test, compiler or lint configuration"
    return None


def is_test_side(path: str) -> bool:
    """A file of the test side: tests, ``__mocks__``, snapshots, and what lies under a test
    root (``test/helpers.ts``); everything else is production code."""
    parts = PurePosixPath(path).parts
    return (
        is_test_file(path)
        or any(p in ("__mocks__", "__snapshots__", "__fixtures__") for p in parts[:-1])
        or (len(parts) > 1 and parts[0] in TEST_ROOTS)
    )


def syntax_errors(
    repo: Path, files: list[str], runner: CommandRunner, tools: NodeTools
) -> list[str]:
    """One line per changed file that does not parse (files that no longer exist and files
    of other languages are skipped)."""
    present = [f for f in files if (repo / f).is_file()]
    errors: list[str] = []
    by_ts = [f for f in present if f.endswith(TS_CHECKED)]
    for path in (f for f in present if f.endswith(NODE_CHECKED)):
        result = runner.run([tools.node, "--check", path], cwd=repo, timeout_s=60)
        if result.exit_code == 0:
            continue
        text = (result.stderr or result.stdout).strip()
        if _OUTSIDE_MODULE.search(text):
            by_ts.append(path)  # ES module syntax this Node refuses outside a module
            continue
        errors.append(f"{path}: syntax error: {_node_error(text, path)}")
    if by_ts:
        errors.extend(_ts_errors(repo, by_ts, runner, tools))
    return errors


def _node_error(text: str, path: str) -> str:
    """``node --check``'s message in one line: the error and where (file:line)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    where = next((ln.strip() for ln in lines if ln.strip().startswith(("/", path))), "")
    error = next((ln.strip() for ln in lines if re.match(r"\w*Error\b", ln.strip())), "")
    line = where.rsplit(":", 1)[-1] if ":" in where else ""
    return f"{error} (line {line})"[:500] if line.isdigit() else (error or lines[-1])[:500]


def _ts_errors(repo: Path, files: list[str], runner: CommandRunner, tools: NodeTools) -> list[str]:
    run_dir = scratch_dir(repo)
    try:
        script = run_dir / TSCHECK
        shutil.copyfile(resource_path(f"tasks/toolchains/node/resources/{TSCHECK}"), script)
        env = {"NODE_PATH": str(tools.package("typescript").parent)}
        result = runner.run([tools.node, str(script), *files], cwd=repo, env=env, timeout_s=60)
    finally:
        remove_scratch(run_dir)
    if result.exit_code == 0:
        return []
    found: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        file, _, rest = line.partition(":")
        if file in files:
            found.setdefault(file, []).append(
                f"line {rest.split(':', 1)[0]}: {rest.split(' - ', 1)[-1]}"
            )
    if not found:
        text = (result.stderr or result.stdout).strip()
        return [f"{files[0]}: syntax check failed: {text[-300:]}"]
    return [f"{f}: syntax error: {'; '.join(msgs[:3])}"[:500] for f, msgs in found.items()]
