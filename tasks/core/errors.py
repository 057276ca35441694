"""The project's exception hierarchy.

Every error a user can see is one clear line: the item it is about and the reason.
"""

from __future__ import annotations


class AutopilotError(Exception):
    """Base class for every error this project raises on purpose."""

    #: Process exit code the CLI uses when this error ends a command.
    exit_code: int = 1


class BadInputError(AutopilotError):
    """Input (a report, a repository, a path, an option) cannot be used."""

    exit_code = 2


class ConfigError(BadInputError):
    """Configuration (environment, autopilot.toml, options) is invalid."""


class ReportError(BadInputError):
    """A test report cannot be parsed. The message names the file and the reason."""

    def __init__(self, file: str, reason: str) -> None:
        super().__init__(f"{file}: {reason}")
        self.file = file
        self.reason = reason


class NotAReportError(ReportError):
    """The file holds no test report at all (a raw log, say): only a model could read it."""


class CoverageError(BadInputError):
    """A coverage report cannot be parsed."""


class ArchiveError(AutopilotError):
    """Archiving failed (after retries)."""


class SandboxError(AutopilotError):
    """The sandbox could not be prepared or a command could not be started."""


class ModelError(AutopilotError):
    """A model call failed after its retries, or its reply stayed malformed after re-asks."""


class ReplyFormatError(ModelError):
    """A model reply does not follow its documented format."""
