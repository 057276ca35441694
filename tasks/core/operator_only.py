"""What a repository's ``autopilot.toml`` may set: the repository is untrusted, as the code it
holds is.

The settings that decide what a sandboxed test can reach, where prompts, secrets and results
go, and which limits hold come from the operator only (the environment, a command's options,
the defaults): :data:`RULES` names each one and how a repository may *narrow* it (a lower
limit, fewer paths or variables, the network off, a smaller model budget). Every other setting
(gates, model names, the repair's thresholds, services, prepare commands...) is the
repository's to choose.

A value the repository may not set is ignored, with one warning line naming the setting and
the file, and never stops a run: ignoring it is always the safe side, and a repository that
once committed ``pass_env`` must not break every nightly. ``autopilot config show`` lists what
was ignored.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import AliasChoices, BaseModel, SecretStr, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from tasks.core.host_paths import within

log = logging.getLogger(__name__)

Rule = Literal[
    "operator",
    "secret",
    "at_most",
    "at_least",
    "subset",
    "paths_within",
    "false_only",
    "backend",
    "add_only",
    "in_repo",
]
#: The operator's settings, by dotted name (a group's name covers all of its fields).
RULES: dict[str, Rule] = {
    "home": "operator",
    "archive": "operator",
    "cache_dir": "operator",
    "model_url": "operator",
    "python": "in_repo",
    "node_modules": "in_repo",
    "sandbox.backend": "backend",
    "sandbox.timeout_s": "at_most",
    "sandbox.spec_timeout_s": "at_most",
    "sandbox.memory_mb": "at_most",
    "sandbox.max_processes": "at_most",
    "sandbox.max_parallel": "at_most",
    "sandbox.docker_image": "operator",
    "sandbox.read_only": "paths_within",
    "sandbox.pass_env": "subset",
    "envs.network": "false_only",
    "envs.allow_hosts": "subset",
    "envs.install_timeout_s": "at_most",
    "envs.ruby": "operator",
    "envs.bundle_path": "in_repo",
    "forge": "operator",
    "repair.risky_paths": "add_only",
    # A pull request's budget is the operator's; a repository may skip more files.
    "premerge.max_changed_lines": "at_most",
    "premerge.max_files": "at_most",
    "premerge.skip": "add_only",
    "premerge.status_context": "operator",
    # The operator's model budget: a repository may spend less, never more.
    "model.timeout_s": "at_most",
    "model.max_retries": "at_most",
    "model.max_reasks": "at_most",
    "model.max_concurrency": "at_most",
    "model.max_tokens": "at_most",
    "model.judge_samples": "at_most",
    # Sending again what was already bought: the operator's money.
    "model.reuse_replies": "operator",
    "model.api_key_secret": "operator",
    # The run history: where it is (history.url is a secret), whether it is kept, and what it
    # saves (a repository may skip longer and merge more shards, never less).
    "history.enabled": "operator",
    "history.lock_timeout_s": "at_most",
    "history.skip_after": "at_most",
    "history.skip_nights": "at_least",
    "history.shard_window_s": "at_least",
}
#: Rules under which the repository's accepted value is narrower than (or the same as) the
#: operator's: it applies over the environment too (never over a command's option).
NARROWING: frozenset[Rule] = frozenset(
    {"at_most", "at_least", "subset", "paths_within", "false_only", "backend", "add_only"}
)
#: How each rule reads in docs/settings.md's "autopilot.toml" column.
RULE_TEXT: dict[Rule, str] = {
    "operator": "operator only (the same value only)",
    "secret": "never (a secret)",
    "at_most": "lower only",
    "at_least": "higher only",
    "subset": "fewer only (names the operator's has)",
    "paths_within": "fewer only (within the operator's paths)",
    "false_only": "false only",
    "backend": "the operator's only (`bwrap` for `auto`)",
    "add_only": "additions only (the operator's stay)",
    "in_repo": "a path inside the repository only",
}
_MASK = "****"
_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


class IgnoredSetting(BaseModel):
    """A value of the repository's autopilot.toml that was not used (secrets masked)."""

    name: str
    file: str
    value: Any
    reason: str

    def line(self) -> str:
        """The one warning line."""
        shown = repr(self.value)
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        return f"{self.file}: {self.name} = {shown} ignored: {self.reason}"


