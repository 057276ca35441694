"""Prepared environments (the second cache level): a project's dependencies installed once per
lock file and toolchain version into ``$AUTOPILOT_HOME/envs/<stack>-<key>``, outside any test
run, and shown read-only to every sandboxed run.

Generic: a stack's knowledge (its lock files, its install commands, its failure messages, the
variables its runs need) comes from its toolchain's :class:`EnvBuilder`
(``Toolchain.env_builder()``, implemented in ``tasks/toolchains/<stack>/``).

Public: :func:`prepare_environment` (build or reuse; a typed :class:`PreparedEnv` or
:class:`EnvProblem`, never an exception for a failed build), :class:`RunNeeds` and
:func:`runner_with` (what a sandbox must show and set), :class:`EnvSettings` (the ``[envs]``
settings), :func:`prune_envs` and :func:`list_envs`.

May import: the standard library, pydantic, ``tasks.core.errors``/``tasks.core.types`` (types only),
``tasks.core.run_settings`` (its settings group).
Nothing here imports the sandbox, the model or a flow; the install step is the only code in
Autopilot allowed to reach the package registries.
"""

from tasks.envs.builder import EnvBuilder
from tasks.envs.needs import NeedsRunner, RunNeeds, runner_with
from tasks.envs.prepare import prepare_environment, user_environment
from tasks.envs.settings import EnvSettings
from tasks.envs.store import list_envs, prune_envs
from tasks.envs.types import EnvProblem, PreparedEnv, PrepareOutcome

__all__ = [
    "EnvBuilder",
    "EnvProblem",
    "EnvSettings",
    "NeedsRunner",
    "PrepareOutcome",
    "PreparedEnv",
    "RunNeeds",
    "list_envs",
    "prepare_environment",
    "prune_envs",
    "runner_with",
    "user_environment",
]
