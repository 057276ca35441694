"""A run's word on a pull request: one comment, kept up to date, and a commit status.

- The comment is found by a hidden marker its body starts with, and updated when found, so a
  run repeated on the same pull request never adds a second one. GitHub: ``GET
  {repo}/issues/{n}/comments`` (pages of 100), ``PATCH {repo}/issues/comments/{id}``, ``POST
  {repo}/issues/{n}/comments``. GitLab: ``GET {project}/merge_requests/{iid}/notes`` (system
  notes aside), ``PUT .../notes/{id}``, ``POST .../notes``. A comment that matches but cannot
  be edited (another author's, answering 403 or 404) is left alone and a new one is written.
- The status: GitHub ``POST {repo}/statuses/{sha}`` (``state`` success, failure, error or
  pending; ``context``, ``description`` of at most 140 characters, ``target_url``); GitLab
  ``POST {project}/statuses/{sha}`` (``state`` success, failed, pending, running; ``name``).

As for pull requests, nothing here raises for the forge's answer: a refused token, a 500 that
stays a 500, a body that is not JSON or not the shape asked for each end as a
:class:`ReviewOutcome` with one line in ``error``.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from tasks.forge.client import bound_body
from tasks.forge.http import (
    auth_headers,
    client,
    forge_name,
    one,
    project_url,
    read_json,
    refusal,
    send,
)
from tasks.forge.settings import ForgeSettings
from tasks.forge.token import ForgeError, resolve_token

log = logging.getLogger(__name__)

#: Pages of 100 comments read at most while looking for the marker.
MAX_PAGES = 20
PER_PAGE = 100
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_GITLAB_STATE = {"success": "success", "failure": "failed", "error": "failed", "pending": "pending"}

Action = Literal["created", "updated", "set", "skipped", "failed"]
State = Literal["success", "failure", "error", "pending"]


class ReviewOutcome(BaseModel):
    """What became of a comment or a status (one line in ``error`` when it failed)."""

    model_config = ConfigDict(extra="forbid")

    what: Literal["comment", "status"]
    action: Action
    id: int | None = None
    url: str | None = None
    http_status: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.action in ("created", "updated", "set")


class _Call:
    """One forge conversation: the settings, the token's headers and the HTTP client."""

    def __init__(self, settings: ForgeSettings, token: SecretStr, http: httpx.Client) -> None:
        self.settings, self.http = settings, http
        self.headers = auth_headers(settings, token)
        self.root = project_url(settings)
        self.name = forge_name(settings.kind)

    def __call__(
        self, method: str, url: str, payload: dict[str, Any] | None = None, **params: Any
    ) -> httpx.Response:
        return send(self.http, method, url, headers=self.headers, payload=payload, params=params)


def _start(
    what: Literal["comment", "status"], settings: ForgeSettings, token: SecretStr | None
) -> tuple[SecretStr | None, ReviewOutcome | None]:
    if not settings.configured:
        return None, ReviewOutcome(what=what, action="skipped", error="no forge configured")
    try:
        return token or resolve_token(settings), None
    except ForgeError as exc:
        return None, ReviewOutcome(what=what, action="failed", error=str(exc))


def _unreachable(
    what: Literal["comment", "status"], settings: ForgeSettings, exc: Exception
) -> ReviewOutcome:
    why = f"{settings.kind} unreachable at {settings.api}: {type(exc).__name__}: {exc}"
    return ReviewOutcome(what=what, action="failed", error=one(why))


def upsert_comment(
    settings: ForgeSettings,
    number: int,
    body: str,
    *,
    marker: str,
    token: SecretStr | None = None,
    transport: httpx.BaseTransport | None = None,
) -> ReviewOutcome:
    """Write `body` as the pull request's comment: the one starting with `marker` updated,
    else a new one.

    Args:
        settings: the ``[forge]`` settings.
        number: the pull request's number (GitLab: the merge request's iid).
        body: the markdown; it must start with `marker` (bounded like a pull request body).
        marker: the hidden text the run's comment is found by.
        token: the token; default: :func:`~tasks.forge.token.resolve_token`.
        transport: an httpx transport (tests); default: the network.
    """
    secret, early = _start("comment", settings, token)
    if early is not None or secret is None:
        return early or ReviewOutcome(what="comment", action="failed", error="no token")
    if number < 1:
        return ReviewOutcome(what="comment", action="failed", error=f"#{number}: not a number")
    body = bound_body(body if body.startswith(marker) else f"{marker}\n{body}")
    try:
        with client(settings.timeout_s, transport) as http:
            call = _Call(settings, secret, http)
            found = _find(call, number, marker)
            if isinstance(found, ReviewOutcome):
                return found
            if found is not None:
                updated = _update(call, number, found, body)
                if updated.ok or updated.http_status not in (403, 404):
                    return updated
                log.warning("comment %s cannot be edited; a new one is written", found)
            return _create(call, number, body)
    except httpx.HTTPError as exc:
        return _unreachable("comment", settings, exc)


