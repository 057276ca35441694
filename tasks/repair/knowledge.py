"""Repair learns (issue 15): accepted fixes and rejected patches kept in the archive, past fixes
retrieved as examples, a rejected patch never offered again for the same signature; and (issue
27) every earlier outcome of the same signature in the run history (tasks/history/: fixed,
handed to a person, failed, with its attempts and reasons), given to the diagnostician and the
surgeon as context beside the examples.

Every post-merge run writes, beside its state, one object per group it learnt from:

- ``knowledge/fix-<group>.json`` (:class:`FixRecord`): a committed fix with its diagnosis,
  patch, tests, files touched and failure signature;
- ``knowledge/rejected-<group>.json`` (:class:`RejectedRecord`): a patch a person rejected, by
  its signature and the digest of the patch.

The archive's index of knowledge is every such object under ``post_merge/`` (objects are
immutable, so runs only add). A new group retrieves at most :data:`MAX_EXAMPLES` past fixes,
closest first by failure signature and files touched (:func:`similarity`), shown to the
diagnostician and the surgeon as examples. An unreadable record is skipped with a warning.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

from pydantic import BaseModel, ValidationError

from tasks.core.errors import ArchiveError
from tasks.history.records import SeenGroup
from tasks.keep.archive import Archive, RunArchive
from tasks.repair.risk import parse_patch
from tasks.repair.state import FailureGroup, GroupState, RepairState

log = logging.getLogger(__name__)

#: Past fixes shown per request at most (the issue: two).
MAX_EXAMPLES = 2
#: A past fix shown as an example must be at least this close (1.0: the same signature).
MIN_SIMILARITY = 0.5
#: Records read from the archive at most (newest runs first), so a huge archive stays cheap.
MAX_RECORDS = 500
#: Characters of a past patch shown in a prompt.
MAX_PATCH_CHARS = 4_000

FIX_PREFIX = "knowledge/fix-"
REJECTED_PREFIX = "knowledge/rejected-"


class FixRecord(BaseModel):
    """One accepted fix: what failed, what the diagnosis said, the patch that fixed it."""

    signature: str
    error_type: str
    message_shape: str
    frame: str = ""
    source: str | None = None
    tests: list[str]
    files: list[str]
    root_cause: str
    repair_strategy: str
    wrong_side: str | None = None
    patch: str
    run_id: str = ""
    group_id: str = ""


class RejectedRecord(BaseModel):
    """A patch a person rejected for a failure signature (only the digest is needed)."""

    signature: str
    patch_sha256: str
    note: str = ""


def patch_digest(patch: str) -> str:
    """The sha256 of a patch's lines, trailing whitespace and blank ends ignored."""
    lines = [line.rstrip() for line in patch.strip().splitlines()]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _group_files(group: FailureGroup) -> set[str]:
    files = set(group.spec_files)
    if group.source:
        files.add(group.source)
    if group.frame:
        files.add(group.frame.rsplit(":", 1)[0])
    return files


def similarity(fix: FixRecord, group: FailureGroup) -> float:
    """How close a past fix is to `group`: 1.0 for the same signature, else the error type
    (0.35), the message shape (0.25) and the overlap of files touched (0.4, Jaccard)."""
    if fix.signature == group.signature:
        return 1.0
    score = 0.35 if fix.error_type == group.error_type else 0.0
    score += 0.25 if fix.message_shape == group.message_shape else 0.0
    theirs = set(fix.files) | {t.split(":")[0] for t in fix.tests}
    if fix.source:
        theirs.add(fix.source)
    ours = _group_files(group)
    if theirs and ours:
        score += 0.4 * len(theirs & ours) / len(theirs | ours)
    return round(score, 4)


