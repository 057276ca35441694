"""One way to talk to a forge's REST API: its headers, requests with bounded retries, and its
answers read without trusting them (a body that is not JSON, or not the shape asked for, is an
answer like any other, never an exception).

- GitHub REST: ``Accept: application/vnd.github+json``, ``Authorization: Bearer <token>``,
  ``X-GitHub-Api-Version``; errors answer ``message`` with ``errors``.
- GitLab REST v4: ``PRIVATE-TOKEN``; a project is named by its numeric id or its URL-encoded
  path; errors answer ``message`` (a string, a list or a field -> messages map) or ``error``.

Transient failures (429, 5xx, a dropped connection) are retried :data:`ATTEMPTS` times,
honouring ``Retry-After`` up to 10 s.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import SecretStr

from tasks.core.secret_values import REGISTRY
from tasks.forge.settings import ForgeSettings

GITHUB_API_VERSION = "2022-11-28"
USER_AGENT = "test-autopilot"
ATTEMPTS = 3
_TRANSIENT = (429, 500, 502, 503, 504)


def auth_headers(settings: ForgeSettings, token: SecretStr) -> dict[str, str]:
    """The headers every request to the configured forge carries."""
    if settings.kind == "github":
        headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token.get_secret_value()}",
            "X-GitHub-Api-Version": GITHUB_API_VERSION,
        }
    else:
        headers = {"PRIVATE-TOKEN": token.get_secret_value()}
    headers["User-Agent"] = USER_AGENT
    return headers


def project_url(settings: ForgeSettings) -> str:
    """The repository's API root: ``{api}/repos/{owner}/{name}`` or ``{api}/projects/{id}``."""
    if settings.kind == "github":
        return f"{settings.api}/repos/{settings.repository}"
    return f"{settings.api}/projects/{quote(str(settings.repository), safe='')}"


def forge_name(kind: str | None) -> str:
    return "GitHub" if kind == "github" else "GitLab"


def send(
    http: httpx.Client,
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    payload: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> httpx.Response:
    """One request, retried on transient failures; the last answer is returned whatever it is.

    Raises:
        httpx.HTTPError: the forge could not be reached (after the retries).
    """
    payload = _without_secrets(payload)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            response = http.request(method, url, headers=headers, json=payload, params=params)
        except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError):
            if attempt == ATTEMPTS:
                raise
            time.sleep(0.5 * attempt)
            continue
        if response.status_code in _TRANSIENT and attempt < ATTEMPTS:
            time.sleep(min(retry_after(response), 10.0) or 0.5 * attempt)
            continue
        return response
    raise AssertionError("unreachable")  # the loop always returns or raises


def _without_secrets(value: Any) -> Any:
    """Every text of a request's payload without the secrets Autopilot holds, by value in every
    form: what goes to a forge (a body, a comment, a status) is public to the pull request's
    readers, the last place a secret a test printed could leave."""
    if isinstance(value, str):
        return REGISTRY.redact(value, "[REDACTED]")
    if isinstance(value, dict):
        return {k: _without_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_secrets(v) for v in value]
    return value


def client(timeout_s: float, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """An HTTP client for the forge (no redirects followed: a token never goes elsewhere)."""
    return httpx.Client(timeout=timeout_s, transport=transport, follow_redirects=False)


def retry_after(response: httpx.Response) -> float:
    try:
        return float(response.headers.get("Retry-After", "0"))
    except ValueError:
        return 0.0


def read_json(response: httpx.Response) -> Any:
    """The answer's JSON, or None when the body is not JSON."""
    try:
        return response.json()
    except ValueError:
        return None


def message(data: Any) -> str:
    """GitHub's ``message`` with its ``errors``; GitLab's ``message`` (a string, a list or a
    field -> messages map) or ``error``; "" for anything else."""
    if not isinstance(data, dict):
        return ""
    parts: list[str] = []
    text = data.get("message", data.get("error"))
    if isinstance(text, str):
        parts.append(text)
    elif isinstance(text, list):
        parts += [str(m) for m in text]
    elif isinstance(text, dict):
        parts += [
            f"{k} {'; '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in text.items()
        ]
    errors = data.get("errors")
    for err in errors if isinstance(errors, list) else []:
        if isinstance(err, dict):
            detail = err.get("message") or " ".join(
                str(err[k]) for k in ("field", "code") if err.get(k)
            )
            parts.append(str(detail))
        else:
            parts.append(str(err))
    return ": ".join(p for p in parts if p)


def one(text: str, limit: int = 300) -> str:
    """`text` on one line of at most `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def refusal(kind: str | None, response: httpx.Response, what: str, repository: str) -> str:
    """One line for an answer that refused `what` (401, 403, 404, or any other)."""
    status, name = response.status_code, forge_name(kind)
    why = message(read_json(response)) or response.reason_phrase or "no message"
    if status == 401:
        return one(f"{name} refused the token (401 {why}): check the forge token")
    if status == 404:
        return one(f"{name}: {what}: {repository!r} not found, or the token cannot see it")
    if status >= 500:
        return one(f"{name} failed on {what} ({status} {why}) after {ATTEMPTS} attempts")
    return one(f"{name} refused {what} ({status} {why})")
