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

On a pull request (the pre-merge's comment and status), as the two APIs document them:
GitHub ``GET /repos/{o}/{r}/issues/{n}/comments`` (``per_page``, ``page``), ``POST`` to the
same path (201), ``PATCH /repos/{o}/{r}/issues/comments/{id}`` (200; 403 for another author's
comment), ``POST /repos/{o}/{r}/statuses/{sha}`` (201; 422 for a state other than error,
failure, pending, success); GitLab ``GET/POST /api/v4/projects/:id/merge_requests/:iid/notes``
and ``PUT .../notes/:note_id``, ``POST /api/v4/projects/:id/statuses/:sha`` (201; 400 for a
state other than pending, running, success, failed, canceled). A pull request the state does
not know is a 404. ``garbage_next`` serves bodies that are not JSON, ``fail_next`` statuses.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

_GITHUB = re.compile(r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/pulls$")
_GITLAB = re.compile(r"^/api/v4/projects/(?P<id>[^/]+)/merge_requests$")
_GH_REPO = r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
_GL_PROJECT = r"^/api/v4/projects/(?P<id>[^/]+)"
_GH_COMMENTS = re.compile(_GH_REPO + r"/issues/(?P<n>\d+)/comments$")
_GH_COMMENT = re.compile(_GH_REPO + r"/issues/comments/(?P<cid>\d+)$")
_GH_STATUS = re.compile(_GH_REPO + r"/statuses/(?P<sha>[^/]+)$")
_GL_NOTES = re.compile(_GL_PROJECT + r"/merge_requests/(?P<n>\d+)/notes$")
_GL_NOTE = re.compile(_GL_PROJECT + r"/merge_requests/(?P<n>\d+)/notes/(?P<cid>\d+)$")
_GL_STATUS = re.compile(_GL_PROJECT + r"/statuses/(?P<sha>[^/]+)$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
GH_STATES = {"error", "failure", "pending", "success"}
GL_STATES = {"pending", "running", "success", "failed", "canceled"}


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
    garbage_next: int = 0  # answers whose body is not JSON, served before the real ones
    pulls: set[int] = field(default_factory=lambda: {7})  # open pull (merge) request numbers
    user: str = "autopilot-bot"  # whom the token belongs to
    comments: dict[int, Comment] = field(default_factory=dict)  # by id
    statuses: list[dict[str, Any]] = field(default_factory=list)  # as posted, with the sha
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def comments_on(self, number: int) -> list[Comment]:
        """The comments of pull request `number`, oldest first."""
        return [c for c in self.comments.values() if c.number == number]


@dataclass
class Comment:
    """A comment (GitHub) or note (GitLab) on a pull request."""

    id: int
    number: int
    body: str
    author: str
    system: bool = False


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self._handle("POST")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        state = self.server.state
        with state.lock:
            state.requests.append(
                Recorded(method, self.path, {k: v for k, v in self.headers.items()}, body)
            )
            if state.fail_next:
                self._send(state.fail_next.pop(0), {"message": "Server Error"})
                return
            if state.garbage_next:
                state.garbage_next -= 1
                self._raw(200, b"<html><body>Bad gateway, probably</body></html>")
                return
            self._route(method, urlsplit(self.path).path, body)

    def _route(self, method: str, path: str, body: Any) -> None:
        if method == "POST" and (m := _GITHUB.match(path)):
            self._github(f"{m['owner']}/{m['repo']}", body)
        elif method == "POST" and (m := _GITLAB.match(path)):
            self._gitlab(unquote(m["id"]), body)
        elif m := (_GH_COMMENTS.match(path) or _GH_COMMENT.match(path) or _GH_STATUS.match(path)):
            if self._github_allowed(f"{m['owner']}/{m['repo']}"):
                self._review(method, m.groupdict(), body, github=True)
        elif m := (_GL_NOTES.match(path) or _GL_NOTE.match(path) or _GL_STATUS.match(path)):
            if self._gitlab_allowed(unquote(m["id"])):
                self._review(method, m.groupdict(), body, github=False)
        else:
            self._send(404, {"message": "Not Found"})

    def _github_allowed(self, repo: str) -> bool:
        state = self.server.state
        if self.headers.get("Authorization") != f"Bearer {state.token}":
            self._send(401, {"message": "Bad credentials"})
            return False
        if repo not in state.github_repos:
            self._send(404, {"message": "Not Found"})
            return False
        return True

    def _gitlab_allowed(self, project: str) -> bool:
        state = self.server.state
        if self.headers.get("PRIVATE-TOKEN") != state.token:
            self._send(401, {"message": "401 Unauthorized"})
            return False
        ids = {str(v): k for k, v in state.gitlab_projects.items()}
        if ids.get(project, project) not in state.gitlab_projects:
            self._send(404, {"message": "404 Project Not Found"})
            return False
        return True

    def _review(self, method: str, m: dict[str, str], body: Any, *, github: bool) -> None:
        body = body if isinstance(body, dict) else {}
        if "sha" in m:
            self._status(method, m["sha"], body, github)
        elif "cid" in m:
            self._edit(method, int(m["cid"]), body, github)
        else:
            self._comments(method, int(m["n"]), body, github)

    def _comments(self, method: str, number: int, body: dict[str, Any], github: bool) -> None:
        state = self.server.state
        if number not in state.pulls:
            self._send(404, {"message": "Not Found" if github else "404 Not found"})
            return
        if method == "GET":
            query = parse_qs(urlsplit(self.path).query)
            per_page = min(int(query.get("per_page", ["30"])[0]), 100)
            page = int(query.get("page", ["1"])[0])
            items = state.comments_on(number)[(page - 1) * per_page : page * per_page]
            self._send(200, [self._comment_json(c, github) for c in items])
        elif method == "POST":
            if not isinstance(body.get("body"), str) or not body["body"]:
                self._send(422 if github else 400, {"message": "body is missing"})
                return
            ident = 100 + len(state.comments) + 1
            state.comments[ident] = Comment(ident, number, body["body"], state.user)
            self._send(201, self._comment_json(state.comments[ident], github))
        else:
            self._send(405, {"message": "Method Not Allowed"})

    def _edit(self, method: str, ident: int, body: dict[str, Any], github: bool) -> None:
        state = self.server.state
        comment = state.comments.get(ident)
        if method != ("PATCH" if github else "PUT"):
            self._send(405, {"message": "Method Not Allowed"})
        elif comment is None:
            self._send(404, {"message": "Not Found"})
        elif comment.author != state.user:
            self._send(
                403,
                {"message": "Must have admin rights to Repository." if github else "403 Forbidden"},
            )
        elif not isinstance(body.get("body"), str) or not body["body"]:
            self._send(422 if github else 400, {"message": "body is missing"})
        else:
            comment.body = body["body"]
            self._send(200, self._comment_json(comment, github))

    def _comment_json(self, c: Comment, github: bool) -> dict[str, Any]:
        if github:
            url = f"{self.server.url}/acme/shop/pull/{c.number}#issuecomment-{c.id}"
            return {"id": c.id, "body": c.body, "user": {"login": c.author}, "html_url": url}
        return {"id": c.id, "body": c.body, "author": {"username": c.author}, "system": c.system}

    def _status(self, method: str, sha: str, body: dict[str, Any], github: bool) -> None:
        state = self.server.state
        if method != "POST":
            self._send(405, {"message": "Method Not Allowed"})
        elif not _SHA.match(sha):
            self._send(422 if github else 404, {"message": "No commit found for SHA: " + sha})
        elif github and body.get("state") not in GH_STATES:
            error = {"resource": "Status", "field": "state", "code": "invalid"}
            self._send(422, {"message": "Validation Failed", "errors": [error]})
        elif not github and body.get("state") not in GL_STATES:
            self._send(400, {"message": "state does not have a valid value"})
        else:
            state.statuses.append({"sha": sha, **body})
            self._send(201, {"id": len(state.statuses), "state": body["state"], **body})

    def _raw(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

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
