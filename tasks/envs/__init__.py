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
``tasks.core.run_settings`` (its settings group), ``tasks.core.config`` (the sandbox settings the
install steps run under), ``tasks.sandbox`` (the install steps' sandbox and egress proxy).
Nothing here imports the model or a flow. Every install step runs in the sandbox
(``space``: a private copy of the project, only the environment being built writable, no
secrets); it is the only code in Autopilot whose commands may reach the package registries,
and only through the egress proxy, on the operator's rule.
"""

from tasks.envs.builder import EnvBuilder
from tasks.envs.needs import NeedsRunner, RunNeeds, runner_with
from tasks.envs.prepare import prepare_environment, user_environment
from tasks.envs.settings import EnvSettings
from tasks.envs.space import InstallSpace
from tasks.envs.store import list_envs, prune_envs
from tasks.envs.types import EnvProblem, PreparedEnv, PrepareOutcome

__all__ = [
    "EnvBuilder",
    "EnvProblem",
    "EnvSettings",
    "InstallSpace",
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
