"""Tasks: the plain functions behind the flows, one subpackage per part.

core (errors, types, settings, secrets), facts (reports, stack traces, coverage), sandbox, keep
(archive, git), model (client, prompts, replies), toolchains (the interface and one folder per
stack), audit (the codebase audit and its baseline suite run), generate (the nightly's per-file
loop), repair (the post-merge roles), evaluate (``autopilot eval``); envs (prepared dependency
environments), services (throwaway PostgreSQL/Redis), forge (pull requests, their comments and
statuses), ci_inputs (CI's reports in, the fix branch out), premerge (a pull request's changed
lines). Each package's docstring says
what it may import (tests/test_import_rules.py holds them to it; docs/architecture.md draws the
arrows); nothing here imports flows/. ``deploy_steps`` holds infra/prefect.yaml's pull steps.

Nothing here reads settings or opens files at import time.

May import: tasks.core (the modules directly here: deploy_steps).
"""
