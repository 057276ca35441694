"""Case ids unique within a run: batches claimed at once, duplicates numbered, failed reports
rolled back, in memory that holds hashes rather than ids."""

from __future__ import annotations

import tracemalloc

from tasks.facts.reports.ids import CaseIds


def test_a_batch_of_new_ids_is_claimed_at_once() -> None:
    ids = CaseIds()
    assert ids.claim_new(["a", "b", "c"])
    assert ids.claim("a") == ("a#2", "a")
    assert ids.claim("d") == ("d", None)


def test_a_batch_with_a_repeat_claims_nothing() -> None:
    ids = CaseIds()
    assert ids.claim_new(["x"])
    assert not ids.claim_new(["a", "x"])  # x is taken
    assert not ids.claim_new(["b", "b"])  # b repeats within the batch
    # Nothing was claimed by the refused batches: a and b are still free.
    assert [ids.claim(i) for i in ("a", "b", "b")] == [("a", None), ("b", None), ("b#2", "b")]


def test_numbering_skips_ids_that_exist_literally() -> None:
    ids = CaseIds()
    assert ids.claim_new(["t", "t#2"])
    assert ids.claim("t") == ("t#3", "t")
    assert ids.claim("t") == ("t#4", "t")


def test_rollback_frees_the_failed_reports_ids_and_numbers() -> None:
    ids = CaseIds()
    assert ids.claim_new(["kept"])
    ids.commit()
    assert ids.claim_new(["lost"])
    assert ids.claim("kept") == ("kept#2", "kept")
    ids.rollback()
    assert ids.claim("lost") == ("lost", None)
    assert ids.claim("kept") == ("kept#2", "kept")  # the number is free again too
    ids.commit()
    assert ids.claim_new(["kept#3", "other"])
    assert not ids.claim_new(["lost"])  # committed now


def test_memory_per_id_is_a_hash_not_the_id() -> None:
    n = 100_000
    ids = CaseIds()
    tracemalloc.start()
    try:
        for start in range(0, n, 500):
            # Made here and dropped after the claim: only what CaseIds keeps is measured.
            batch = [
                f"tests/test_module_{i % 300}.py::TestSome::test_{i}"
                for i in range(start, start + 500)
            ]
            assert ids.claim_new(batch)
        ids.commit()
        del batch
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Keeping the ids themselves would take ~100 bytes of string and ~30 of set entry each.
    assert current < 90 * n, f"{current / n:.0f} bytes per id"
