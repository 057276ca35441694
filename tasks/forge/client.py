"""Open a pull request (GitHub) or merge request (GitLab) with httpx.

- GitHub REST: ``POST {api}/repos/{owner}/{repo}/pulls`` with ``Accept:
  application/vnd.github+json``, ``Authorization: Bearer <token>`` and ``X-GitHub-Api-Version``;
  JSON ``title``, ``head``, ``base``, ``body``, ``draft``; 201 answers ``number`` and
  ``html_url``; 422 ``Validation Failed`` lists ``errors`` (one says "A pull request already
  exists" when the branch has one).
- GitLab REST v4: ``POST {api}/projects/:id/merge_requests`` (``:id`` the number or the
  URL-encoded path) with ``PRIVATE-TOKEN``; JSON ``source_branch``, ``target_branch``,
  ``title``, ``description``; 201 answers ``iid`` and ``web_url``; 409 when the source branch
  already has an open merge request.

Nothing here raises for an answer: every call ends as a :class:`PullRequestOutcome` whose
``error`` is one line (a refused token, a refused request, an unreachable forge), so the flow
reports it and loses nothing (the branch is pushed, the summary archived). Transient failures
(429, 5xx, a dropped connection) are retried a few times.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from tasks.forge.http import (
    auth_headers,
    client,
    forge_name,
    message,
    one,
    project_url,
    read_json,
    send,
)
from tasks.forge.settings import ForgeSettings
from tasks.forge.token import ForgeError, resolve_token

log = logging.getLogger(__name__)

#: GitHub refuses longer pull request bodies; GitLab allows more, the same bound keeps it simple.
MAX_BODY = 60_000

Status = Literal["opened", "exists", "refused", "unreachable", "not_configured"]


class PullRequestOutcome(BaseModel):
    """What became of one pull request: opened, already there, or why not (one line)."""

    model_config = ConfigDict(extra="forbid")

    forge: str
    repository: str
    head: str
    base: str
    title: str
    status: Status
    number: int | None = None
    url: str | None = None
    http_status: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in ("opened", "exists")

    def one_line(self) -> str:
        if self.status == "opened":
            return f"pull request opened: {self.url}"
        if self.status == "exists":
            return f"a pull request for {self.head} already exists ({self.error})"
        return f"no pull request for {self.head}: {self.error}"


def open_pull_request(
    settings: ForgeSettings,
    *,
    head: str,
    title: str,
    body: str,
    token: SecretStr | None = None,
    transport: httpx.BaseTransport | None = None,
) -> PullRequestOutcome:
    """Open a pull request from `head` onto ``settings.base`` (never raises for the forge's
    answer: see the module docstring).

    Args:
        settings: the ``[forge]`` settings.
        head: the pushed branch (``autopilot/fix-<sha>``).
        title: the pull request's title.
        body: its markdown description (the run's summary with links).
        token: the token; default: :func:`resolve_token`.
        transport: an httpx transport (tests); default: the network.
    """
    outcome = PullRequestOutcome(
        forge=settings.kind or "none",
        repository=settings.repository or "",
        head=head,
        base=settings.base,
        title=title,
        status="not_configured",
    )
    if not settings.configured:
        return outcome.model_copy(update={"error": "no forge configured ([forge] kind)"})
    try:
        secret = token or resolve_token(settings)
    except ForgeError as exc:
        return outcome.model_copy(update={"status": "refused", "error": str(exc)})
    body = bound_body(body)
    if settings.kind == "github":
        url = f"{project_url(settings)}/pulls"
        payload: dict[str, Any] = {
            "title": title,
            "head": head,
            "base": settings.base,
            "body": body,
            "draft": settings.draft,
        }
    else:
        url = f"{project_url(settings)}/merge_requests"
        payload = {
            "source_branch": head,
            "target_branch": settings.base,
            "title": f"Draft: {title}" if settings.draft else title,
            "description": body,
        }
    try:
        with client(settings.timeout_s, transport) as http:
            response = send(
                http, "POST", url, headers=auth_headers(settings, secret), payload=payload
            )
    except httpx.HTTPError as exc:
        why = f"{settings.kind} unreachable at {settings.api}: {type(exc).__name__}: {exc}"
        return outcome.model_copy(update={"status": "unreachable", "error": one(why)})
    result = _read(str(settings.kind), response, outcome)
    log.info("%s", result.one_line())
    return result


def _read(kind: str, response: httpx.Response, outcome: PullRequestOutcome) -> PullRequestOutcome:
    status = response.status_code
    data = read_json(response)
    data = data if isinstance(data, dict) else {}
    update: dict[str, Any] = {"http_status": status}
    if status == 201:
        number = data.get("number") if kind == "github" else data.get("iid")
        url = data.get("html_url") if kind == "github" else data.get("web_url")
        return outcome.model_copy(
            update={**update, "status": "opened", "number": number, "url": url}
        )
    text = message(data) or response.reason_phrase or "no message"
    name = forge_name(kind)
    if status == 401:
        why = f"{name} refused the token (401 {text}): check the forge token"
    elif status == 404:
        why = f"{name}: repository {outcome.repository!r} not found, or the token cannot see it"
    elif (kind == "github" and status == 422 and "already exists" in text) or (
        kind == "gitlab" and status == 409
    ):
        return outcome.model_copy(update={**update, "status": "exists", "error": one(text)})
    else:
        why = f"{name} refused the pull request ({status} {text})"
    return outcome.model_copy(update={**update, "status": "refused", "error": one(why)})


def bound_body(body: str, limit: int = MAX_BODY) -> str:
    """`body` within `limit` characters, saying so when it was cut."""
    if len(body) <= limit:
        return body
    note = "\n\n_(summary cut: the whole of it is in the archive)_\n"
    return body[: limit - len(note)] + note


def pull_request_body(
    summary_markdown: str,
    *,
    flow_run_url: str | None = None,
    archive_uri: str | None = None,
    commit: str | None = None,
) -> str:
    """The pull request's description: the run's markdown summary, then its links."""
    links = []
    if flow_run_url:
        links.append(f"- Flow run: {flow_run_url}")
    if archive_uri:
        links.append(f"- Archive: `{archive_uri}`")
    if commit:
        links.append(f"- Failing commit: `{commit}`")
    tail = "\n\n---\n" + "\n".join(links) + "\n" if links else ""
    return summary_markdown.rstrip() + "\n" + tail
