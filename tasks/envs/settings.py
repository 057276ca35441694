"""The ``[envs]`` settings group (``Settings.envs``; defined in :mod:`tasks.core.run_settings`)."""

from tasks.core.run_settings import EnvSettings

__all__ = ["EnvSettings"]
