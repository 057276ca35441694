"""The stacks Autopilot knows, by name: the one place a toolchain is registered.

Adding a stack is one folder and one line: ``tasks/toolchains/<stack>/`` with a
:class:`~tasks.toolchains.base.Toolchain` subclass (and its skills in skills/, one per kind),
then its ``"name": "module:Class"`` entry in :data:`STACKS`. Names are plain strings validated
here (the configuration's ``toolchain`` setting, reports and caches carry them); the stacks are
imported when first asked for, so importing the registry stays cheap.
"""

from __future__ import annotations

import importlib
import logging
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tasks.core.errors import BadInputError, ConfigError
from tasks.core.run_context import current_run_context
from tasks.toolchains.base import Toolchain

if TYPE_CHECKING:
    from tasks.core.config import Settings

log = logging.getLogger(__name__)

#: name -> "module:Class", in detection order: when several stacks recognise a repository, the
#: first one wins (an explicit ``toolchain`` setting chooses another).
STACKS: dict[str, str] = {
    "ruby-rspec": "tasks.toolchains.ruby.toolchain:RubyRspecToolchain",
    "python-pytest": "tasks.toolchains.python.toolchain:PythonPytestToolchain",
    "node-jest": "tasks.toolchains.node.toolchain:NodeJestToolchain",
}


def names() -> tuple[str, ...]:
    """The registered toolchain names, in detection order."""
    return tuple(STACKS)


@cache
def toolchain_class(name: str) -> type[Toolchain]:
    """The class of the toolchain called `name`.

    Raises:
        ConfigError: no toolchain has that name.
    """
    if name not in STACKS:
        raise ConfigError(f"unknown toolchain {name!r} (expected one of {', '.join(STACKS)})")
    module, _, attr = STACKS[name].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, Toolchain)) or cls.name != name:
        raise ConfigError(f"{STACKS[name]}: not the Toolchain named {name!r}")
    return cls


def toolchain_classes() -> list[type[Toolchain]]:
    """Every registered toolchain class, in detection order."""
    return [toolchain_class(name) for name in STACKS]


def get_toolchain(name: str, **options: Any) -> Toolchain:
    """The toolchain called `name`, built with the stack's own `options` (``prepare``,
    ``home``, and what the stack takes: ``python`` for python-pytest).

    Raises:
        ConfigError: no toolchain has that name.
    """
    return toolchain_class(name)(**options)


def toolchain_for(settings: Settings, name: str) -> Toolchain:
    """The toolchain `name` as the settings configure it (interpreter, prepare, home), using
    the run's prepared environment when there is one for its stack."""
    chain = toolchain_class(name).from_settings(settings)
    prepared = current_run_context().prepared
    builder = chain.env_builder() if prepared is not None else None
    if prepared is not None and builder is not None and builder.stack == prepared.stack:
        return chain.using_env(prepared)
    return chain


def detect_toolchain(repo: Path, override: str | None = None) -> str:
    """The repository's toolchain: the override when given, else the first registered stack
    that recognises the repository.

    Raises:
        BadInputError: the repository is not a directory, the override is unknown, or no
            stack recognises it.
    """
    if not repo.is_dir():
        raise BadInputError(f"{repo}: not a directory")
    if override is not None:
        if override not in STACKS:
            raise BadInputError(
                f"unknown toolchain {override!r} (expected one of {', '.join(STACKS)})"
            )
        return override
    found = [cls.name for cls in toolchain_classes() if cls.detect(repo)]
    if len(found) > 1:
        log.info("%s: %s match; using %s", repo, " and ".join(found), found[0])
    if found:
        return found[0]
    needs = ", ".join(f"{cls.name} needs {cls.detection}" for cls in toolchain_classes())
    raise BadInputError(
        f"{repo}: no toolchain detected ({needs}); set AUTOPILOT_TOOLCHAIN to override"
    )


def by_language(language: str) -> type[Toolchain]:
    """The toolchain whose tests are written in `language` (``ruby``, ``python``).

    Raises:
        ConfigError: no registered toolchain writes tests in that language.
    """
    for cls in toolchain_classes():
        if cls.language == language:
            return cls
    known = ", ".join(cls.language for cls in toolchain_classes())
    raise ConfigError(f"no toolchain for language {language!r} (known: {known})")


def kinds() -> dict[str, str]:
    """Every source kind -> the toolchain that declares it (kinds are unique across stacks).

    Raises:
        ConfigError: two stacks declare the same kind.
    """
    owners: dict[str, str] = {}
    for cls in toolchain_classes():
        for kind in cls.kinds:
            if kind in owners:
                raise ConfigError(f"kind {kind!r} is declared by {owners[kind]} and {cls.name}")
            owners[kind] = cls.name
    return owners


def owner_of_kind(kind: str) -> type[Toolchain]:
    """The toolchain that declares the source kind `kind`.

    Raises:
        ConfigError: no registered toolchain declares it.
    """
    owner = kinds().get(kind)
    if owner is None:
        raise ConfigError(f"unknown source kind {kind!r} (known: {', '.join(kinds())})")
    return toolchain_class(owner)


def syntax_check(path: str) -> list[str] | None:
    """The command that checks the syntax of the file `path`, from the first stack whose
    language it is; None when no stack knows its syntax."""
    for cls in toolchain_classes():
        argv = cls().syntax_check(path)
        if argv is not None:
            return argv
    return None


def cache_dirs() -> frozenset[str]:
    """Every stack's cache directory names."""
    return frozenset(d for cls in toolchain_classes() for d in cls.cache_dirs)


def env_dirs() -> frozenset[str]:
    """Every stack's environment directory names."""
    return frozenset(d for cls in toolchain_classes() for d in cls.env_dirs)


def output_paths() -> frozenset[str]:
    """Every stack's top-level run outputs."""
    return frozenset(d for cls in toolchain_classes() for d in cls.output_paths)


def manifests() -> tuple[str, ...]:
    """Every stack's dependency manifest and lock file globs."""
    return tuple(glob for cls in toolchain_classes() for glob in cls.manifests)


def migrations() -> tuple[str, ...]:
    """Every stack's migration and schema globs."""
    return tuple(glob for cls in toolchain_classes() for glob in cls.migrations)
