"""Regressions for `autopilot eval`: small mutations of source lines the baseline suite covers.

The operators and the per-language finders are the toolchain's (:mod:`tasks.toolchains.mutants`,
:meth:`~tasks.toolchains.base.Toolchain.mutations`): Python candidates come from the tokenizer
(strings and comments never touched) and must still parse to a *different* AST; Ruby candidates
are token-level edits on lines without string or regexp literals and must pass ``ruby -c``. The
choice is deterministic for a given seed, spread over files round-robin, at most one mutation
per line.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from tasks.core.types import FileCoverage
from tasks.toolchains.base import Toolchain
from tasks.toolchains.mutants import Mutation, apply

__all__ = ["Mutation", "apply", "candidates", "choose", "covered_lines"]


def covered_lines(text: str, coverage: FileCoverage) -> set[int]:
    """Lines of `text` the baseline executed: code lines not listed as uncovered.

    A file the suite never touched (no covered line) has none.
    """
    if coverage.covered_lines == 0:
        return set()
    uncovered = set(coverage.uncovered_lines)
    return {
        n
        for n, line in enumerate(text.splitlines(), start=1)
        if n not in uncovered and line.strip() and not line.lstrip().startswith("#")
    }


def candidates(
    sources: Mapping[str, str], coverage: Mapping[str, FileCoverage], chain: Toolchain
) -> dict[str, list[Mutation]]:
    """Every candidate per covered source file, as the toolchain finds them."""
    found: dict[str, list[Mutation]] = {}
    for path, text in sorted(sources.items()):
        cov = coverage.get(path)
        if cov is None:
            continue
        found[path] = list(chain.mutations(path, text, covered_lines(text, cov)))
    return {p: c for p, c in found.items() if c}


def choose(
    sources: Mapping[str, str],
    coverage: Mapping[str, FileCoverage],
    n: int,
    chain: Toolchain,
    seed: int = 0,
) -> tuple[list[Mutation], dict[str, str]]:
    """Pick `n` mutations (fewer when there are not enough) and apply them.

    Files are visited round-robin (sorted by path), each file's candidates in a seeded random
    order; a line is mutated at most once; a mutant the toolchain's parser refuses (``ruby -c``)
    drops that candidate.

    Returns:
        The chosen mutations and the mutated text of every file they touch.
    """
    rng = random.Random(seed)
    pools = candidates(sources, coverage, chain)
    for pool in pools.values():
        rng.shuffle(pool)
    chosen: list[Mutation] = []
    texts: dict[str, str] = {}
    used: set[tuple[str, int]] = set()
    while len(chosen) < n and any(pools.values()):
        for path in sorted(pools):
            if len(chosen) >= n:
                break
            while pools[path]:
                m = pools[path].pop()
                if (path, m.line) in used:
                    continue
                mutated = apply(texts.get(path, sources[path]), m)
                if not chain.mutant_ok(mutated):
                    continue
                texts[path] = mutated
                used.add((path, m.line))
                chosen.append(m)
                break
    return chosen, texts
