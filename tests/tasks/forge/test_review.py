"""A run's comment and commit status on a pull request, against the fake forge (real httpx,
real HTTP on loopback): one comment, found again by its marker and updated, never duplicated;
the status as each API documents it; a forge that answers garbage, 500s or refusals is one line
and nothing is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr

from tasks.forge import ForgeSettings, pr_number_from_env, set_status, upsert_comment
from tests.fakes.forge_server import Comment, FakeForge, forge_fixture  # noqa: F401

TOKEN = SecretStr("forge-token")
MARKER = "<!-- autopilot-premerge -->"
SHA = "ab" * 20


def _settings(fake: FakeForge, kind: str) -> ForgeSettings:
    api = fake.url if kind == "github" else f"{fake.url}/api/v4"
    return ForgeSettings(kind=kind, repository="acme/shop", api_url=api)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_a_second_run_updates_the_comment_it_wrote(forge: FakeForge, kind: str) -> None:
    settings = _settings(forge, kind)
    forge.state.comments[1] = Comment(1, 7, "LGTM, but tests?", "a-reviewer")
    first = upsert_comment(settings, 7, f"{MARKER}\nfirst", marker=MARKER, token=TOKEN)
    second = upsert_comment(settings, 7, f"{MARKER}\nsecond", marker=MARKER, token=TOKEN)

    assert (first.action, second.action) == ("created", "updated")
    assert first.id == second.id and first.error is None and second.error is None
    bodies = [c.body for c in forge.state.comments_on(7)]
    assert bodies == ["LGTM, but tests?", f"{MARKER}\nsecond"]
    methods = [(r.method, r.path.split("?")[0]) for r in forge.requests]
    if kind == "github":
        assert methods == [
            ("GET", "/repos/acme/shop/issues/7/comments"),
            ("POST", "/repos/acme/shop/issues/7/comments"),
            ("GET", "/repos/acme/shop/issues/7/comments"),
            ("PATCH", f"/repos/acme/shop/issues/comments/{first.id}"),
        ]
        assert first.url and first.url.endswith(f"#issuecomment-{first.id}")
    else:
        notes = "/api/v4/projects/acme%2Fshop/merge_requests/7/notes"
        assert methods == [
            ("GET", notes),
            ("POST", notes),
            ("GET", notes),
            ("PUT", f"{notes}/{first.id}"),
        ]
        assert forge.requests[0].headers["PRIVATE-TOKEN"] == "forge-token"
    assert "per_page=100" in forge.requests[0].path


def test_the_marker_is_found_on_a_later_page(forge: FakeForge) -> None:
    for i in range(1, 151):
        forge.state.comments[i] = Comment(i, 7, f"comment {i}", "someone")
    forge.state.comments[151] = Comment(151, 7, f"{MARKER}\nold", "autopilot-bot")
    out = upsert_comment(
        _settings(forge, "github"), 7, f"{MARKER}\nnew", marker=MARKER, token=TOKEN
    )
    assert (out.action, out.id) == ("updated", 151)
    assert forge.state.comments[151].body == f"{MARKER}\nnew"
    assert len(forge.state.comments) == 151


def test_a_forged_marker_in_another_authors_comment_is_left_alone(forge: FakeForge) -> None:
    """Anyone can write the marker; editing their comment is refused (403), so the run writes
    its own instead of failing or touching theirs."""
    forge.state.comments[5] = Comment(5, 7, f"{MARKER}\nnot ours", "mallory")
    out = upsert_comment(
        _settings(forge, "github"), 7, f"{MARKER}\nours", marker=MARKER, token=TOKEN
    )
    assert out.action == "created" and out.error is None
    assert forge.state.comments[5].body == f"{MARKER}\nnot ours"
    assert [c.body for c in forge.state.comments_on(7)][-1] == f"{MARKER}\nours"


def test_a_body_without_the_marker_gets_it(forge: FakeForge) -> None:
    upsert_comment(_settings(forge, "github"), 7, "plain", marker=MARKER, token=TOKEN)
    assert forge.state.comments_on(7)[0].body == f"{MARKER}\nplain"


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_the_status_follows_the_documented_request(forge: FakeForge, kind: str) -> None:
    out = set_status(
        _settings(forge, kind),
        SHA,
        state="failure",
        description="diff coverage 40% -> 80% (min 90%)" + "x" * 200,
        context="autopilot/premerge",
        target_url="http://127.0.0.1:4200/runs/flow-run/1",
        token=TOKEN,
    )
    assert out.action == "set" and out.error is None, out.error
    (posted,) = forge.state.statuses
    assert len(posted["description"]) == 140
    assert posted["target_url"] == "http://127.0.0.1:4200/runs/flow-run/1"
    if kind == "github":
        assert forge.requests[0].path == f"/repos/acme/shop/statuses/{SHA}"
        assert (posted["state"], posted["context"]) == ("failure", "autopilot/premerge")
    else:
        assert forge.requests[0].path == f"/api/v4/projects/acme%2Fshop/statuses/{SHA}"
        assert (posted["state"], posted["name"]) == ("failed", "autopilot/premerge")


def test_the_status_of_something_that_is_no_commit_is_refused_before_any_request(
    forge: FakeForge,
) -> None:
    out = set_status(
        _settings(forge, "github"),
        "../../x",
        state="success",
        description="d",
        context="c",
        token=TOKEN,
    )
    assert out.action == "failed" and "not a commit id" in (out.error or "")
    assert forge.requests == []


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_a_forge_answering_500s_is_one_line_after_the_retries(forge: FakeForge, kind: str) -> None:
    forge.state.fail_next = [500, 502, 503]
    out = upsert_comment(_settings(forge, kind), 7, f"{MARKER}\nx", marker=MARKER, token=TOKEN)
    assert out.action == "failed" and out.http_status == 503
    assert out.error is not None and "\n" not in out.error and "503" in out.error
    assert len(forge.requests) == 3 and forge.state.comments == {}


def test_a_forge_answering_garbage_is_one_line(forge: FakeForge) -> None:
    forge.state.garbage_next = 1
    out = upsert_comment(_settings(forge, "github"), 7, f"{MARKER}\nx", marker=MARKER, token=TOKEN)
    assert out.action == "failed" and out.error is not None and "not a list" in out.error
    forge.state.garbage_next = 1
    status = set_status(
        _settings(forge, "github"), SHA, state="success", description="d", context="c", token=TOKEN
    )
    assert status.action == "failed" and "not JSON" in (status.error or "")


def test_refusals_are_one_line(forge: FakeForge) -> None:
    bad = set_status(
        _settings(forge, "github"),
        SHA,
        state="success",
        description="d",
        context="c",
        token=SecretStr("wrong"),
    )
    assert bad.action == "failed" and "refused the token (401" in (bad.error or "")
    missing = upsert_comment(_settings(forge, "gitlab"), 99, "x", marker=MARKER, token=TOKEN)
    assert missing.action == "failed" and missing.http_status == 404
    assert "not found" in (missing.error or "")
    unconfigured = upsert_comment(ForgeSettings(), 7, "x", marker=MARKER)
    assert unconfigured.action == "skipped"


def test_an_unreachable_forge_is_one_line() -> None:
    settings = ForgeSettings(
        kind="github", repository="acme/shop", api_url="http://127.0.0.1:9", timeout_s=2
    )
    out = upsert_comment(settings, 7, "x", marker=MARKER, token=TOKEN)
    assert out.action == "failed" and "unreachable" in (out.error or "")


def test_the_pull_request_number_comes_from_the_ci_where_it_is_plain(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 42}}))
    assert pr_number_from_env({"CI_MERGE_REQUEST_IID": "12"}) == 12
    github = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_REF": "refs/pull/9/merge"}
    assert pr_number_from_env(github) == 9
    by_file = {"GITHUB_EVENT_NAME": "pull_request_target", "GITHUB_EVENT_PATH": str(event)}
    assert pr_number_from_env(by_file) == 42
    push = {"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/pull/9/merge"}
    assert pr_number_from_env(push) is None
    assert pr_number_from_env({"CI_MERGE_REQUEST_IID": "0; rm -rf /"}) is None
    event.write_text("{not json")
    assert pr_number_from_env(by_file) is None
    assert pr_number_from_env({}) is None


@pytest.mark.parametrize("kind", ["github", "gitlab"])
def test_a_secret_a_test_printed_never_reaches_the_pull_request(
    forge: FakeForge, kind: str
) -> None:
    """The comment and the status are public to the pull request's readers: every secret
    Autopilot holds leaves them in none of its disguises, whatever let it into the text."""
    from tasks.core.secret_values import register_secret
    from tests.secret_forms import disguises, fresh

    secret = fresh()
    register_secret(secret)
    forms = disguises(secret)
    leak = "\n".join(f"{name}: {form}" for name, form in forms.items())
    settings = _settings(forge, kind)

    upsert_comment(settings, 7, f"{MARKER}\nrejected: {leak}", marker=MARKER, token=TOKEN)
    set_status(
        settings,
        SHA,
        state="failure",
        description=f"x {forms['reversed']}",
        context="ap",
        token=TOKEN,
    )

    sent = json.dumps([r.body for r in forge.requests])
    assert all(form not in sent for form in forms.values()), sent
    assert "[REDACTED]" in sent
