"""The ``[forge]`` settings group (``Settings.forge``; defined in :mod:`tasks.core.run_settings`):
where pull requests are opened and with which token."""

from tasks.core.run_settings import DEFAULT_API, ForgeSettings

__all__ = ["DEFAULT_API", "ForgeSettings"]
