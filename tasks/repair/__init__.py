"""The post-merge repair: scout (failures grouped by signature), diagnostician and surgeon
(roles), the patch review (what git writes, risk, a sandboxed re-run), routing, the human
hand-off, the fix branch, resuming from the archive, the reply cache, and what the run history
gives it (memory: the flaky quarantine, a signature's earlier outcomes).

May import: tasks.core, tasks.facts, tasks.toolchains, tasks.sandbox, tasks.keep, tasks.model,
tasks.audit, tasks.history.
"""
