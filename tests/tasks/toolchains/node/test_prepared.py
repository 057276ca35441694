"""The Node environment's inputs and npm's failures as one line with a cause (npm's own
messages, as npm 11 prints them; the registry's address replaced by an example one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.envs.classify import classify
from tasks.envs.install import StepResult
from tasks.toolchains.node.prepared import lock_inputs

E404 = """npm error code E404
npm error 404 Not Found - GET https://npm.example/autopilot-surely-not-a-package-xyz
npm error 404
npm error 404  The requested resource 'autopilot-surely-not-a-package-xyz@1.0.0' could not be \
found or you do not have permission to access it.
npm error 404
npm error A complete log of this run can be found in: /tmp/x/_logs/debug-0.log
"""
SYNC = """npm error code EUSAGE
npm error
npm error `npm ci` can only install packages when your package.json and package-lock.json or \
npm-shrinkwrap.json are in sync. Please update your lock file with `npm install` before \
continuing.
npm error
npm error Invalid: lock file's is-number@6.0.0 does not satisfy is-number@7.0.0
npm error
npm error Clean install a project
"""
OFFLINE = """npm error code ENOTCACHED
npm error request to https://npm.example/is-number failed: cache mode is 'only-if-cached' but \
no cached response is available.
npm error A complete log of this run can be found in: /tmp/x/_logs/debug-0.log
"""
REFUSED = """npm error code ECONNREFUSED
npm error syscall connect
npm error errno ECONNREFUSED
npm error FetchError: request to http://127.0.0.1:9/is-number failed, reason: connect \
ECONNREFUSED 127.0.0.1:9
npm error     at ClientRequest.<anonymous> (/usr/lib/node_modules/npm/lib/index.js:130:14)
"""
NO_VERSION = """npm error code ETARGET
npm error notarget No matching version found for is-number@99.0.0.
npm error notarget In most cases you or one of your dependencies are requesting a package \
version that doesn't exist.
"""
ENGINE = """npm error code EBADENGINE
npm error engine Unsupported engine
npm error engine Not compatible with your version of node/npm: e@1.0.0
npm error notsup Not compatible with your version of node/npm: e@1.0.0
npm error notsup Required: {"node":">=99"}
npm error notsup Actual:   {"node":"v20.20.2","npm":"11.19.1"}
"""
AUTH = """npm error code E401
npm error 401 Unauthorized - GET https://npm.example/@acme%2fprivate - authentication token \
not provided
"""
OTHER = """npm error code ENOSPC
npm error syscall write
npm error nospc ENOSPC: no space left on device, write
npm error A complete log of this run can be found in: /tmp/x/_logs/debug-0.log
"""


def _cause(output: str, *, network: bool = True) -> tuple[str, str]:
    from tasks.toolchains.node.install_errors import npm_rules

    step = StepResult(("npm", "ci"), 1, output, False, 1.0)
    return classify(step, npm_rules, network=network)


@pytest.mark.parametrize(
    ("output", "network", "cause", "words"),
    [
        (E404, True, "unknown_package", "autopilot-surely-not-a-package-xyz@1.0.0 not found"),
        (SYNC, True, "lock_unresolvable", "is-number@6.0.0 does not satisfy is-number@7.0.0"),
        (OFFLINE, False, "no_registry_access", "the network was not allowed"),
        (REFUSED, True, "no_registry_access", "ECONNREFUSED"),
        (NO_VERSION, True, "unknown_package", "no version is-number@99.0.0"),
        (ENGINE, True, "toolchain_mismatch", 'e@1.0.0 requires {"node":">=99"}, this machine'),
        (AUTH, True, "no_registry_access", "needs credentials"),
        (OTHER, True, "build_failed", "ENOSPC: no space left on device"),
    ],
)
def test_npm_failures_are_one_line_with_a_cause(
    output: str, network: bool, cause: str, words: str
) -> None:
    got, message = _cause(output, network=network)
    assert got == cause, message
    assert words in message and "\n" not in message
    assert "complete log" not in message


def _project(tmp_path: Path, *files: str) -> Path:
    for name in ("package.json", *files):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n" if name.endswith(".json") else "x\n")
    return tmp_path


def test_lock_inputs(tmp_path: Path) -> None:
    plain = _project(tmp_path / "a", "package-lock.json")
    assert [p.name for p in lock_inputs(plain)] == ["package.json", "package-lock.json"]
    # npm's precedence: a shrinkwrap wins; the project's .npmrc is an input.
    both = _project(tmp_path / "b", "package-lock.json", "npm-shrinkwrap.json", ".npmrc")
    assert [p.name for p in lock_inputs(both)] == ["package.json", "npm-shrinkwrap.json", ".npmrc"]
    # Nothing to prepare: no npm lock, a tree with its own node_modules, workspaces.
    assert lock_inputs(_project(tmp_path / "c", "yarn.lock")) == []
    vendored = _project(tmp_path / "d", "package-lock.json")
    (vendored / "node_modules").mkdir()
    assert lock_inputs(vendored) == []
    spaces = _project(tmp_path / "e", "package-lock.json")
    (spaces / "package.json").write_text('{"workspaces": ["packages/*"]}\n')
    assert lock_inputs(spaces) == []
