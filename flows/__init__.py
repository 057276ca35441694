"""Flows: the Prefect flows (nightly, post_merge, audit) and the `autopilot` CLI."""
