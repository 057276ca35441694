"""The scout model reads a raw log no parser understands; its untrusted reply is sanitised."""

from __future__ import annotations

import json
from pathlib import Path

from tasks.core.config import load_settings
from tasks.model.client import ModelClient
from tasks.repair.scout import group_failures, scout_log
from tasks.toolchains.registry import get_toolchain
from tests.fakes.mistral_server import MistralServer, Rule
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture

LOG = """\
[ci] step 4/6: make test
tests/test_pricing.py F..                                     [100%]
FAILED tests/test_pricing.py::test_ten_units_get_five_percent - assert 6 == 5
AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
"""


def failure(test_id: str, file: str | None, trace: str) -> dict[str, object]:
    return {
        "test_id": test_id,
        "name": test_id.rsplit("::", 1)[-1],
        "classname": "",
        "file": file,
        "line": 8,
        "status": "failed",
        "error_type": "AssertionError",
        "message": "assert 6 == 5",
        "trace": trace,
    }


def test_scout_turns_a_raw_log_into_failures_and_drops_unsafe_paths(
    tmp_path: Path, mistral_server: MistralServer
) -> None:
    log_file = tmp_path / "ci.log"
    log_file.write_text(LOG)
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    reply = {
        "failures": [
            failure(
                "tests/test_pricing.py::test_ten_units_get_five_percent",
                "./tests/test_pricing.py",
                "tests/test_pricing.py:9: AssertionError",
            ),
            failure("evil", "../../etc/passwd", ""),
        ]
    }
    mistral_server.add(Rule(schema_name="scout_failures", replies=[json.dumps(reply)]))
    client = ModelClient.from_settings(load_settings(repo))
    try:
        cases = scout_log(client, log_file, repo)
    finally:
        client.close()

    assert [c.file for c in cases] == ["tests/test_pricing.py", None]
    assert [(loc.path, loc.line) for loc in cases[0].locations] == [("tests/test_pricing.py", 9)]
    [request] = mistral_server.requests
    assert "FAILED tests/test_pricing.py::test_ten_units_get_five_percent" in request.text
    assert "wJalrXUtnFEMI" not in request.text  # secrets in logs never reach the model
    assert str(log_file) in request.text
    groups = group_failures(cases, get_toolchain("python-pytest").file_rules(repo))
    assert [len(g.tests) for g in groups] == [2]  # same error type and message shape
