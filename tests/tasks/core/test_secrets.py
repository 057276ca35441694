"""Secret paths, redaction and guarded reads for prompts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.core.errors import BadInputError
from tasks.core.secrets import REDACTED, SecretFileError, is_secret_path, read_for_prompt, redact


@pytest.mark.parametrize(
    "path",
    [
        ".env",
        ".env.production",
        "config/.env.local",
        "deploy/server.pem",
        "certs/tls.key",
        "home/.ssh/id_rsa",
        "id_rsa.pub",
        "id_ed25519",
        "credentials",
        "credentials.json",
        ".aws/credentials",
        "keystore.p12",
        ".npmrc",
        ".netrc",
        "config/master.key",
        "config/credentials.yml.enc",
        "config/credentials/production.yml.enc",
        "config/secrets.yml",
        "SECRETS.YML",
        "sub\\dir\\.env",
    ],
)
def test_secret_paths(path: str) -> None:
    assert is_secret_path(path)


@pytest.mark.parametrize(
    "path",
    [
        "app/models/user.rb",
        "spec/models/credential_spec.rb",
        "app/models/credentials.rb",
        "app/models/api_key.rb",
        ".env.example",
        "config/database.yml",
        "lib/keys/rotation.rb",
        "README.md",
    ],
)
def test_ordinary_paths(path: str) -> None:
    assert not is_secret_path(path)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ('password = "hunter2"', "hunter2"),
        ("create(:user, password: 'Secr3t!')", "Secr3t!"),
        ("DB_PASSWORD=swordfish", "swordfish"),
        ("api_key: 9f8e7d6c5b4a39281726354a", "9f8e7d6c5b4a39281726354a"),
        ('client = OpenAI("sk-proj-abcDEF1234567890abcdef")', "sk-proj-abcDEF1234567890abcdef"),
        ("GH=ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        ("token xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
        ("xoxp-1234567890-abcdefghij", "xoxp-1234567890-abcdefghij"),
        ("Authorization: Bearer abc123def456ghi789", "abc123def456ghi789"),
        ("DATABASE_URL=postgres://admin:pa55word@db/x", "pa55word"),
        ('config.secret_key_base = "a8f5f167f44f4964e6c998dee827110c"', "a8f5f167f44f4964e6c998"),
        ('"auth_token": "Zx9Qm2Lp7Rt4Vw8Yb3Nc6Hd1"', "Zx9Qm2Lp7Rt4Vw8Yb3Nc6Hd1"),
    ],
)
def test_redact_replaces_secrets(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert REDACTED in out


def test_redact_private_key_block() -> None:
    text = (
        "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----\nafter"
    )
    assert redact(text) == f"before\n{REDACTED}\nafter"


@pytest.mark.parametrize(
    "text",
    [
        "user.password = password",
        "validates :password, length: { minimum: 8 }",
        'api_key: ENV["MISTRAL_API_KEY"]',
        "secret_key_base: <%= ENV['SECRET_KEY_BASE'] %>",
        "key: :id",
        "token_type: bearer",
        "Bearer authentication is required",
        "def token_for(user) = user.token",
        "expect(user.api_key).to eq(nil)",
    ],
)
def test_redact_keeps_code(text: str) -> None:
    assert redact(text) == text


def test_read_for_prompt(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app/user.rb").write_text('class User\n  PASSWORD = "hunter2"\nend\n')
    (tmp_path / ".env").write_text("A=1\n")
    (tmp_path / "app/settings.rb").symlink_to(tmp_path / ".env")
    (tmp_path / "big.rb").write_text("x = 1\n" * 100)

    assert (
        read_for_prompt(tmp_path, "app/user.rb") == f'class User\n  PASSWORD = "{REDACTED}"\nend\n'
    )
    with pytest.raises(SecretFileError, match=r"^\.env: refused"):
        read_for_prompt(tmp_path, ".env")
    with pytest.raises(SecretFileError, match=r"^app/settings\.rb: refused"):
        read_for_prompt(tmp_path, "app/settings.rb")
    with pytest.raises(BadInputError, match="leaves the repository"):
        read_for_prompt(tmp_path, "../outside.rb")
    with pytest.raises(BadInputError, match=r"^app/missing\.rb: cannot read"):
        read_for_prompt(tmp_path, "app/missing.rb")
    cut = read_for_prompt(tmp_path, "big.rb", max_bytes=60)
    assert cut.startswith("x = 1\n" * 10)
    assert cut.endswith("[truncated at 60 bytes]\n")


def test_a_sandbox_run_result_is_redacted_everywhere_it_holds_text() -> None:
    from tasks.core.secrets import redact_validation
    from tasks.core.types import LintOffense, TestCaseResult, ValidationResult

    key = "AKIAIOSFODNN7EXAMPLE"
    case = TestCaseResult(
        id="t",
        name="t",
        status="failed",
        message=f"boom {key}",
        trace=f"at x\n{key}",
        stdout=f"password = hunter2-{key}",
    )
    lint = LintOffense(path="a.py", line=1, rule="S105", message=f"token {key}")
    result = ValidationResult(
        toolchain="python-pytest",
        loaded=False,
        load_error=f"ImportError {key}",
        examples=[case],
        lint=[lint],
    )
    clean = redact_validation(result)
    assert key not in clean.model_dump_json() and key not in (clean.examples[0].stdout or "")
    assert clean.examples[0].message == "boom [REDACTED]"
    assert key in result.model_dump_json()  # the original is left as it was


def test_kept_and_large_texts_are_redacted_alike() -> None:
    """Small texts' answers are kept, large ones (a run's output) are not held: both redact."""
    from tasks.core import secrets

    line = 'DB_PASSWORD="hunter2"\n'
    small = line * 10
    large = line * (secrets._CACHED_MAX_CHARS // len(line) + 10)
    assert "hunter2" not in secrets.redact(small)
    assert secrets.redact(small) == secrets.redact(small)  # the kept answer is the same one
    before = secrets._redact_cached.cache_info().currsize
    out = secrets.redact(large)
    assert "hunter2" not in out and out.count("[REDACTED]") == large.count("hunter2")
    assert secrets._redact_cached.cache_info().currsize == before  # not held in memory
