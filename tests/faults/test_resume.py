"""A real nightly killed (SIGKILL to its process group) at each stage of a file's work, then
started again: the resumed run sends no request the killed one had an answer for, and ends
with the verdicts and the branch of a run that was never interrupted.

`autopilot nightly` runs as a subprocess on a copy of examples/py_inventory (plus an existing
test that takes a few seconds, so the whole-branch proof is long enough to be caught), against
the scripted model server in this process and the session's Prefect test server. The stages
are seen from outside, in what the run keeps on disk: the generator's and the judge's replies
in the reply store, the first mutant's result, and a sandboxed test run once the file's
outcome is stored (the proof).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.examples_repo import git, make_example_repo
from tests.fakes.mistral_server import MistralServer, Rule
from tests.faults.test_kill import _child_env, _nightly, _stored_outcomes
from tests.tasks.generate.test_loop import files_reply, judge_reply

pytestmark = pytest.mark.slow

FILE = "src/inventory/discounts.py"
SPEC = "tests/test_discounts.py"
STAGE_DEADLINE_S = 300.0  # bound on waiting for a stage (never asserted as a time)
SLOW_SUITE_TEST = "import time\n\n\ndef test_takes_a_while() -> None:\n    time.sleep(2)\n"
#: A source with arithmetic and comparisons (mutants to score), untested in the example.
SOURCE = """\
def discounted_cents(price_cents: int, quantity: int) -> int:
    \"\"\"Ten percent off from ten units up.\"\"\"
    total = price_cents * quantity
    if quantity >= 10:
        return total - total // 10
    return total


def bulk_tier(quantity: int) -> int:
    if quantity > 100:
        return 3
    if quantity > 10:
        return 2
    return 1
"""
GOOD = """\
from inventory.discounts import bulk_tier, discounted_cents


def test_no_discount_under_ten() -> None:
    assert discounted_cents(100, 9) == 900


def test_ten_percent_off_from_ten_units() -> None:
    assert discounted_cents(100, 10) == 900
    assert discounted_cents(250, 20) == 4500


def test_tiers_by_quantity() -> None:
    assert [bulk_tier(q) for q in (1, 10, 11, 100, 101)] == [1, 1, 2, 2, 3]
"""
BROKEN = GOOD + "\n\ndef test_wrong_first() -> None:\n    assert bulk_tier(1) == 2\n"


def _server() -> MistralServer:
    server = MistralServer().start()
    server.add(Rule(schema_name="judge_verdict", replies=[judge_reply(0.8)]))
    # A first draft that fails, so the fix round's request carries the failure.
    server.add(Rule(about=FILE, replies=[files_reply(BROKEN, SPEC), files_reply(GOOD, SPEC)]))
    return server


def _repo(tmp: Path) -> Path:
    repo = make_example_repo("py_inventory", tmp)
    (repo / "tests" / "test_slow_suite.py").write_text(SLOW_SUITE_TEST)
    (repo / FILE).write_text(SOURCE)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "discounts, and an existing test that takes a while")
    return repo


def _kept_roles(home: Path) -> list[str]:
    roles = []
    for entry in (home / "cache" / "replies").rglob("*.json"):
        try:
            roles.append(json.loads(entry.read_text())["role"])
        except (OSError, ValueError, KeyError):
            continue  # being written
    return roles


def _session_runs_tests(session: int) -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getsid(int(pid)) != session:
                continue
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ProcessLookupError):
            continue
        if b"pytest" in cmdline and b"bwrap" not in cmdline.split(b"\0")[0]:
            return True
    return False


def _mutants(home: Path) -> int:
    cache = home / "cache" / "mutants"
    return len(list(cache.rglob("*.json"))) if cache.is_dir() else 0


STAGES: dict[str, Callable[[Path, int], bool]] = {
    "after-generate": lambda home, pid: "generator" in _kept_roles(home),
    "after-fix": lambda home, pid: _kept_roles(home).count("generator") >= 2,
    # Both samples (the second is sent the moment the first arrives: kill after it).
    "after-judge": lambda home, pid: _kept_roles(home).count("judge") >= 2,
    "during-mutation": lambda home, pid: _mutants(home) >= 1 and not _stored_outcomes(home),
    "during-proof": lambda home, pid: bool(_stored_outcomes(home)) and _session_runs_tests(pid),
}


def _run(repo: Path, home: Path, archive: Path, server: MistralServer) -> dict:  # type: ignore[type-arg]
    done = subprocess.run(
        _nightly_one(repo, archive), env=_env(server, home), capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _env(server: MistralServer, home: Path) -> dict[str, str]:
    env = _child_env(server, home)
    env["AUTOPILOT_MODEL__JUDGE_SAMPLES"] = "2"  # two identical requests, replayed in order
    env["AUTOPILOT_GATES__MAX_MUTANTS"] = "6"
    return env


def _nightly_one(repo: Path, archive: Path) -> list[str]:
    argv = _nightly(repo, archive)
    only = argv.index("--only")
    return [*argv[:only], "--only", FILE, *argv[only + 4 :]]


def _verdicts(doc: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {f["source"]: f["verdict"] for f in doc["files"]}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> tuple:  # type: ignore[type-arg]
    """The same nightly, never interrupted: its verdicts, its spec and its request count."""
    tmp = tmp_path_factory.mktemp("uninterrupted")
    repo = _repo(tmp / "repo")
    server = _server()
    try:
        doc = _run(repo, tmp / "home", tmp / "archive", server)
    finally:
        server.stop()
    spec = git(repo, "show", f"{doc['branch']}:{SPEC}")
    return _verdicts(doc), spec, len(server.requests), doc["files"][0]["mutation_score"]


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_nightly_killed_at_any_stage_resumes_without_paying_twice(
    stage: str,
    tmp_path: Path,
    uninterrupted: tuple,
    prefect_harness: None,  # type: ignore[type-arg]
) -> None:
    verdicts, spec, requests, mutation = uninterrupted
    assert verdicts == {FILE: "accepted"} and mutation is not None
    repo = _repo(tmp_path / "repo")
    home, archive = tmp_path / "home", tmp_path / "archive"
    server = _server()
    try:
        log = (tmp_path / "killed.log").open("wb")
        first = subprocess.Popen(
            _nightly_one(repo, archive), env=_env(server, home), stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + STAGE_DEADLINE_S
            while not STAGES[stage](home, first.pid):
                assert first.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
                assert time.monotonic() < deadline, f"stage {stage} never reached"
                time.sleep(0.05)
            in_flight = server.in_flight
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait(timeout=30)
            log.close()
        assert in_flight == 0  # killed between requests: every reply sent had arrived
        killed = len(server.requests)
        doc = _run(repo, home, archive, server)
    finally:
        server.stop()
    # Every request the killed run had an answer for is answered from its store: the pair
    # sends exactly what one uninterrupted run sends.
    assert len(server.requests) == requests, (killed, len(server.requests))
    assert _verdicts(doc) == verdicts and doc["files"][0]["mutation_score"] == mutation
    assert git(repo, "show", f"{doc['branch']}:{SPEC}") == spec
