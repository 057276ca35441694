"""A real HTTP server on 127.0.0.1 that follows GitHub's and GitLab's documented APIs for
opening pull (merge) requests, and records every request for tests to check.

GitHub REST (2022-11-28): ``POST /repos/{owner}/{repo}/pulls``; the token in
``Authorization: Bearer``; ``Accept: application/vnd.github+json``; JSON ``title``, ``head``,
``base`` (required), ``body``, ``draft``. Answers: 201 with ``number``, ``html_url``, ``url``,
``state``, ``head``/``base`` refs; 401 ``{"message": "Bad credentials"}``; 404 for an unknown
repository; 422 ``Validation Failed`` with ``errors``: a missing field (``missing_field``), a
head branch the repository does not have (``invalid``), or a head that already has an open pull
request (``custom``, "A pull request already exists for owner:branch.").

GitLab REST v4: ``POST /api/v4/projects/:id/merge_requests`` (``:id`` numeric or the
URL-encoded path); the token in ``PRIVATE-TOKEN``; JSON ``source_branch``, ``target_branch``,
``title`` (required), ``description``. Answers: 201 with ``id``, ``iid``, ``web_url``,
``state: opened``; 401 ``{"message": "401 Unauthorized"}``; 400 ``{"error": "<field> is
missing"}``; 404 ``{"message": "404 Project Not Found"}``; 409 ``{"message": ["Another open
merge request already exists for this source branch: !<iid>"]}``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

import pytest

_GITHUB = re.compile(r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls$")
_GITLAB = re.compile(r"^/api/v4/projects/(?P<id>[^/]+)/merge_requests$")


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class ForgeState:
    """What the fake forge knows: tokens, repositories, branches, open requests."""

    token: str = "forge-token"
    github_repos: set[str] = field(default_factory=lambda: {"acme/shop"})
    gitlab_projects: dict[str, int] = field(default_factory=lambda: {"acme/shop": 7})
    branches: set[str] = field(default_factory=lambda: {"main"})
    open_heads: dict[str, int] = field(default_factory=dict)
    fail_next: list[int] = field(default_factory=list)  # statuses served before the real answer
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        state = self.server.state
        with state.lock:
            state.requests.append(
                Recorded("POST", self.path, {k: v for k, v in self.headers.items()}, body)
            )
            if state.fail_next:
                self._send(state.fail_next.pop(0), {"message": "Server Error"})
                return
            if m := _GITHUB.match(self.path):
                self._github(f"{m['owner']}/{m['repo']}", body)
            elif m := _GITLAB.match(self.path):
                self._gitlab(unquote(m["id"]), body)
            else:
                self._send(404, {"message": "Not Found"})

    def _send(self, status: int, data: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _github(self, repo: str, body: Any) -> None:
        state = self.server.state
        docs = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
        if self.headers.get("Authorization") != f"Bearer {state.token}":
            self._send(401, {"message": "Bad credentials", "documentation_url": docs})
            return
        if repo not in state.github_repos:
            self._send(404, {"message": "Not Found", "documentation_url": docs})
            return
        body = body if isinstance(body, dict) else {}
        for name in ("title", "head", "base"):
            if not isinstance(body.get(name), str) or not body[name]:
                error = {"resource": "PullRequest", "field": name, "code": "missing_field"}
                self._send(422, {"message": "Validation Failed", "errors": [error]})
                return
        head, base = body["head"], body["base"]
        for name, branch in (("head", head), ("base", base)):
            if branch not in state.branches:
                error = {"resource": "PullRequest", "field": name, "code": "invalid"}
                self._send(422, {"message": "Validation Failed", "errors": [error]})
                return
        if head in state.open_heads:
            owner = repo.split("/")[0]
            error = {
                "resource": "PullRequest",
                "code": "custom",
                "message": f"A pull request already exists for {owner}:{head}.",
            }
            self._send(422, {"message": "Validation Failed", "errors": [error]})
            return
        number = len(state.open_heads) + 1
        state.open_heads[head] = number
        self._send(
            201,
            {
                "number": number,
                "state": "open",
                "title": body["title"],
                "body": body.get("body"),
                "draft": bool(body.get("draft")),
                "url": f"{self.server.url}/repos/{repo}/pulls/{number}",
                "html_url": f"{self.server.url}/{repo}/pull/{number}",
                "head": {"ref": head},
                "base": {"ref": base},
            },
        )

    def _gitlab(self, project: str, body: Any) -> None:
        state = self.server.state
        if self.headers.get("PRIVATE-TOKEN") != state.token:
            self._send(401, {"message": "401 Unauthorized"})
            return
        ids = {str(v): k for k, v in state.gitlab_projects.items()}
        path = ids.get(project, project)
        if path not in state.gitlab_projects:
            self._send(404, {"message": "404 Project Not Found"})
            return
        body = body if isinstance(body, dict) else {}
        for name in ("source_branch", "target_branch", "title"):
            if not isinstance(body.get(name), str) or not body[name]:
                self._send(400, {"error": f"{name} is missing"})
                return
        source = body["source_branch"]
        if source in state.open_heads:
            iid = state.open_heads[source]
            message = f"Another open merge request already exists for this source branch: !{iid}"
            self._send(409, {"message": [message]})
            return
        iid = len(state.open_heads) + 1
        state.open_heads[source] = iid
        self._send(
            201,
            {
                "id": 1000 + iid,
                "iid": iid,
                "project_id": state.gitlab_projects[path],
                "title": body["title"],
                "description": body.get("description"),
                "state": "opened",
                "source_branch": source,
                "target_branch": body["target_branch"],
                "web_url": f"{self.server.url}/{path}/-/merge_requests/{iid}",
            },
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: ForgeState

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@dataclass
class FakeForge:
    """A running fake forge: its base URL, its state and the requests it recorded."""

    url: str
    state: ForgeState

    @property
    def requests(self) -> list[Recorded]:
        return self.state.requests


def start_forge(state: ForgeState | None = None) -> tuple[FakeForge, _Server]:
    """Start a fake forge on a free loopback port (stop it with ``server.shutdown()``)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.state = state or ForgeState()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return FakeForge(server.url, server.state), server


@pytest.fixture(name="forge")
def forge_fixture() -> Iterator[FakeForge]:
    """A fake forge for one test (registered as ``forge``; import ``forge_fixture``)."""
    fake, server = start_forge()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
