"""The forge token: from a Prefect Secret block, or the environment. Never logged."""

from __future__ import annotations

import os

from pydantic import SecretStr

from tasks.core.errors import AutopilotError
from tasks.core.secret_values import register_secret
from tasks.forge.settings import ForgeSettings

_FALLBACK = {"github": ("GITHUB_TOKEN", "GH_TOKEN"), "gitlab": ("GITLAB_TOKEN",)}


class ForgeError(AutopilotError):
    """A forge call could not be made or was refused; the message is one line."""


def resolve_token(settings: ForgeSettings) -> SecretStr:
    """The token, from the Secret block named in the settings, else the environment.

    Raises:
        ForgeError: no token anywhere (one line naming where it was looked for).
    """
    if settings.token_secret:
        from prefect.blocks.system import Secret

        try:
            value = Secret.load(settings.token_secret).get()  # type: ignore[union-attr]
        except ValueError:  # Prefect's answer for a block that does not exist
            raise ForgeError(
                f"forge token: the Prefect Secret block {settings.token_secret!r} does not exist"
            ) from None
        if isinstance(value, str) and value:
            register_secret(value)  # redacted by value from what is kept, as every secret
            return SecretStr(value)
        raise ForgeError(f"forge token: the Secret block {settings.token_secret!r} is empty")
    names = (settings.token_env, *_FALLBACK.get(settings.kind or "", ()))
    for name in names:
        if os.environ.get(name):
            register_secret(os.environ[name])
            return SecretStr(os.environ[name])
    raise ForgeError(
        f"forge token: set {' or '.join(names)}, or name a Prefect Secret block in "
        "forge.token_secret"
    )
