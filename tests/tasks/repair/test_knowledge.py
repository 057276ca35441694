"""Repair learns (issue 15): a committed fix is kept in the archive and shown as an example to
the next similar repair; a patch a person rejected is never offered again for its signature.

End to end with the post-merge flow on a copy of the Python example (real pytest, git and
archive; the scripted model server), plus the retrieval rules on plain records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.keep.archive import open_archive
from tasks.repair.knowledge import FixRecord, Knowledge, RejectedRecord, patch_digest
from tasks.repair.loop import REJECTED
from tasks.repair.state import FailureGroup
from tests.examples_repo import git
from tests.fakes.mistral_server import MistralServer
from tests.fakes.mistral_server import mistral_server as mistral_server  # fixture
from tests.flows.test_post_merge import (
    PRICING,
    TEST_EDIT,
    _answer_when_paused,
    archived,
    is_surgeon,
    patch_to,
    regressed_repo,
    run_flow,
    script,
)
from tests.tasks.repair.test_units import case

EXAMPLES_HEADING = "Past fixes of similar failures"


@pytest.mark.slow
def test_a_second_similar_regression_is_shown_the_first_fix_as_an_example(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    repo, report, _ = regressed_repo(tmp_path)
    script(mistral_server, [patch_to(5)])
    first = run_flow(repo, report, tmp_path)
    assert first["groups"][0]["outcome"] == "fixed"
    assert not any(EXAMPLES_HEADING in r.text for r in mistral_server.requests)
    found = archived(tmp_path, first["run_id"])
    gid = first["groups"][0]["id"]
    assert f"knowledge/fix-{gid}.json" in found["keys"]
    # The fix is merged, then a later merge brings the same kind of regression back.
    git(repo, "merge", "-q", "--ff-only", first["branch"])
    source = repo / PRICING
    source.write_text(source.read_text().replace("(10, 5))", "(10, 6))"))
    git(repo, "commit", "-qam", "Merge: discounts again")
    seen = len(mistral_server.requests)

    second = run_flow(repo, None, tmp_path)  # no report: the suite runs in the sandbox

    assert second["groups"][0]["outcome"] == "fixed"
    new = mistral_server.requests[seen:]
    diagnose = [r for r in new if r.schema_name == "diagnosis"]
    surgeon = [r for r in new if is_surgeon(r)]
    assert diagnose and surgeon
    for request in (diagnose[0], surgeon[0]):
        assert EXAMPLES_HEADING in request.text
        assert "Restore the (10, 5) entry" in request.text and "(10, 5))" in request.text


@pytest.mark.slow
def test_a_patch_a_person_rejected_is_not_offered_again_for_the_same_failure(
    tmp_path: Path, prefect_harness: None, mistral_server: MistralServer
) -> None:
    repo, report, _ = regressed_repo(tmp_path)
    # The diagnosis blames the test, the patch edits the code: RISKY, handed to a person.
    rule = script(mistral_server, [patch_to(5)], wrong_side="test")
    answered: list[str] = []
    thread = _answer_when_paused({"action": "reject", "note": "not this way"}, answered)
    first = run_flow(repo, report, tmp_path, human_timeout=120)
    thread.join(timeout=10)
    assert answered == [first["run_id"]]
    [group] = first["groups"]
    assert group["outcome"] == "risky"
    gid = group["id"]
    found = archived(tmp_path, first["run_id"])
    rejected = json.loads((found["dir"] / f"knowledge/rejected-{gid}.json").read_text())
    assert rejected["patch_sha256"] == patch_digest(group["patch"])

    # The same failure again: the surgeon's first answer is the rejected patch (from the model:
    # the run history now tells the surgeon the earlier outcome, so the question is not the
    # cached one); it is revised without an audit, and the next patch is another.
    rule.replies, rule.served = [patch_to(5), f"```diff\n{TEST_EDIT}```\n"], 0
    before = len(mistral_server.requests)
    second = run_flow(repo, report, tmp_path, human_timeout=0)
    surgeon = next(r for r in mistral_server.requests[before:] if is_surgeon(r))
    assert "risky after 1 attempt(s); a person's decision: reject" in surgeon.text

    [again] = second["groups"]
    assert f"attempt 1: NEEDS_REVISION: {REJECTED}" in again["reasons"]
    assert again["attempts"] >= 2, again["reasons"]
    assert again["patch"] is not None and "(10, 5))" not in again["patch"]
    assert not second["branch"] or "(10, 5))" not in git(
        repo, "show", f"{second['branch']}:{PRICING}"
    )


def _group(signature: str = "E | m | - | src/a.py", source: str = "src/a.py") -> FailureGroup:
    return FailureGroup(
        id="g-x",
        signature=signature,
        error_type="E",
        message_shape="m",
        frame="",
        source=source,
        tests=[case("t", "boom", file="tests/test_a.py")],
    )


def _fix(signature: str, files: list[str], patch: str, error_type: str = "E") -> FixRecord:
    return FixRecord(
        signature=signature,
        error_type=error_type,
        message_shape="other",
        tests=["tests/test_a.py::t"],
        files=files,
        root_cause="c",
        repair_strategy="s",
        patch=patch,
    )


def test_examples_are_the_closest_two_distinct_patches_never_a_rejected_one() -> None:
    group = _group()
    same = _fix(group.signature, ["src/a.py"], "--- same\n")
    same_again = _fix(group.signature, ["src/a.py"], "--- same  \n\n")  # same lines
    near = _fix("E | other | - | src/a.py", ["src/a.py"], "--- near\n")
    far = _fix("Z | q | - | src/z.py", ["src/z.py"], "--- far\n", error_type="Z")
    rejected = _fix(group.signature, ["src/a.py"], "--- no\n")
    k = Knowledge(
        fixes=[far, near, same, same_again, rejected],
        rejected=[RejectedRecord(signature=group.signature, patch_sha256=patch_digest("--- no"))],
    )
    shown = k.examples(group)
    assert [f.patch for f in shown] == ["--- same  \n\n", "--- near\n"]
    assert k.is_rejected(group, "--- no\n")
    assert not k.is_rejected(_group(signature="other"), "--- no\n")


def test_knowledge_loads_from_the_archive_and_skips_a_bad_record(tmp_path: Path) -> None:
    archive = open_archive(str(tmp_path / "arch"))
    run = archive.run("post_merge", "r1")
    run.put_json("knowledge/fix-g-1.json", _fix("s", ["a.py"], "--- p\n").model_dump())
    run.put_json("knowledge/fix-g-2.json", {"not": "a fix"})
    run.put_json("knowledge/rejected-g-3.json", {"signature": "s", "patch_sha256": "ab"})
    k = Knowledge.load(archive)
    assert [f.patch for f in k.fixes] == ["--- p\n"]
    assert [r.patch_sha256 for r in k.rejected] == ["ab"]
    assert Knowledge.load(open_archive(str(tmp_path / "empty"))).fixes == []
