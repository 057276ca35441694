"""Sandboxed command runs: bwrap (with its deny-by-default view), docker, or none (local).

``make.make_runner`` gives the runner of the configured backend; every backend applies the same
limits (time, memory, processes; cgroup or pid namespace where root) and returns a
CommandResult. ``cache`` keys identical runs.

May import: tasks.core.
"""
