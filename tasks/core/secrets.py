"""Keep secrets out of prompts: secret file names, secret-looking strings, guarded file reads.

Two lines of defence: :func:`read_for_prompt` refuses secret files outright and redacts what it
returns, and the model client runs :func:`redact` over every outgoing message as well, so a
secret pasted into a prompt by any other path is still replaced before it leaves the process.
:func:`redact` replaces the secrets Autopilot holds by value too, in every disguise
:mod:`tasks.core.secret_values` knows (reversed, base64, hex...).
"""

from __future__ import annotations

import fnmatch
import logging
import math
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path, PurePosixPath

from tasks.core.errors import BadInputError
from tasks.core.secret_values import REGISTRY
from tasks.core.types import ValidationResult

log = logging.getLogger(__name__)

REDACTED = "[REDACTED]"
DEFAULT_MAX_BYTES = 200_000

# Matched against the file name (case-insensitive).
_SECRET_NAMES = (
    ".env",
    ".env.*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "*.asc",
    "*.gpg",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "credentials*",
    ".npmrc",
    ".pypirc",
    ".netrc",
    "_netrc",
    ".pgpass",
    ".htpasswd",
    ".git-credentials",
    ".dockercfg",
    "secrets.yml",
    "secrets.yaml",
    "secrets.json",
    "master.key",
    "*.tfvars",
    "*.tfstate",
    "service-account*.json",
)
# Matched against the whole repository-relative path.
_SECRET_PATHS = (
    "config/master.key",
    "config/credentials*.yml.enc",
    "config/credentials/*",
    "config/secrets.yml",
    ".aws/*",
    ".ssh/*",
    ".docker/config.json",
    ".kube/config",
)
# Example and template env files hold placeholders by convention, not secrets.
_SAFE_NAMES = (".env.example", ".env.sample", ".env.template", ".env.dist")
_CODE_SUFFIXES = (".rb", ".py", ".js", ".ts", ".java", ".go", ".rake", ".erb")


class SecretFileError(BadInputError):
    """A file that may hold secrets was about to be read into a prompt."""


def is_secret_path(path: str) -> bool:
    """Whether `path` names a file that may hold secrets and must never reach a prompt.

    Args:
        path: a repository-relative or absolute path, with / or \\ separators.

    Returns:
        True for .env files, keys, certificates, credentials stores, Rails master keys and
        encrypted credentials, secrets.yml and the like.
    """
    norm = path.replace("\\", "/").lower()
    name = PurePosixPath(norm).name
    if name in _SAFE_NAMES:
        return False
    if name.startswith("credential") and name.endswith(_CODE_SUFFIXES):
        # app/models/credentials.rb is code about credentials, not a credentials store.
        return False
    if any(fnmatch.fnmatchcase(name, pattern) for pattern in _SECRET_NAMES):
        return True
    return any(
        fnmatch.fnmatchcase(norm, pattern) or fnmatch.fnmatchcase(norm, "*/" + pattern)
        for pattern in _SECRET_PATHS
    )


_KEY_NAME = (
    r"[A-Za-z0-9_.-]*(?:key|secret|token|passw(?:or)?d|passwd|pwd|credential|auth)"
    r"[A-Za-z0-9_.-]*"
)

# Whole-token patterns: the match itself is the secret.
_TOKEN_PATTERNS = [
    re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.DOTALL,
    ),
    re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"),
    re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    re.compile(r"\b(?:sk|rk|pk)_live_[0-9A-Za-z]{16,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
]
# `Authorization: Bearer xyz`, `bearer: xyz`: keep the word, drop the credential.
# A digit is required so prose ("Bearer authentication") stays readable.
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)((?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{12,})")
# URLs with a password: scheme://user:password@host
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)([^\s@/]+)(@)")
# name = "value", name: value, name => 'value', NAME=value with a secret-ish name.
_ASSIGNMENT = re.compile(
    r"(?i)(?P<name>\b" + _KEY_NAME + r"['\"]?\s*(?:=>|:=|=|:)\s*)"
    r"(?P<quote>['\"]?)(?P<value>[^\s'\",;)}\]#]+|(?<=['\"])[^'\"\n]+)(?P=quote)"
)
# Values that are code, not secrets: references, calls, placeholders.
_NOT_A_VALUE = re.compile(
    r"(?i)^(?:nil|null|none|true|false|\d{1,6}|ENV\b.*|os\.environ.*|os\.getenv.*|"
    r"getenv.*|process\.env.*|Rails\.application.*|settings\..*|self\..*|"
    r"<[^>]*>|<%.*|:\w+|\$\{?\w+\}?|\*+|x{3,}|changeme|redacted|\[redacted\]|[A-Za-z_][\w.]*\(.*)$"
)


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _looks_secret(name: str, value: str, quoted: bool) -> bool:
    if _NOT_A_VALUE.match(value):
        return False
    bare_name = name.rstrip(" \t=:>'\"")
    if not quoted and not bare_name.isupper() and re.fullmatch(r"[a-z_@][\w.@\[\]:]*", value):
        # `user.password = password`, `password: params[:password]`: code, not a literal.
        # Upper-case names (`DB_PASSWORD=hunter2`) are env files, where bare values are literal.
        return False
    if re.search(r"passw(?:or)?d|passwd|pwd", bare_name.lower()):
        # Any literal password counts, however short or simple.
        return True
    # Other key/token/secret names: only long, high-entropy literals. This keeps things like
    # `key: :id` or `token_type: bearer` in the prompt, where the model needs them.
    return len(value) >= 16 and _entropy(value) >= 3.0


