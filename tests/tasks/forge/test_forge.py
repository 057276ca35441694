"""Pull requests out, against a fake forge that follows GitHub's and GitLab's documented APIs
(real httpx, real HTTP on loopback): method, path, headers and body checked, and every refusal
a one-line outcome that loses nothing."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from tasks.forge import ForgeSettings, open_pull_request, pull_request_body, resolve_token
from tasks.forge.client import MAX_BODY
from tests.fakes.forge_server import FakeForge, forge_fixture  # noqa: F401

TOKEN = SecretStr("forge-token")
SUMMARY = "# Post-merge repair\n\n- 2 groups fixed\n- 1 handed to a person\n"


def _github(fake: FakeForge, **kw: object) -> ForgeSettings:
    return ForgeSettings(kind="github", repository="acme/shop", api_url=fake.url, **kw)


def _gitlab(fake: FakeForge, **kw: object) -> ForgeSettings:
    return ForgeSettings(kind="gitlab", repository="acme/shop", api_url=f"{fake.url}/api/v4", **kw)


def test_github_pull_request_follows_the_documented_request(forge: FakeForge) -> None:
    forge.state.branches.add("autopilot/fix-abc123")
    body = pull_request_body(
        SUMMARY,
        flow_run_url="http://127.0.0.1:4200/runs/flow-run/1234",
        archive_uri="s3://archive/post_merge/2026-05-01/1234",
        commit="abc123",
    )
    out = open_pull_request(
        _github(forge), head="autopilot/fix-abc123", title="Fix tests", body=body, token=TOKEN
    )
    assert out.status == "opened" and out.number == 1 and out.http_status == 201
    assert out.url == f"{forge.url}/acme/shop/pull/1"
    (req,) = forge.requests
    assert (req.method, req.path) == ("POST", "/repos/acme/shop/pulls")
    assert req.headers["Accept"] == "application/vnd.github+json"
    assert req.headers["Authorization"] == "Bearer forge-token"
    assert req.headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert req.headers["Content-Type"] == "application/json"
    assert req.headers["User-Agent"] == "test-autopilot"
    assert req.body == {
        "title": "Fix tests",
        "head": "autopilot/fix-abc123",
        "base": "main",
        "body": body,
        "draft": False,
    }
    assert req.body["body"].startswith(SUMMARY)
    assert "- Flow run: http://127.0.0.1:4200/runs/flow-run/1234" in req.body["body"]
    assert "- Archive: `s3://archive/post_merge/2026-05-01/1234`" in req.body["body"]


def test_gitlab_merge_request_follows_the_documented_request(forge: FakeForge) -> None:
    out = open_pull_request(
        _gitlab(forge, base="develop", draft=True),
        head="autopilot/fix-abc123",
        title="Fix tests",
        body=SUMMARY,
        token=TOKEN,
    )
    assert out.status == "opened" and out.number == 1
    assert out.url == f"{forge.url}/acme/shop/-/merge_requests/1"
    (req,) = forge.requests
    # The project path is URL-encoded into one segment, as GitLab documents.
    assert req.path == "/api/v4/projects/acme%2Fshop/merge_requests"
    assert req.headers["PRIVATE-TOKEN"] == "forge-token"
    assert "Authorization" not in req.headers
    assert req.body == {
        "source_branch": "autopilot/fix-abc123",
        "target_branch": "develop",
        "title": "Draft: Fix tests",
        "description": SUMMARY,
    }
    numeric = open_pull_request(
        ForgeSettings(kind="gitlab", repository="7", api_url=f"{forge.url}/api/v4"),
        head="autopilot/fix-def456",
        title="t",
        body="b",
        token=TOKEN,
    )
    assert numeric.status == "opened" and forge.requests[-1].path.endswith(
        "/projects/7/merge_requests"
    )


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_a_refused_token_is_one_line(forge: FakeForge, kind: str) -> None:
    settings = _github(forge) if kind == "github" else _gitlab(forge)
    forge.state.branches.add("autopilot/fix-1")
    out = open_pull_request(
        settings, head="autopilot/fix-1", title="t", body="b", token=SecretStr("wrong")
    )
    assert out.status == "refused" and out.http_status == 401
    assert out.error is not None and "401" in out.error and "token" in out.error
    assert "\n" not in out.one_line() and "wrong" not in out.one_line()
    # Nothing is lost: the outcome still names the branch and the title.
    assert out.head == "autopilot/fix-1" and out.title == "t"


def test_github_422_validation_is_one_line(forge: FakeForge) -> None:
    out = open_pull_request(
        _github(forge), head="autopilot/not-pushed", title="t", body="b", token=TOKEN
    )
    assert out.status == "refused" and out.http_status == 422
    assert out.error == "GitHub refused the pull request (422 Validation Failed: head invalid)"


def test_an_existing_request_is_reported_not_failed(forge: FakeForge) -> None:
    forge.state.branches.add("autopilot/fix-1")
    for settings in (_github(forge), _gitlab(forge)):
        forge.state.open_heads.clear()
        first = open_pull_request(
            settings, head="autopilot/fix-1", title="t", body="b", token=TOKEN
        )
        again = open_pull_request(
            settings, head="autopilot/fix-1", title="t", body="b", token=TOKEN
        )
        assert first.status == "opened"
        assert again.status == "exists" and again.ok, again
        assert again.http_status == (422 if settings.kind == "github" else 409)
        assert "already exists" in (again.error or "")


def test_unknown_repository_and_unreachable_forge(forge: FakeForge) -> None:
    missing = open_pull_request(
        ForgeSettings(kind="github", repository="acme/nope", api_url=forge.url),
        head="h",
        title="t",
        body="b",
        token=TOKEN,
    )
    assert missing.status == "refused" and "not found" in (missing.error or "")
    closed = ForgeSettings(kind="gitlab", repository="acme/shop", api_url="http://127.0.0.1:9")
    down = open_pull_request(closed, head="h", title="t", body="b", token=TOKEN)
    assert down.status == "unreachable" and "\n" not in (down.error or "x\n")


def test_transient_errors_are_retried(forge: FakeForge) -> None:
    forge.state.branches.add("autopilot/fix-1")
    forge.state.fail_next.extend([502, 503])
    out = open_pull_request(
        _github(forge), head="autopilot/fix-1", title="t", body="b", token=TOKEN
    )
    assert out.status == "opened" and len(forge.requests) == 3


def test_long_summaries_are_cut_with_a_note(forge: FakeForge) -> None:
    forge.state.branches.add("autopilot/fix-1")
    body = "x" * (MAX_BODY * 2)
    out = open_pull_request(
        _github(forge), head="autopilot/fix-1", title="t", body=body, token=TOKEN
    )
    sent = forge.requests[-1].body["body"]
    assert out.status == "opened" and len(sent) <= MAX_BODY and "archive" in sent[-80:]


def test_token_from_the_environment_and_its_absence(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ForgeSettings(kind="gitlab", repository="acme/shop")
    for name in ("AUTOPILOT_FORGE_TOKEN", "GITLAB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    out = open_pull_request(settings, head="h", title="t", body="b")
    assert out.status == "refused" and "AUTOPILOT_FORGE_TOKEN or GITLAB_TOKEN" in (out.error or "")
    monkeypatch.setenv("GITLAB_TOKEN", "from-env")
    assert resolve_token(settings).get_secret_value() == "from-env"


def test_settings_refuse_half_configurations() -> None:
    with pytest.raises(ValidationError, match=r"needs forge\.repository"):
        ForgeSettings(kind="github")
    with pytest.raises(ValidationError, match="owner/name"):
        ForgeSettings(kind="github", repository="shop")
    out = open_pull_request(ForgeSettings(), head="h", title="t", body="b")
    assert out.status == "not_configured" and not out.ok


@pytest.mark.slow
def test_token_from_a_prefect_secret_block(prefect_harness: None, forge: FakeForge) -> None:
    from prefect.blocks.system import Secret

    Secret(value="forge-token").save("autopilot-forge-token", overwrite=True)
    settings = _github(forge, token_secret="autopilot-forge-token")
    forge.state.branches.add("autopilot/fix-9")
    out = open_pull_request(settings, head="autopilot/fix-9", title="t", body="b")
    assert out.status == "opened"
    assert forge.requests[-1].headers["Authorization"] == "Bearer forge-token"
    missing = _github(forge, token_secret="no-such-block")
    refused = open_pull_request(missing, head="autopilot/fix-9", title="t", body="b")
    assert refused.status == "refused" and "'no-such-block' does not exist" in (refused.error or "")
