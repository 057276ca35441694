"""Scale-out: what a file job or a repair group needs, wherever it runs.

A job the flow hands to another process (a Dask worker on this machine or another) gets none
of the flow's context variables: no prepared environment, no services, no model key. Here the
job carries what it needs as plain data (:class:`ShippedRun`: the run's token, toolchain,
project and worktree; :class:`SecretRefs`: where each secret is read, never its value), and
the worker makes the rest once per run (:func:`on_worker`): the prepared environment found by
its key (a shared ``$AUTOPILOT_HOME``) or built there from the same lock files, the declared
services started on the worker's own servers with the schema loaded, one database per job.
In the flow's own process (threads) the run's own context is used as it is.

Public: :class:`ShippedRun`, :func:`hosting` (the flow's process registers its run),
:func:`on_worker`, :func:`release_run` (what the flow asks every worker at the end),
:class:`SecretRefs`, :func:`shipped_settings`, :func:`resolved_settings`.

May import: tasks.core, tasks.audit (the run's prepared environment and services, `prepared`).
"""

from tasks.scale.runs import ShippedRun, WorkerRun, hosting, on_worker, open_runs, release_run
from tasks.scale.secrets import SecretRefs, resolved_settings, shipped_settings

__all__ = [
    "SecretRefs",
    "ShippedRun",
    "WorkerRun",
    "hosting",
    "on_worker",
    "open_runs",
    "release_run",
    "resolved_settings",
    "shipped_settings",
]
