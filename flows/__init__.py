"""Flows: the Prefect flows (nightly, post_merge, premerge, audit), their deployments, and the
`autopilot` CLI (cli.py, entry.py, commands/).

May import: tasks, judge. Nothing imports flows/ (but its own modules).
"""
