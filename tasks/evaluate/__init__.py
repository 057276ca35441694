"""``autopilot eval``: the field reports' quality table from a nightly and a repair run, and the
regressions (mutations of covered lines, run in the sandbox) injected for the repair.

May import: tasks.core, tasks.facts, tasks.toolchains, tasks.sandbox, tasks.keep, tasks.generate,
tasks.repair.
"""
