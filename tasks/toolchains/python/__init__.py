"""python-pytest: pytest (JUnit XML), coverage.py, ruff, the project's own interpreter or an
isolated one.

May import: tasks.core, tasks.facts, tasks.keep, tasks.envs (its prepared environment),
tasks.toolchains (never another stack).
Imported only by: tasks.toolchains.registry (everything else asks the interface).
"""