def _redact_assignment(match: re.Match[str]) -> str:
    value = match.group("value")
    quote = match.group("quote")
    if not _looks_secret(match.group("name"), value, bool(quote)):
        return match.group(0)
    return f"{match.group('name')}{quote}{REDACTED}{quote}"


def redact(text: str) -> str:
    """Replace secret-looking strings in `text` with ``[REDACTED]``.

    The answers for the last small texts are kept (a pure function of the text): the same
    prompt is sent once per judge sample and passes through here again on the way out. Large
    texts (a run's captured output) are redacted each time rather than held in memory.

    First every secret Autopilot holds (:mod:`tasks.core.secret_values`), by value, in each of
    its forms; then private key blocks, AWS access keys, `sk-`/`ghp_`/`xox[bp]-`/Google/Stripe
    tokens, JWTs, bearer credentials, passwords in URLs, and literal values assigned to names that
    contain key/secret/token/password (passwords always; others when long and high-entropy).

    Args:
        text: any text about to leave the process.

    Returns:
        The text with every secret-looking value replaced.
    """
    version = REGISTRY.version  # a secret registered since makes the earlier answers stale
    if len(text) <= _CACHED_MAX_CHARS:
        return _redact_cached(text, version)
    return _redact(text, version)


#: Texts up to this size have their answers kept (256 of them at most).
_CACHED_MAX_CHARS = 65_536


def _redact(text: str, version: int) -> str:
    """`version`: the registry's, only part of the cache's key."""
    text = REGISTRY.redact(text, REDACTED)
    for pattern in _TOKEN_PATTERNS:
        text = pattern.sub(REDACTED, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}{m.group(3)}", text)
    text = _BEARER.sub(
        lambda m: m.group(0) if m.group(3) == REDACTED else f"{m.group(1)}{m.group(2)}{REDACTED}",
        text,
    )
    return _ASSIGNMENT.sub(_redact_assignment, text)


_redact_cached = lru_cache(maxsize=256)(_redact)


def redact_known(text: str) -> str:
    """`text` with only the secrets Autopilot holds replaced (by value, in every form): for
    what must stay as it was otherwise (archived JSON documents)."""
    return REGISTRY.redact(text, REDACTED)


def read_for_prompt(repo: Path, rel: str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Read a repository file for a prompt: refuse secret files, stay in the repo, redact.

    Args:
        repo: the repository root.
        rel: the repository-relative path of the file.
        max_bytes: longer files are cut here, with a marker line saying so.

    Returns:
        The file's text (undecodable bytes replaced), truncated and redacted.

    Raises:
        SecretFileError: the path names a file that may hold secrets.
        BadInputError: the path leaves the repository, or the file cannot be read.
    """
    if is_secret_path(rel):
        raise SecretFileError(f"{rel}: refused, the file may hold secrets")
    root = repo.resolve()
    target = (root / rel).resolve()
    if not target.is_relative_to(root):
        raise BadInputError(f"{rel}: refused, the path leaves the repository")
    # A symlink with an innocent name may point at a secret file.
    if is_secret_path(str(target.relative_to(root))):
        raise SecretFileError(f"{rel}: refused, the file may hold secrets")
    try:
        with target.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise BadInputError(f"{rel}: cannot read: {exc.strerror or exc}") from None
    text = data[:max_bytes].decode("utf-8", errors="replace")
    if len(data) > max_bytes:
        text += f"\n# [truncated at {max_bytes} bytes]\n"
    return redact(text)


def read_if_allowed(repo: Path, rel: str, max_bytes: int = DEFAULT_MAX_BYTES) -> str | None:
    """:func:`read_for_prompt`, or None (logged at debug level) when the file is refused or
    unreadable: context gathering leaves such a file out, one odd file never stops a target."""
    try:
        return read_for_prompt(repo, rel, max_bytes)
    except BadInputError as exc:
        log.debug("context: %s left out: %s", rel, exc)
        return None


def redact_validation(result: ValidationResult) -> ValidationResult:
    """`result` with every text that came out of a sandbox run redacted (load error, failure
    messages, traces, captured output, lint messages): what a test printed or read never
    reaches a prompt, a report, a log or the archive as it was."""
    examples = [
        case.model_copy(
            update={
                name: redact(value)
                for name in ("message", "trace", "stdout", "stderr")
                if isinstance(value := getattr(case, name), str)
            }
        )
        for case in result.examples
    ]
    lint = [o.model_copy(update={"message": redact(o.message)}) for o in result.lint]
    update: dict[str, object] = {"examples": examples, "lint": lint}
    if result.load_error is not None:
        update["load_error"] = redact(result.load_error)
    problem = getattr(result, "problem", None)  # why a suite did not run, where it is recorded
    if problem is not None:
        update["problem"] = problem.model_copy(
            update={
                name: redact(value)
                for name in ("message", "detail", "hint")
                if isinstance(value := getattr(problem, name, None), str)
            }
        )
    return result.model_copy(update=update)
