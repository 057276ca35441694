"""Loaded by Test Autopilot into the project's pytest run (``-p autopilot_pytest_plugin``).

It runs with the project's interpreter, so it uses nothing but the standard library, pytest and
(when present) coverage, and keeps to hooks pytest has had for years. It does five things:

- The worktree's package roots come first on ``sys.path`` (an editable install of the user's
  checkout, even one that inserts itself at the front, can never win over the worktree).
- pytest-cov gives way to the ``coverage run`` Autopilot wraps the session in (as if
  ``--no-cov`` had been given: the project's ``--cov`` options stay valid), and pytest-xdist
  runs the tests in this one process (``-n 0``), so coverage sees every test.
- With ``AUTOPILOT_CONTEXTS=1`` coverage records which test file ran each line (one dynamic
  context per test file), the evidence for mapping tests to sources.
- With ``AUTOPILOT_SELECT`` (a file listing test files, one absolute path per line) only
  those files are collected (conftest.py and __init__.py aside) and their tests run in the
  listed order: a long list of files is given to pytest as their directories, because pytest
  collects a directory again for every file named on its command line (300 files: 7 s of
  collection instead of 2 s for the whole suite). With ``AUTOPILOT_REVERSED=1`` the tests run
  in the reverse order (``autopilot_pytest_repeat`` sets it for every second run when asked).
- At the end it writes a status file: how many tests were collected and reported, pytest's
  exit status, the rootdir, and where the project's packages were imported from.

Settings come from the environment: AUTOPILOT_STATUS (status file), AUTOPILOT_ROOTS (JSON list
of directories), AUTOPILOT_PACKAGES (JSON list of the project's top-level package names),
AUTOPILOT_CONTEXTS, AUTOPILOT_SELECT, AUTOPILOT_REVERSED. The status file's name is read when
the session ends, and the counts start again with each session: ``autopilot_pytest_repeat``
runs several sessions in one process.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

_ROOTS = json.loads(os.environ.get("AUTOPILOT_ROOTS", "[]"))
_PACKAGES = json.loads(os.environ.get("AUTOPILOT_PACKAGES", "[]"))
_CONTEXTS = os.environ.get("AUTOPILOT_CONTEXTS") == "1"


def _selection() -> dict[str, int] | None:
    path = os.environ.get("AUTOPILOT_SELECT")
    if not path:
        return None
    with open(path, encoding="utf-8") as fh:
        names = [line.rstrip("\n") for line in fh if line.strip()]
    return {name: index for index, name in enumerate(dict.fromkeys(names))}


_SELECT = _selection()

for _root in reversed(_ROOTS):
    while _root in sys.path:
        sys.path.remove(_root)
    sys.path.insert(0, _root)

_state: dict[str, Any] = {"collected": None, "exitstatus": None, "rootdir": None}
_reported: set[str] = set()
_context: dict[str, str | None] = {"current": None}


@pytest.hookimpl(hookwrapper=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> Any:
    options = early_config.known_args_namespace
    if hasattr(options, "no_cov"):
        options.no_cov = True
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_cmdline_main(config: Any) -> Any:
    option = config.option
    if getattr(option, "numprocesses", None):
        option.numprocesses = 0
    if hasattr(option, "numprocesses"):
        option.dist = "no"
        option.tx = []
    yield


def pytest_sessionstart(session: Any) -> None:
    _state.clear()
    _state.update({"collected": None, "exitstatus": None, "rootdir": None})
    _reported.clear()
    _context["current"] = None


def _ignored(path: str) -> bool | None:
    if _SELECT is None or os.path.basename(path) in ("conftest.py", "__init__.py"):
        return None
    if path in _SELECT or not os.path.isfile(path):
        return None
    return True


if int(pytest.__version__.split(".")[0]) >= 7:

    def pytest_ignore_collect(collection_path: Any, config: Any) -> bool | None:
        return _ignored(str(collection_path))

else:  # pytest 6 names the argument `path` (a py.path)

    def pytest_ignore_collect(path: Any, config: Any) -> bool | None:  # type: ignore[misc]
        return _ignored(str(path))


def _item_path(item: Any) -> str:
    return str(getattr(item, "path", None) or item.fspath)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    if _SELECT is not None:
        last = len(_SELECT)
        items.sort(key=lambda item: _SELECT.get(_item_path(item), last))  # stable: by file
    if os.environ.get("AUTOPILOT_REVERSED") == "1":
        items.reverse()


def pytest_collection_finish(session: Any) -> None:
    _state["collected"] = len(session.items)


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _reported.add(report.nodeid)


def _coverage() -> Any:
    try:
        import coverage
    except ImportError:
        return None
    current = getattr(coverage.Coverage, "current", None)
    return current() if current is not None else None


if _CONTEXTS:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
        path = str(getattr(item, "path", None) or item.fspath)
        if path != _context["current"]:
            cov = _coverage()
            if cov is not None:
                try:
                    cov.switch_context(path)
                    _context["current"] = path
                except Exception:  # the project's own dynamic_context: no per-test evidence
                    pass
        yield


def _imported_from(name: str) -> str | None:
    module = sys.modules.get(name)
    if module is None:
        return None
    where: str | None = getattr(module, "__file__", None)
    if where is None:
        paths = list(getattr(module, "__path__", []) or [])
        where = paths[0] if paths else None
    return where


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    _state["reported"] = len(_reported)
    _state["exitstatus"] = int(exitstatus)
    _state["rootdir"] = str(getattr(session.config, "rootpath", None) or session.config.rootdir)
    _state["stopped"] = str(session.shouldstop or session.shouldfail or "") or None
    imports = {name: _imported_from(name) for name in _PACKAGES}
    _state["imports"] = {name: where for name, where in imports.items() if where is not None}
    status = os.environ.get("AUTOPILOT_STATUS", "")
    if not status:
        return
    with open(status, "w", encoding="utf-8") as fh:
        json.dump(_state, fh)
