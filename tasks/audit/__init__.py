"""The codebase audit: mapping, the baseline suite run with coverage (robust to test files that
do not load), lint and the static rubric of every test file, per-file results; no model.

The nightly and the repair start from the same baseline run.

May import: tasks.core, tasks.facts, tasks.toolchains, tasks.sandbox, tasks.keep, judge, tasks.envs,
tasks.services (the run's prepared environment and services, `prepared`).
"""
