"""Reply parsers: files, diffs and JSON, including the malformed replies models really send."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from tasks.core.errors import ReplyFormatError
from tasks.model.replies import parse_diff_reply, parse_files_reply, parse_json_reply

SPEC = "RSpec.describe User do\n  it { expect(1).to eq(1) }\nend"


@pytest.mark.parametrize(
    "header",
    [
        "spec/models/user_spec.rb",
        "`spec/models/user_spec.rb`",
        "**spec/models/user_spec.rb**",
        "### spec/models/user_spec.rb",
        "# File: spec/models/user_spec.rb",
        "File: `spec/models/user_spec.rb`",
        "**File:** spec/models/user_spec.rb",
        "spec/models/user_spec.rb:",
    ],
)
def test_files_reply_path_line_variants(header: str) -> None:
    reply = f"Here is the spec.\n\n{header}\n```ruby\n{SPEC}\n```\nDone."
    assert parse_files_reply(reply) == {"spec/models/user_spec.rb": SPEC + "\n"}


def test_files_reply_several_files_and_ignored_blocks() -> None:
    reply = (
        "Run it with:\n```sh\nbundle exec rspec\n```\n"
        "spec/factories/users.rb\n~~~ruby\nFactoryBot.define do\nend\n~~~\n\n"
        "spec/support/helpers.rb\n\n````ruby\nputs '```'\n````\n"
        "tests/test_x.py\n```python\ndef test_x():\n    assert 1 == 1\n```\n"
    )
    files = parse_files_reply(reply)
    assert list(files) == ["spec/factories/users.rb", "spec/support/helpers.rb", "tests/test_x.py"]
    assert files["spec/support/helpers.rb"] == "puts '```'\n"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("app/models/user.rb", "only files under spec/, tests/ may be written"),
        ("/etc/passwd", "absolute paths are not allowed"),
        ("C:/spec/x_spec.rb", "absolute paths are not allowed"),
        ("spec/../app/models/user.rb", "'..' is not allowed"),
        ("spec\\models\\user_spec.rb", "backslashes are not allowed"),
        ("spec/.git/hooks/pre-commit", "paths into .git/ are not allowed"),
        ("specs/user_spec.rb", "only files under"),
    ],
)
def test_files_reply_rejects_bad_paths_naming_them(path: str, reason: str) -> None:
    reply = f"{path}\n```ruby\n{SPEC}\n```\n"
    with pytest.raises(ReplyFormatError) as caught:
        parse_files_reply(reply)
    assert str(caught.value).startswith(f"{path}: ")
    assert reason in str(caught.value)


def test_files_reply_custom_roots_and_normalisation() -> None:
    reply = f"./test/unit/./a_test.rb\n```ruby\n{SPEC}\n```\n"
    assert list(parse_files_reply(reply, allowed_roots=("test/",))) == ["test/unit/a_test.rb"]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("I could not write the spec.", "no file found"),
        (f"```ruby\n{SPEC}\n```", "no file found"),
        (f"Here it is:\n```ruby\n{SPEC}\n```", "no file found"),
        (f"spec/a_spec.rb\n```ruby\n{SPEC}\n", "never closed"),
        ("spec/a_spec.rb\n```ruby\n\n```", "spec/a_spec.rb: the code block is empty"),
        ("spec/a_spec.rb\n```\na\n```\nspec/a_spec.rb\n```\nb\n```", "given twice"),
    ],
)
def test_files_reply_format_errors(reply: str, message: str) -> None:
    with pytest.raises(ReplyFormatError, match=message):
        parse_files_reply(reply)


DIFF = """--- a/app/models/user.rb
+++ b/app/models/user.rb
@@ -1,3 +1,3 @@
 class User
-  def name = @name
+  def name = @name.to_s
 end"""


def test_diff_reply() -> None:
    assert parse_diff_reply(f"The fix:\n```diff\n{DIFF}\n```\nThis handles nil.") == DIFF + "\n"
    assert parse_diff_reply(f"```\n{DIFF}\n```") == DIFF + "\n"


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("Change line 2 to use to_s.", "no ```diff block"),
        (f"```diff\n{DIFF}\n```\n```diff\n{DIFF}\n```", "2 diff blocks"),
        ("```diff\n\n```", "empty"),
        ("```diff\n-  def name = @name\n+  def name = @name.to_s\n```", "not a unified diff"),
        (f"```ruby\n{DIFF}\n```", "no ```diff block"),
    ],
)
def test_diff_reply_errors(reply: str, message: str) -> None:
    with pytest.raises(ReplyFormatError, match=message):
        parse_diff_reply(reply)


class Verdict(BaseModel):
    score: float = Field(ge=0, le=1)
    reasons: list[str]


@pytest.mark.parametrize(
    "reply",
    [
        '{"score": 0.8, "reasons": ["exact values"]}',
        '```json\n{"score": 0.8, "reasons": ["exact values"]}\n```',
        'Verdict:\n{"score": 0.8, "reasons": ["exact values"]}\nThanks.',
    ],
)
def test_json_reply_lenient(reply: str) -> None:
    assert parse_json_reply(reply, Verdict) == Verdict(score=0.8, reasons=["exact values"])


def test_json_reply_errors_are_specific() -> None:
    with pytest.raises(ReplyFormatError, match=r"^invalid JSON: .*\(reply: 'score: high'\)$"):
        parse_json_reply("score: high", Verdict)
    with pytest.raises(ReplyFormatError) as caught:
        parse_json_reply('{"score": 1.5}', Verdict)
    message = str(caught.value)
    assert message.startswith("JSON does not match the schema: ")
    assert "score: Input should be less than or equal to 1" in message
    assert "reasons: Field required" in message
