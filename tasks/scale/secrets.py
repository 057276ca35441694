"""Secrets by reference: a job carries where each secret it uses is read, never the value.

A file job's or a repair group's settings go to the task runner as task parameters: through
Dask they are pickled, sent over the network and held by the scheduler. So they travel with
every secret value blanked (:func:`shipped_settings`), and the worker reads each secret the
job uses again (:func:`resolved_settings`): in the flow's own process from the run that
registered it (:func:`tasks.scale.hosting`), elsewhere from the worker's environment (the
variable the setting is read from, e.g. ``MISTRAL_API_KEY``) or from the Prefect Secret block
the operator named (``model.api_key_secret``). Secrets a job does not use (the history store's
URL) never leave the flow's process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr

from tasks.core.config import Settings
from tasks.core.errors import ConfigError
from tasks.core.secret_values import register_secret

#: The secrets a job uses, by dotted setting name.
JOB_SECRETS = ("mistral_api_key",)


class SecretRef(BaseModel):
    """Where a worker reads one secret setting again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(description="The setting's dotted name, e.g. mistral_api_key")
    env: tuple[str, ...] = Field(description="Variables of the worker it is read from")
    block: str | None = Field(None, description="A Prefect Secret block holding it")


class SecretRefs(BaseModel):
    """The secrets a shipped job needs, by reference."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    refs: tuple[SecretRef, ...] = ()


def _secret_fields(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, SecretStr | None]]:
    for name, info in type(model).model_fields.items():
        value = getattr(model, name, None)
        path = f"{prefix}{name}"
        if "SecretStr" in str(info.annotation):
            yield path, value
        elif isinstance(value, BaseModel):
            yield from _secret_fields(value, f"{path}.")


def _with_value(model: BaseModel, path: str, value: SecretStr | None) -> BaseModel:
    head, _, rest = path.partition(".")
    if not rest:
        return model.model_copy(update={head: value})
    inner = getattr(model, head)
    return model.model_copy(update={head: _with_value(inner, rest, value)})


def _env_names(path: str) -> tuple[str, ...]:
    head, _, rest = path.partition(".")
    info = Settings.model_fields[head]
    if not rest and isinstance(info.validation_alias, AliasChoices):
        return tuple(str(c) for c in info.validation_alias.choices)
    return ("AUTOPILOT_" + path.replace(".", "__").upper(),)


def _blocks(settings: Settings) -> dict[str, str | None]:
    return {"mistral_api_key": settings.model.api_key_secret}


def shipped_settings(settings: Settings) -> tuple[Settings, SecretRefs]:
    """`settings` with every secret value blanked, and the references of those a job uses."""
    blocks = _blocks(settings)
    out: BaseModel = settings
    refs: list[SecretRef] = []
    for path, value in list(_secret_fields(settings)):
        if path in JOB_SECRETS and (value is not None or blocks.get(path)):
            refs.append(SecretRef(path=path, env=_env_names(path), block=blocks.get(path)))
        if value is not None:
            out = _with_value(out, path, None)
    assert isinstance(out, Settings)
    return out, SecretRefs(refs=tuple(refs))


def _value_at(settings: Settings, path: str) -> SecretStr | None:
    value: object = settings
    for part in path.split("."):
        value = getattr(value, part, None)
    return value if isinstance(value, SecretStr) else None


def read_block(name: str) -> str | None:
    """The value of Prefect Secret block `name` (None when it does not exist or is empty)."""
    from prefect.blocks.system import Secret

    try:
        value = Secret.load(name).get()  # type: ignore[union-attr]
    except ValueError:  # Prefect's answer for a block that does not exist
        return None
    return value if isinstance(value, str) and value else None


def resolved_settings(
    settings: Settings, refs: SecretRefs, local: Settings | None = None
) -> Settings:
    """`settings` with each referenced secret read again: from `local` (the flow's own
    settings, in its process), else the worker's environment, else the named Secret block.

    Raises:
        ConfigError: a secret the job needs is nowhere on this worker (one line saying where
            it was looked for).
    """
    out: BaseModel = settings
    for ref in refs.refs:
        value = _value_at(local, ref.path) if local is not None else None
        if value is None:
            found = next((os.environ[n] for n in ref.env if os.environ.get(n)), None)
            found = found or (read_block(ref.block) if ref.block else None)
            value = SecretStr(found) if found else None
        if value is None:
            where = " or ".join(ref.env)
            block = f", nor the Prefect Secret block {ref.block!r}" if ref.block else ""
            raise ConfigError(
                f"{ref.path}: not available on this worker: neither {where} is set here{block} "
                "(a job carries secrets by reference, never by value)"
            )
        register_secret(value)  # redacted by value from what this worker keeps
        out = _with_value(out, ref.path, value)
    assert isinstance(out, Settings)
    return out


def with_block_secrets(settings: Settings) -> Settings:
    """The flow's own settings with the model key read from its Secret block, when the
    operator named one and the environment has no key."""
    name = settings.model.api_key_secret
    if settings.mistral_api_key is not None or not name:
        return settings
    value = read_block(name)
    if value is None:
        raise ConfigError(f"model.api_key_secret: the Prefect Secret block {name!r} is missing")
    register_secret(value)
    return settings.model_copy(update={"mistral_api_key": SecretStr(value)})
