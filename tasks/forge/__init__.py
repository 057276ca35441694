"""Pull requests out: a pushed fix branch becomes a GitHub pull request or a GitLab merge
request whose description is the run's markdown summary with its links.

Public: :class:`ForgeSettings` (the ``[forge]`` settings), :func:`open_pull_request` (always a
:class:`PullRequestOutcome`, never an exception for the forge's answer),
:func:`pull_request_body`, :func:`resolve_token`, :class:`ForgeError`.

May import: httpx, pydantic, ``tasks.core.errors``, ``tasks.core.run_settings``,
``tasks.core.secret_values`` (the token is redacted by value wherever output is kept), and
Prefect's Secret block (only when a block is named). Never the sandbox, the model or a flow.
"""

from tasks.forge.client import PullRequestOutcome, open_pull_request, pull_request_body
from tasks.forge.settings import ForgeSettings
from tasks.forge.token import ForgeError, resolve_token

__all__ = [
    "ForgeError",
    "ForgeSettings",
    "PullRequestOutcome",
    "open_pull_request",
    "pull_request_body",
    "resolve_token",
]
