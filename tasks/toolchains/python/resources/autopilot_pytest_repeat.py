"""Run by Test Autopilot as ``python -m autopilot_pytest_repeat PYTEST_ARGS...`` (under
``coverage run`` when measuring): pytest runs the given tests several times in this one process,
so the interpreter, pytest and the project's modules start and import once for all of them.

Each run is a whole pytest session (``pytest.main``: collection, fixtures, the JUnit XML report,
Autopilot's plugin and its status file), as a separate process would give, except that modules
imported by an earlier run stay imported. Settings come from the environment:

- AUTOPILOT_REPEATS: how many runs (at least 1);
- AUTOPILOT_REPEAT_DIR: where run N writes ``junit-N.xml``, ``status-N.json`` (the plugin's) and
  ``run-N.json`` (``{"exit", "seconds"}``);
- AUTOPILOT_REVERSE_ALTERNATE=1: every second run runs its tests in the reverse order
  (Autopilot's plugin reverses them when AUTOPILOT_REVERSED is 1, which this sets per run).

The runs end after the first that does not exit 0; the process exits with that status. Standard
library and pytest only: it runs with the project's interpreter.
"""

from __future__ import annotations

import json
import os
import sys
import time

import pytest


def _run_once(args: list[str], folder: str, index: int) -> int:
    os.environ["AUTOPILOT_STATUS"] = os.path.join(folder, f"status-{index}.json")
    xml = os.path.join(folder, f"junit-{index}.xml")
    started = time.monotonic()
    code = int(pytest.main([f"--junitxml={xml}", *args]))
    seconds = time.monotonic() - started
    with open(os.path.join(folder, f"run-{index}.json"), "w", encoding="utf-8") as fh:
        json.dump({"exit": code, "seconds": seconds}, fh)
    return code


def main(args: list[str]) -> int:
    runs = max(1, int(os.environ.get("AUTOPILOT_REPEATS", "1")))
    folder = os.environ["AUTOPILOT_REPEAT_DIR"]
    alternate = os.environ.get("AUTOPILOT_REVERSE_ALTERNATE") == "1"
    for index in range(1, runs + 1):
        os.environ["AUTOPILOT_REVERSED"] = "1" if alternate and index % 2 == 0 else "0"
        code = _run_once(args, folder, index)
        sys.stdout.flush()
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
