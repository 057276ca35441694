"""The mutation score of an accepted file: do its new tests notice when the source is wrong?

Coverage says a line ran; a mutant says whether a test would fail if the line were wrong. For
each accepted file, small mutants (the stack's operators, :meth:`Toolchain.mutations`: flipped
comparisons, ``+``/``-``, an integer plus one) are made on the lines its new tests covered (inside
function bodies where the stack knows them; in a pre-merge run, only on the lines the pull
request changed), at most ``gates.max_mutants``, one per line, chosen deterministically; each is
written into the target's private copy and the new spec alone is run in the sandbox without
coverage. A mutant is killed when the run fails, does not load or is stopped (a time-out
included). Results are cached by content (the source, the mutant, the test files, the
toolchain), so an unchanged file costs no run. The score is killed / made; survivors go back
to the generator as the assertions the tests lack when ``gates.min_mutation`` is set.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Collection
from pathlib import Path

from pydantic import BaseModel, Field

from tasks.core.json_store import JsonStore
from tasks.core.types import FileCoverage
from tasks.generate.gates import execution
from tasks.toolchains.base import CommandRunner, Toolchain
from tasks.toolchains.mutants import Mutation, apply

log = logging.getLogger(__name__)

KEY_VERSION = "mutant-v1"


class Survivor(BaseModel):
    """A mutant every test still passed with."""

    line: int
    before: str = Field(description="The source line as it is")
    after: str = Field(description="The source line as mutated")


class MutationRecord(BaseModel):
    """The mutation score of one accepted file."""

    score: float | None = Field(description="killed / made; None when no mutant could be made")
    made: int
    killed: int
    cached: int = Field(0, description="Mutants whose result came from the cache")
    survivors: list[Survivor] = Field(default_factory=list)
    duration_s: float = 0.0


class _Killed(BaseModel):
    killed: bool


def mutant_lines(chain: Toolchain, path: str, text: str, coverage: FileCoverage) -> set[int]:
    """The lines worth mutating: covered by the run, inside function bodies when the stack
    knows them, else every non-blank line the run did not miss."""
    missed = set(coverage.uncovered_lines)
    body = chain.body_lines(path, text)
    lines = (
        body
        if body is not None
        else {n for n, line in enumerate(text.splitlines(), start=1) if line.strip()}
    )
    return {n for n in lines if n not in missed}


def choose_mutants(
    chain: Toolchain, path: str, text: str, lines: set[int], limit: int, seed: int = 0
) -> list[Mutation]:
    """At most `limit` mutants, one per line, in a seeded order; each still parses."""
    pool = list(chain.mutations(path, text, lines))
    random.Random(seed).shuffle(pool)
    chosen: list[Mutation] = []
    used: set[int] = set()
    for m in pool:
        if len(chosen) >= limit:
            break
        if m.line in used or not chain.mutant_ok(apply(text, m)):
            continue
        chosen.append(m)
        used.add(m.line)
    return sorted(chosen, key=lambda m: (m.line, m.col))


def _key(chain: Toolchain, mutant_text: str, source: str, tests: dict[str, str]) -> str:
    payload = [KEY_VERSION, chain.name, source, mutant_text, sorted(tests.items())]
    return hashlib.sha256(json.dumps(payload).encode()).hexdigest()


def mutation_score(
    project: Path,
    source: str,
    coverage: FileCoverage,
    tests: dict[str, str],
    *,
    chain: Toolchain,
    runner: CommandRunner,
    limit: int,
    cache_dir: Path | None,
    timeout_s: float | None = None,
    only: Collection[int] | None = None,
) -> MutationRecord:
    """Mutate `source` in `project` (restored afterwards) and run the `tests` against each.

    Args:
        project: the target's private copy (the accepted tests are written in it).
        source: the project-relative source file.
        coverage: the accepted run's coverage of `source` (where mutants go).
        tests: the new test files, path -> text (only these run; part of the cache key).
        chain, runner: the stack and the sandbox.
        limit: at most this many mutants.
        cache_dir: where results are kept by content (None: no cache).
        timeout_s: each run's limit (a mutant that loops forever is killed by it).
        only: mutate these lines only (a pull request's changed lines; None: every covered
            line).
    """
    started = time.monotonic()
    file = project / source
    original = file.read_text(encoding="utf-8")
    lines = mutant_lines(chain, source, original, coverage)
    if only is not None:
        lines &= set(only)
    mutants = choose_mutants(chain, source, original, lines, limit) if limit > 0 else []
    store = JsonStore(cache_dir, _Killed) if cache_dir is not None else None
    record = MutationRecord(score=None, made=len(mutants), killed=0)
    specs = sorted(tests)
    text_lines = original.splitlines()
    try:
        for m in mutants:
            mutated = apply(original, m)
            key = _key(chain, mutated, original, tests)
            hit = store.get(key) if store is not None else None
            if hit is None:
                file.write_text(mutated, encoding="utf-8")
                run = chain.run_specs(
                    project, specs, source, runner, timeout_s=timeout_s, coverage=False
                )
                hit = _Killed(killed=not execution(run).accepted)
                if store is not None:
                    store.put(key, hit)
            else:
                record.cached += 1
            if hit.killed:
                record.killed += 1
            else:
                after = mutated.splitlines()[m.line - 1]
                before = text_lines[m.line - 1]
                record.survivors.append(Survivor(line=m.line, before=before, after=after))
    finally:
        file.write_text(original, encoding="utf-8")
    if mutants:
        record.score = round(record.killed / len(mutants), 4)
    record.duration_s = round(time.monotonic() - started, 3)
    log.info("%s: mutation score %s (%d mutants)", source, record.score, len(mutants))
    return record


def survivors_feedback(record: MutationRecord, source: str, min_mutation: float) -> str:
    """Surviving mutants as the concrete assertions the tests lack."""
    out = [
        f"The tests pass, but they kill {record.killed} of {record.made} small changes to "
        f"`{source}` (mutation score {record.score or 0:.2f}, at least {min_mutation:.2f} "
        "required). Each change below left every test passing: add a test whose exact "
        "assertion fails when the line is changed like this, keeping every correct test."
    ]
    for s in record.survivors:
        out += [f"- line {s.line}:", f"    as written: {s.before.strip()}"]
        out.append(f"    changed to: {s.after.strip()}")
    return "\n".join(out)