def env_name(dotted: str) -> str:
    """The environment variable of a setting (the operator's way to set it)."""
    return "AUTOPILOT_" + dotted.replace(".", "__").upper()


def rule_for(dotted: str, field: FieldInfo | None = None) -> Rule | None:
    """The rule of a setting, or None when the repository may set it freely."""
    if field is not None and "SecretStr" in str(field.annotation):
        return "secret"
    return RULES.get(dotted) or RULES.get(dotted.split(".", 1)[0])


class Screened(NamedTuple):
    """The repository's settings after :func:`screen`."""

    #: What the repository may set freely (and in-repository paths), under the environment.
    data: dict[str, Any]
    #: Operator settings the repository narrowed, by dotted name: over the environment too.
    narrowed: dict[str, Any]
    ignored: list[IgnoredSetting]


def screen(data: dict[str, Any], operator: BaseModel, *, repo: Path, file: Path) -> Screened:
    """The repository's settings with what it may not set taken out, what it narrowed, and
    what was ignored.

    Args:
        data: the repository's autopilot.toml, as read.
        operator: the settings without it (environment, options, defaults), to compare with.
        repo: the repository (``in_repo`` paths must stay inside it).
        file: the autopilot.toml, for the warnings.
    """
    data = copy.deepcopy(data)
    narrowed: dict[str, Any] = {}
    ignored: list[IgnoredSetting] = []
    for keys, dotted, rule, field in _ruled(data, type(operator)):
        raw = _pop(data, keys)
        current = _current(operator, dotted)
        keep, dropped, reason = _judge(rule, raw, current, field, repo)
        if keep is not _DROP and rule in NARROWING:
            if keep != current:  # the same as the operator's changes nothing
                narrowed[dotted] = keep
        elif keep is not _DROP:
            _put(data, keys, keep)
        if reason and rule != "secret":
            reason += f" (the operator's is set in {env_name(dotted)})"
        if reason:
            shown = _MASK if rule == "secret" else _masked(dropped)
            ignored.append(IgnoredSetting(name=dotted, file=str(file), value=shown, reason=reason))
    _prune(data)
    return Screened(data, narrowed, ignored)


def _prune(data: dict[str, Any]) -> None:
    """Tables left empty once their ruled values went (the environment fills them)."""
    for key in [k for k, v in data.items() if isinstance(v, dict)]:
        _prune(data[key])
        if not data[key]:
            del data[key]


def warn(ignored: list[IgnoredSetting]) -> None:
    """One warning line per ignored setting, once per process."""
    for item in ignored:
        line = item.line()
        with _WARNED_LOCK:
            if line in _WARNED:
                continue
            _WARNED.add(line)
        log.warning("%s", line)


_DROP = object()


def _ruled(
    data: dict[str, Any],
    model: type[BaseModel] | None,
    prefix: str = "",
    inherited: Rule | None = None,
) -> Iterator[tuple[list[str], str, Rule, FieldInfo | None]]:
    """(keys in `data`, dotted setting name, rule, field) of every ruled value `data` holds;
    a group's rule (``forge``) holds for each of its fields."""
    fields = _fields(model) if model is not None else {}
    for key in list(data):
        name, field = fields.get(key.lower(), (key, None))
        dotted = prefix + name
        annotation = field.annotation if field is not None else None
        group = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
        rule = inherited or rule_for(dotted, field)
        if group is not None and isinstance(data[key], dict):
            for keys, sub, sub_rule, sub_field in _ruled(data[key], group, dotted + ".", rule):
                yield [key, *keys], sub, sub_rule, sub_field
        elif rule is not None:
            yield [key], dotted, rule, field


