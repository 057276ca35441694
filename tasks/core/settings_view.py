"""The effective settings, each with where it came from, and the settings' reference page.

Both read the :class:`tasks.core.config.Settings` model itself (its fields, defaults and
descriptions), so a field added there shows up here with no other change.
``python -m tasks.core.settings_view`` prints docs/settings.md.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from tasks.core.config import CONFIG_FILE, Settings, load_settings_report
from tasks.core.operator_only import RULE_TEXT, IgnoredSetting, rule_for

Source = Literal["default", "autopilot.toml", "environment", "option"]
MASK = "****"
#: user:password@ in a URL.
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


class Ignored(BaseModel):
    """What the repository's autopilot.toml gave for a setting that only the operator may set
    (or widen), and was therefore not used."""

    file: str
    value: Any
    reason: str


class SettingRow(BaseModel):
    """One effective setting: its dotted name, environment variable, shown value and source;
    `ignored` when the repository's autopilot.toml gave a value that was not used."""

    name: str
    env: str
    value: Any
    source: Source
    secret: bool = False
    ignored: Ignored | None = None


def _leaves(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo]]:
    """(dotted name, field) of every leaf setting, in declaration order."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _leaves(annotation, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", field


def env_names(dotted: str, field: FieldInfo) -> list[str]:
    """The environment variables that set a setting (its alias choices, else the prefixed name)."""
    alias = field.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return [str(c) for c in choices]
    return ["AUTOPILOT_" + dotted.replace(".", "__").upper()]


def _is_secret(field: FieldInfo) -> bool:
    return "SecretStr" in str(field.annotation)


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _has(data: dict[str, Any], dotted: str) -> bool:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _from_env(dotted: str, field: FieldInfo, environ: dict[str, str]) -> bool:
    """Whether a non-blank environment variable sets this setting (or its whole group, as JSON)."""
    upper = {k.upper(): v for k, v in environ.items()}
    names = env_names(dotted, field)
    if "." in dotted:
        group = "AUTOPILOT_" + dotted.split(".")[0].upper()
        raw = upper.get(group, "")
        try:
            if raw.strip() and dotted.split(".", 1)[1] in json.loads(raw):
                return True
        except (ValueError, TypeError):
            pass
    return any(upper.get(n.upper(), "").strip() for n in names)


def shown(value: Any, secret: bool) -> Any:
    """A value as printed: secrets masked, a URL's user:password hidden, paths as strings."""
    if isinstance(value, SecretStr) or (secret and value is not None):
        return MASK
    if isinstance(value, str):
        return _USERINFO.sub(MASK + "@", value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list):
        return [shown(v, False) for v in value]
    return value


def effective_settings(
    repo: Path | None = None, overrides: dict[str, Any] | None = None
) -> list[SettingRow]:
    """Every setting's effective value (secrets masked) and its source, in declaration order.

    Precedence, highest first: option (``overrides``), environment, autopilot.toml, default;
    a value of autopilot.toml that narrows an operator-only setting holds over the environment.
    Raises :class:`tasks.core.errors.ConfigError` as :func:`load_settings` does.
    """
    return effective_settings_report(repo, overrides)[0]


def effective_settings_report(
    repo: Path | None = None, overrides: dict[str, Any] | None = None
) -> tuple[list[SettingRow], list[IgnoredSetting]]:
    """:func:`effective_settings`, and every value of autopilot.toml that was ignored (also
    those of settings this version does not have, which no row shows)."""
    settings, toml, narrowed, ignored = load_settings_report(repo, overrides)
    given = {k for k, v in (overrides or {}).items() if v is not None}
    rows = []
    for dotted, field in _leaves(Settings):
        source: Source = "default"
        if dotted in given:
            source = "option"
        elif dotted in narrowed:  # the repository narrowed an operator's setting
            source = "autopilot.toml"
        elif _from_env(dotted, field, dict(os.environ)):
            source = "environment"
        elif _has(toml, dotted):
            source = "autopilot.toml"
        secret = _is_secret(field)
        rows.append(
            SettingRow(
                name=dotted,
                env=env_names(dotted, field)[0],
                value=shown(_get(settings, dotted), secret),
                source=source,
                secret=secret,
                ignored=_ignored(dotted, ignored),
            )
        )
    return rows, ignored


def _ignored(dotted: str, ignored: list[IgnoredSetting]) -> Ignored | None:
    for item in ignored:
        if item.name == dotted or dotted.startswith(item.name + "."):
            return Ignored(file=item.file, value=item.value, reason=item.reason)
    return None


def undocumented() -> list[str]:
    """Settings whose field has no description (the reference page needs one for each)."""
    return [dotted for dotted, field in _leaves(Settings) if not (field.description or "").strip()]


def _default_text(field: FieldInfo) -> str:
    if field.default_factory is not None:
        try:
            value = field.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return "(computed)"
        if isinstance(value, Path):
            return "`~/" + str(value.relative_to(Path.home())) + "`"
        return f"`{json.dumps(value)}`"
    default = field.default
    return "unset" if default is None else f"`{json.dumps(default)}`"


def settings_markdown() -> str:
    """docs/settings.md: every setting with its environment variable, default and description."""
    lines = [
        "# Settings",
        "",
        "<!-- Generated from the Settings model (tasks.core.config) by the module",
        "     tasks.core.settings_view; a test keeps it current. Do not edit by hand. -->",
        "",
        f"Precedence, highest first: a command's option, the environment, the repository's "
        f"`{CONFIG_FILE}` (`[gates]` style tables for groups), the default. "
        "`autopilot config show` prints the effective values and where each came from (secrets "
        "masked). An empty value of a setting that defaults to unset means unset. Secrets are "
        f"never read from `{CONFIG_FILE}`.",
        "",
        f"The repository is untrusted: the column `{CONFIG_FILE}` says what its file may do with "
        "a setting. The security settings are the operator's (the environment, an option); "
        "the repository may only narrow them (a narrowing value holds over the environment too), "
        "and a value it may not set is ignored with one warning line (`config show` lists it "
        "under `ignored`).",
        "",
        f"| setting | environment | default | `{CONFIG_FILE}` | description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for dotted, field in _leaves(Settings):
        env = " or ".join(f"`{n}`" for n in env_names(dotted, field))
        description = (field.description or "").replace("|", "\\|").replace("\n", " ")
        rule = rule_for(dotted, field)
        repo = RULE_TEXT[rule] if rule else "yes"
        lines.append(f"| `{dotted}` | {env} | {_default_text(field)} | {repo} | {description} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(settings_markdown(), end="")