def _comments_url(call: _Call, number: int) -> str:
    if call.settings.kind == "github":
        return f"{call.root}/issues/{number}/comments"
    return f"{call.root}/merge_requests/{number}/notes"


def _find(call: _Call, number: int, marker: str) -> int | ReviewOutcome | None:
    """The id of the comment whose body starts with `marker` (None: there is none)."""
    url = _comments_url(call, number)
    for page in range(1, MAX_PAGES + 1):
        response = call("GET", url, per_page=PER_PAGE, page=page)
        what = f"the comments of #{number}"
        if response.status_code != 200:
            why = refusal(call.settings.kind, response, what, str(call.settings.repository))
            return ReviewOutcome(
                what="comment", action="failed", http_status=response.status_code, error=why
            )
        items = read_json(response)
        if not isinstance(items, list):
            return ReviewOutcome(
                what="comment",
                action="failed",
                http_status=200,
                error=one(f"{call.name} answered {what} with something that is not a list"),
            )
        for item in items:
            if not isinstance(item, dict) or item.get("system") is True:
                continue
            text, ident = item.get("body"), item.get("id")
            if (
                isinstance(text, str)
                and isinstance(ident, int)
                and text.lstrip().startswith(marker)
            ):
                return ident
        if len(items) < PER_PAGE:
            return None
    return None


def _answer(
    call: _Call, response: httpx.Response, action: Action, want: int, what: str
) -> ReviewOutcome:
    data = read_json(response)
    if response.status_code != want or not isinstance(data, dict):
        why = (
            refusal(call.settings.kind, response, what, str(call.settings.repository))
            if response.status_code != want
            else one(f"{call.name} answered {what} with something that is not JSON")
        )
        return ReviewOutcome(
            what="comment", action="failed", http_status=response.status_code, error=why
        )
    ident = data.get("id")
    url = data.get("html_url") if call.settings.kind == "github" else None
    return ReviewOutcome(
        what="comment",
        action=action,
        id=ident if isinstance(ident, int) else None,
        url=url if isinstance(url, str) else None,
        http_status=response.status_code,
    )


def _update(call: _Call, number: int, ident: int, body: str) -> ReviewOutcome:
    if call.settings.kind == "github":
        response = call("PATCH", f"{call.root}/issues/comments/{ident}", {"body": body})
    else:
        response = call("PUT", f"{_comments_url(call, number)}/{ident}", {"body": body})
    return _answer(call, response, "updated", 200, f"the update of comment {ident}")


def _create(call: _Call, number: int, body: str) -> ReviewOutcome:
    response = call("POST", _comments_url(call, number), {"body": body})
    return _answer(call, response, "created", 201, f"a comment on #{number}")


def set_status(
    settings: ForgeSettings,
    sha: str,
    *,
    state: State,
    description: str,
    context: str,
    target_url: str | None = None,
    token: SecretStr | None = None,
    transport: httpx.BaseTransport | None = None,
) -> ReviewOutcome:
    """Set the commit status `context` of `sha` (the pull request's head) to `state`."""
    secret, early = _start("status", settings, token)
    if early is not None or secret is None:
        return early or ReviewOutcome(what="status", action="failed", error="no token")
    if not _SHA.match(sha):
        return ReviewOutcome(what="status", action="failed", error=f"{sha!r}: not a commit id")
    payload: dict[str, Any] = {"description": description[:140]}
    if settings.kind == "github":
        payload |= {"state": state, "context": context}
    else:
        payload |= {"state": _GITLAB_STATE[state], "name": context}
    if target_url:
        payload["target_url"] = target_url
    try:
        with client(settings.timeout_s, transport) as http:
            call = _Call(settings, secret, http)
            response = call("POST", f"{call.root}/statuses/{sha}", payload)
    except httpx.HTTPError as exc:
        return _unreachable("status", settings, exc)
    if response.status_code not in (200, 201) or not isinstance(read_json(response), dict):
        why = (
            refusal(settings.kind, response, f"the status of {sha[:12]}", str(settings.repository))
            if response.status_code not in (200, 201)
            else one(f"{forge_name(settings.kind)} answered the status with something not JSON")
        )
        return ReviewOutcome(
            what="status", action="failed", http_status=response.status_code, error=why
        )
    return ReviewOutcome(what="status", action="set", http_status=response.status_code)
