"""Pull requests out, and a run's word on them: a pushed fix branch becomes a GitHub pull request
or a GitLab merge request whose description is the run's markdown summary with its links; a
pre-merge run comments on a pull request and sets its head's commit status.

Public: :class:`ForgeSettings` (the ``[forge]`` settings), :func:`open_pull_request` (always a
:class:`PullRequestOutcome`, never an exception for the forge's answer),
:func:`pull_request_body`, :func:`resolve_token`, :class:`ForgeError`; on a pull request
(``review``): :func:`upsert_comment` (one comment found by its hidden marker, updated, never
duplicated) and :func:`set_status` (the head's commit status), each a :class:`ReviewOutcome`;
:func:`pr_number_from_env` (the pull request a CI job runs for).

May import: httpx, pydantic, ``tasks.core.errors``, ``tasks.core.run_settings``,
``tasks.core.secret_values`` (the token is redacted by value wherever output is kept), and
Prefect's Secret block (only when a block is named). Never the sandbox, the model or a flow.
"""

from tasks.forge.ci_env import pr_number_from_env
from tasks.forge.client import PullRequestOutcome, open_pull_request, pull_request_body
from tasks.forge.review import ReviewOutcome, set_status, upsert_comment
from tasks.forge.settings import ForgeSettings
from tasks.forge.token import ForgeError, resolve_token

__all__ = [
    "ForgeError",
    "ForgeSettings",
    "PullRequestOutcome",
    "ReviewOutcome",
    "open_pull_request",
    "pr_number_from_env",
    "pull_request_body",
    "resolve_token",
    "set_status",
    "upsert_comment",
]
