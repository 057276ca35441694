"""The secrets Autopilot holds, redacted by value wherever output is kept.

Patterns (:mod:`tasks.core.secrets`) catch what looks like a key; this catches what *is* one,
however a test disguised it: every registered value in its plain, reversed, percent-encoded,
hexadecimal (lower and upper case) and base64 forms (standard and URL-safe, with and without
padding, and the part that stays the same at each of the three byte offsets, so that it is
found inside a longer base64 stream). The values are those of the settings' ``SecretStr``
fields, of the environment's secrets (:data:`SECRET_ENV_NAMES`, names that say they are a key,
token, secret or password), the forge token, and the variables passed into the sandbox
(``[sandbox] pass_env``). Registering happens when settings are loaded and when a command
passes variables in; never at import time.

All forms go into one regular expression built as a trie (common prefixes shared), rebuilt when
the set changes; :attr:`Registry.version` tells a cache that its answers are stale.
"""

from __future__ import annotations

import base64
import os
import re
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, SecretStr

#: Shorter values are not redacted by value (they would hide common words); patterns still apply.
MIN_SECRET_CHARS = 8
#: A form this short (a base64 fragment of a short secret) is left out.
MIN_FORM_CHARS = 8
#: Variables that always hold a secret when set.
SECRET_ENV_NAMES = frozenset(
    {
        "MISTRAL_API_KEY",
        "AUTOPILOT_MISTRAL_API_KEY",
        "AUTOPILOT_FORGE_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITLAB_TOKEN",
        "PREFECT_API_KEY",
        "PREFECT_API_AUTH_STRING",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
    }
)
#: Other names that say their value is a secret: `*_API_KEY`, `*_TOKEN`, `*_SECRET*`, ...
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|ACCESS_KEY|SECRET|TOKEN|PASSWORD|PASSWD|PRIVATE_KEY|AUTH_STRING|"
    r"CREDENTIALS?)(?:_|$)"
)
#: ...unless the name says the value is where a secret is, not the secret.
_LOCATION_NAME = re.compile(r"_(?:FILE|PATH|DIR|SOCK|SOCKET)$")


def meaningful(value: str) -> bool:
    """Whether `value` is worth redacting by value: long enough, not one lower-case word (a
    default password such as ``postgres`` is no secret, and hiding it would hide the word),
    not a host path or list of paths (hiding those would garble every trace)."""
    text = value.strip()
    if len(text) < MIN_SECRET_CHARS or (text.isalpha() and text.islower()):
        return False
    return not all(os.path.isabs(p) for p in text.split(":"))


def secret_env_name(name: str) -> bool:
    """Whether the environment variable `name` holds a secret by its name."""
    upper = name.upper()
    if upper in SECRET_ENV_NAMES:
        return True
    return bool(_SECRET_NAME.search(upper)) and not _LOCATION_NAME.search(upper)


def _b64_fragments(data: bytes) -> list[bytes]:
    """The base64 characters that depend on `data` alone, at each of the three byte offsets
    `data` may start at inside a longer stream."""
    out = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data)
        start = (8 * offset + 5) // 6  # the first character holding no byte of the prefix
        end = (8 * (offset + len(data))) // 6  # the last one holding no byte after `data`
        out.append(encoded[start:end])
    return out


_URLSAFE = str.maketrans("+/", "-_")


def forms(value: str) -> set[str]:
    """Every form of `value` that is redacted (see the module docstring)."""
    data = value.encode("utf-8")
    found = {value, value[::-1], urllib.parse.quote(value, safe=""), data.hex(), data.hex().upper()}
    padded = base64.b64encode(data).decode("ascii")
    fragments = [f.decode("ascii") for f in _b64_fragments(data)]
    for b64 in (padded, padded.rstrip("="), *fragments):
        found |= {b64, b64.translate(_URLSAFE)}
    return {f for f in found if len(f) >= MIN_FORM_CHARS}


def trie_pattern(words: Iterable[str]) -> str:
    """One regular expression matching any of `words`, longest first, as a trie: at each
    position of a text the engine follows one path of shared prefixes instead of trying every
    word in turn."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _node(root)


def _node(node: dict[str, Any]) -> str:
    """The pattern of one trie node (chains of single children become one literal)."""
    branches = []
    for char in sorted(c for c in node if c):
        run, child = [char], node[char]
        while len(child) == 1 and "" not in child:  # one way on: a literal run
            [(char, child)] = child.items()
            run.append(char)
        branches.append(re.escape("".join(run)) + _node(child))
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    # Greedy: the longer word is tried first, the end of a shorter one is the fallback.
    return f"(?:{body})?" if "" in node else body


class Registry:
    """The process's secret values and the one pattern that finds all their forms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        #: Changes whenever a value is added: part of every cached redaction's key.
        self.version = 0

    def add(self, values: Iterable[str | SecretStr | None]) -> bool:
        """Register `values` (None, blank and too short ones are skipped); True if any is new."""
        new = set()
        for value in values:
            text = value.get_secret_value() if isinstance(value, SecretStr) else value
            if isinstance(text, str) and meaningful(text) and text not in self._values:
                new |= {text, text.strip()}
        if not new:
            return False
        with self._lock:
            self._values |= new
            words = set().union(*(forms(v) for v in self._values if meaningful(v)))
            self._pattern = re.compile(trie_pattern(sorted(words)))
            self.version += 1
        return True

    def __len__(self) -> int:
        return len(self._values)

    def redact(self, text: str, replacement: str) -> str:
        """`text` with every form of every registered value replaced by `replacement`."""
        pattern = self._pattern
        return text if pattern is None else pattern.sub(replacement, text)


REGISTRY = Registry()


def register_secret(*values: str | SecretStr | None) -> bool:
    """Add values to the process's secrets; True when one was new."""
    return REGISTRY.add(values)


def register_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Add the values of `environ`'s secret variables (default: this process's environment)."""
    env = os.environ if environ is None else environ
    return REGISTRY.add(v for k, v in list(env.items()) if secret_env_name(k))


def register_model_secrets(model: BaseModel) -> bool:
    """Add every ``SecretStr`` value of a settings model and its groups."""
    return REGISTRY.add(_secret_values(model))


def _secret_values(model: BaseModel) -> Iterable[SecretStr]:
    for name in type(model).model_fields:
        value = getattr(model, name, None)
        if isinstance(value, SecretStr):
            yield value
        elif isinstance(value, BaseModel):
            yield from _secret_values(value)
