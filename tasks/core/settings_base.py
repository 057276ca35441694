"""The base of every settings group: an empty string given to an optional setting means unset."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, SecretStr, ValidationInfo, field_validator


class _Group(BaseModel):
    """A settings group: an empty string given to an optional setting (a key, a URL, a name
    whose default is None) means unset, as compose and CI pass a variable that is not set."""

    @field_validator("*", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        return empty_is_unset(cls, value, info)


def empty_is_unset(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    """None for a blank string (or SecretStr) given to a field whose default is None."""
    field = cls.model_fields.get(info.field_name or "")
    raw = value.get_secret_value() if isinstance(value, SecretStr) else value
    if field is not None and field.default is None and isinstance(raw, str) and not raw.strip():
        return None
    return value