def _fields(model: type[BaseModel]) -> dict[str, tuple[str, FieldInfo]]:
    """A model's fields by lower-case name and by alias (``MISTRAL_API_KEY``)."""
    found = {name.lower(): (name, f) for name, f in model.model_fields.items()}
    for name, field in model.model_fields.items():
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias] if alias else []
        for choice in choices:
            if isinstance(choice, str):
                found.setdefault(choice.lower(), (name, field))
    return found


def _judge(
    rule: Rule, raw: Any, current: Any, field: FieldInfo | None, repo: Path
) -> tuple[Any, Any, str]:
    """(the value kept or _DROP, the part ignored, why it was ignored or "")."""
    if rule == "secret":
        return _DROP, raw, "a secret is never read from autopilot.toml"
    if rule == "in_repo":
        if isinstance(raw, str) and _inside(raw, repo):
            return raw, None, ""
        return _DROP, raw, "operator-only outside the repository (a path inside it may be set)"
    if field is None or current is _MISSING:
        return _DROP, raw, "operator-only"
    try:
        value: Any = TypeAdapter(field.annotation).validate_python(raw)
    except ValidationError:
        return _DROP, raw, "operator-only, and not a valid value"
    return _narrowed(rule, raw, value, current)


def _narrowed(rule: Rule, raw: Any, value: Any, current: Any) -> tuple[Any, Any, str]:
    """(the validated value kept or _DROP, the part ignored, why): see :data:`RULES`."""
    if value == current:
        return value, None, ""
    if rule == "at_most":
        limit = _cpus() if current is None else current
        if value is not None and value <= limit:
            return value, None, ""
        return _DROP, raw, f"operator-only; a repository may only lower it (here: {limit})"
    if rule == "at_least":
        if value is not None and value >= current:
            return value, None, ""
        return _DROP, raw, f"operator-only; a repository may only raise it (here: {current})"
    if rule == "false_only":
        if value is False:
            return value, None, ""
        return _DROP, raw, "operator-only; a repository may only turn it off"
    if rule == "backend":
        if value == "bwrap" and current == "auto":  # auto is bwrap, or no sandbox at all
            return value, None, ""
        return _DROP, raw, f"operator-only; a repository cannot choose another ({current!r})"
    if rule in ("subset", "paths_within"):
        allowed = current or []
        if rule == "paths_within":
            kept = [v for v in value if _within_any(v, allowed)]
        else:
            kept = [v for v in value if v in allowed]
        dropped = [v for v in value if v not in kept]
        why = "operator-only; a repository may only name fewer of the operator's"
        return kept, dropped, why if dropped else ""
    if rule == "add_only":  # the repository's globs join the operator's, which all stay
        return [*current, *(v for v in value if v not in current)], None, ""
    return _DROP, raw, "operator-only"


_MISSING = object()


def _current(model: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(model, BaseModel) or part not in type(model).model_fields:
            return _MISSING
        model = getattr(model, part)
    return model


def _within_any(path: str, allowed: list[str]) -> bool:
    """Whether `path` is one of `allowed` or below one, as written and where links lead."""
    if not isinstance(path, str) or not os.path.isabs(path):
        return False
    norm, real = os.path.normpath(path), os.path.realpath(path)
    return any(
        within(norm, os.path.normpath(a)) and within(real, os.path.realpath(a)) for a in allowed
    )


def _inside(value: str, repo: Path) -> bool:
    """Whether a path setting (relative to the repository) names something inside it."""
    if value.startswith("~"):
        return False
    root = os.path.abspath(repo)
    return within(os.path.abspath(os.path.join(root, value)), root)


def _cpus() -> int:
    """The default of ``sandbox.max_parallel`` (as :func:`tasks.sandbox.slots.default_slots`)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _masked(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return _MASK
    if isinstance(value, str):
        return _USERINFO.sub(_MASK + "@", value)
    if isinstance(value, list):
        return [_masked(v) for v in value]
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    return value


def _pop(data: dict[str, Any], keys: list[str]) -> Any:
    node = data
    for key in keys[:-1]:
        node = node[key]
    return node.pop(keys[-1])


def _put(data: dict[str, Any], keys: list[str], value: Any) -> None:
    node = data
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