@dataclass
class Knowledge:
    """What earlier runs learnt: accepted fixes and rejected patches."""

    fixes: list[FixRecord] = field(default_factory=list)
    rejected: list[RejectedRecord] = field(default_factory=list)
    #: Each signature's earlier outcomes in the run history (signature -> newest first).
    earlier: dict[str, list[SeenGroup]] = field(default_factory=dict)

    def examples(self, group: FailureGroup) -> list[FixRecord]:
        """At most MAX_EXAMPLES past fixes closest to `group`, one per distinct patch."""
        scored = sorted(
            ((similarity(f, group), i, f) for i, f in enumerate(self.fixes)),
            key=lambda t: (-t[0], -t[1]),
        )
        out: list[FixRecord] = []
        seen: set[str] = set()
        for score, _, fix in scored:
            digest = patch_digest(fix.patch)
            if score < MIN_SIMILARITY or digest in seen or self.is_rejected(group, fix.patch):
                continue
            seen.add(digest)
            out.append(fix)
            if len(out) == MAX_EXAMPLES:
                break
        return out

    def is_rejected(self, group: FailureGroup, patch: str) -> bool:
        """A person rejected this patch (same lines) for this signature before."""
        digest = patch_digest(patch)
        return any(
            r.signature == group.signature and r.patch_sha256 == digest for r in self.rejected
        )

    @classmethod
    def load(cls, archive: Archive) -> Knowledge:
        """Every knowledge record in `archive` (bounded; unreadable ones skipped)."""
        knowledge = cls()
        try:
            keys = [k for k in archive.store.list("post_merge") if "/knowledge/" in k]
        except Exception as exc:  # a missing or unreachable archive: learn nothing this time
            log.warning("knowledge: cannot list %s: %s", archive.uri, exc)
            return knowledge
        for key in sorted(keys, reverse=True)[:MAX_RECORDS]:
            _load_one(archive, key, knowledge)
        return knowledge


def _load_one(archive: Archive, key: str, knowledge: Knowledge) -> None:
    try:
        data = archive.store.get(key)
        if data is None:
            return
        if f"/{FIX_PREFIX}" in key:
            knowledge.fixes.append(FixRecord.model_validate_json(data))
        elif f"/{REJECTED_PREFIX}" in key:
            knowledge.rejected.append(RejectedRecord.model_validate_json(data))
    except (ValidationError, OSError, ArchiveError) as exc:
        log.warning("knowledge: %s skipped: %s", key, str(exc).splitlines()[0])


def fix_record(state: GroupState, run_id: str) -> FixRecord | None:
    """The record of a committed fix (None: the group was not fixed by a diagnosed patch)."""
    g, d, patch = state.group, state.diagnosis, state.final_patch
    if state.outcome != "fixed" or patch is None or d is None:
        return None
    return FixRecord(
        signature=g.signature,
        error_type=g.error_type,
        message_shape=g.message_shape,
        frame=g.frame,
        source=g.source,
        tests=[t.id for t in g.tests],
        files=parse_patch(patch).files,
        root_cause=d.root_cause,
        repair_strategy=d.repair_strategy,
        wrong_side=d.wrong_side,
        patch=patch,
        run_id=run_id,
        group_id=g.id,
    )


def record_outcomes(run: RunArchive, state: RepairState) -> int:
    """Write what `state`'s groups teach: committed fixes, patches a person rejected.

    Returns:
        How many records were written (a refused write is logged and skipped).
    """
    written = 0
    for g in state.groups:
        records: list[tuple[str, BaseModel]] = []
        fix = fix_record(g, state.run_id)
        if fix is not None:
            records.append((f"{FIX_PREFIX}{g.group.id}.json", fix))
        last = g.offered_attempt
        if g.human is not None and g.human.action == "reject" and last is not None:
            rejected = RejectedRecord(
                signature=g.group.signature,
                patch_sha256=patch_digest(last.patch),
                note=g.human.note,
            )
            records.append((f"{REJECTED_PREFIX}{g.group.id}.json", rejected))
        for relpath, record in records:
            try:
                run.put_json(relpath, record.model_dump(mode="json"))
                written += 1
            except ArchiveError as exc:
                log.warning("knowledge: %s not archived: %s", relpath, exc)
    return written


def example_text(fixes: list[FixRecord]) -> list[dict[str, str]]:
    """The examples as the prompts show them (bounded patches)."""
    return [
        {
            "signature": f.signature,
            "tests": ", ".join(f.tests[:3]),
            "root_cause": f.root_cause,
            "repair_strategy": f.repair_strategy,
            "patch": f.patch[:MAX_PATCH_CHARS],
        }
        for f in fixes
    ]
