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
import time
from typing import Any, Literal
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr

from tasks.forge.settings import ForgeSettings
from tasks.forge.token import ForgeError, resolve_token

log = logging.getLogger(__name__)

GITHUB_API_VERSION = "2022-11-28"
USER_AGENT = "test-autopilot"
#: GitHub refuses longer pull request bodies; GitLab allows more, the same bound keeps it simple.
MAX_BODY = 60_000
ATTEMPTS = 3

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
        url = f"{settings.api}/repos/{settings.repository}/pulls"
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {secret.get_secret_value()}",
            "X-GitHub-Api-Version": GITHUB_API_VERSION,
        }
        payload: dict[str, Any] = {
            "title": title,
            "head": head,
            "base": settings.base,
            "body": body,
            "draft": settings.draft,
        }
    else:
        project = quote(str(settings.repository), safe="")
        url = f"{settings.api}/projects/{project}/merge_requests"
        headers = {"PRIVATE-TOKEN": secret.get_secret_value()}
        payload = {
            "source_branch": head,
            "target_branch": settings.base,
            "title": f"Draft: {title}" if settings.draft else title,
            "description": body,
        }
    headers["User-Agent"] = USER_AGENT
    try:
        response = _post(url, headers, payload, settings.timeout_s, transport)
    except httpx.HTTPError as exc:
        why = f"{settings.kind} unreachable at {settings.api}: {type(exc).__name__}: {exc}"
        return outcome.model_copy(update={"status": "unreachable", "error": _one(why)})
    result = _read(str(settings.kind), response, outcome)
    log.info("%s", result.one_line())
    return result


def _post(
    url: str,
    headers: dict[str, str],
    payload: dict[str, Any],
    timeout_s: float,
    transport: httpx.BaseTransport | None,
) -> httpx.Response:
    with httpx.Client(timeout=timeout_s, transport=transport, follow_redirects=False) as http:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = http.post(url, headers=headers, json=payload)
            except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError):
                if attempt == ATTEMPTS:
                    raise
                time.sleep(0.5 * attempt)
                continue
            if response.status_code in (429, 500, 502, 503, 504) and attempt < ATTEMPTS:
                time.sleep(min(_retry_after(response), 10.0) or 0.5 * attempt)
                continue
            return response
    raise AssertionError("unreachable")  # the loop always returns or raises


def _retry_after(response: httpx.Response) -> float:
    try:
        return float(response.headers.get("Retry-After", "0"))
    except ValueError:
        return 0.0


def _read(kind: str, response: httpx.Response, outcome: PullRequestOutcome) -> PullRequestOutcome:
    status = response.status_code
    try:
        data = response.json()
    except ValueError:
        data = {}
    data = data if isinstance(data, dict) else {}
    update: dict[str, Any] = {"http_status": status}
    if status == 201:
        number = data.get("number") if kind == "github" else data.get("iid")
        url = data.get("html_url") if kind == "github" else data.get("web_url")
        return outcome.model_copy(
            update={**update, "status": "opened", "number": number, "url": url}
        )
    message = _message(data) or response.reason_phrase or "no message"
    name = "GitHub" if kind == "github" else "GitLab"
    if status == 401:
        why = f"{name} refused the token (401 {message}): check the forge token"
    elif status == 404:
        why = f"{name}: repository {outcome.repository!r} not found, or the token cannot see it"
    elif (kind == "github" and status == 422 and "already exists" in message) or (
        kind == "gitlab" and status == 409
    ):
        return outcome.model_copy(update={**update, "status": "exists", "error": _one(message)})
    else:
        why = f"{name} refused the pull request ({status} {message})"
    return outcome.model_copy(update={**update, "status": "refused", "error": _one(why)})


def _message(data: dict[str, Any]) -> str:
    """GitHub's ``message`` with its ``errors``; GitLab's ``message`` (a string, a list or a
    field -> messages map) or ``error``."""
    parts: list[str] = []
    message = data.get("message", data.get("error"))
    if isinstance(message, str):
        parts.append(message)
    elif isinstance(message, list):
        parts += [str(m) for m in message]
    elif isinstance(message, dict):
        parts += [
            f"{k} {'; '.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in message.items()
        ]
    for err in data.get("errors") or []:
        if isinstance(err, dict):
            text = err.get("message") or " ".join(
                str(err[k]) for k in ("field", "code") if err.get(k)
            )
            parts.append(str(text))
        else:
            parts.append(str(err))
    return ": ".join(p for p in parts if p)


def _one(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


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
