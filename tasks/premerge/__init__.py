"""Pre-merge: a pull request's changed lines, from git, and what is done with them.

``diff`` reads git's patch output as typed changes (paths unquoted and checked, renames,
deletions, binary files, modes, the new side's added and changed lines); ``generated`` tells
files nobody writes by hand (lock files, minified, vendored, a generated header); ``changes``
runs the diff from the merge base to the head through the hardened git and classifies every
file (worked on, or skipped with its reason) and cuts the rest to the budget; ``targets`` turns
the changed sources whose changed lines the suite does not run into the nightly's targets,
aimed at those lines; ``report`` measures the diff coverage before and after and writes the
pull request's comment and status.

May import: tasks.core, tasks.keep (the hardened git), tasks.audit (the baseline's report),
tasks.generate (its targets, gates and report).
"""
