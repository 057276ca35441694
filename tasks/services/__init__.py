"""Declared services: throwaway PostgreSQL and Redis servers per run, from the machine's
packages, reachable only through a private socket directory that the sandbox is shown.

Public: :class:`ServicesSettings` (the ``[services]`` settings), :func:`running_services` (a
context manager yielding :class:`Services`: ``needs()``, ``prepare_schema(runner, project)``,
``for_job(name)``), :class:`ServiceError` (one line). Servers run as an unprivileged user
(``postgres`` or ``nobody`` when Autopilot runs as root), listen on no TCP port, and are
stopped and removed at the end, also when the process running them is killed.

May import: the standard library, pydantic, packaging, ``tasks.core.errors``,
``tasks.core.run_settings``, ``tasks.envs.needs``.
Never the sandbox (callers pass a runner), the model or a flow.
"""

from tasks.services.binaries import ServiceError
from tasks.services.procs import processes_in
from tasks.services.settings import ServicesSettings
from tasks.services.stack import Services, running_services

__all__ = ["ServiceError", "Services", "ServicesSettings", "processes_in", "running_services"]
