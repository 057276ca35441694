"""Skills: one markdown instruction file per kind of source file, chosen by location.

A skill is ``skills/<name>.md`` with a YAML front matter (validated by ``SkillMeta``) and a body
with three sections: ``## Scope`` (the files it may write), ``## Example`` (a complete example
spec in a fenced ruby/python block) and ``## Critical rules``. The body is what the generation
prompt injects; the version and sha256 go into the run's metadata and cache keys.

Exactly one skill applies to each file. When the file's kind is known (a ``SourceFile`` from the
mapping, which decides kinds by location), the skill of that kind is chosen; every
kind a registered toolchain declares (``Toolchain.kinds``) has exactly one skill, which
``load_skills`` enforces. Given only a path, the
skill whose ``applies_to`` globs match it (and whose ``excludes`` do not) is chosen; the globs are
disjoint, and zero or several matches raise.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.core.errors import ConfigError
from tasks.core.resources import resource_path
from tasks.core.types import SourceFile, SourceKind
from tasks.toolchains import registry

logger = logging.getLogger(__name__)

#: Parsed skills by directory, with the files' names, mtimes and sizes they were read at.
_LOADED: dict[str, tuple[tuple[tuple[object, ...], ...], tuple[Skill, ...]]] = {}
_LOADED_LOCK = threading.Lock()
_FRONT_MATTER = re.compile(r"\A---\n(.*?\n)---\n", re.DOTALL)
_SECTIONS = ("## Scope", "## Example", "## Critical rules")
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```\s*$", re.DOTALL | re.MULTILINE)


class SkillError(ConfigError):
    """A skill file is invalid, or no single skill applies to a file."""


def default_skills_dir() -> Path:
    """The skills/ directory shipped with Autopilot (the checkout's, or the wheel's copy)."""
    return resource_path("skills")


class SkillMeta(BaseModel):
    """A skill's front matter."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str = Field(min_length=20, description="When to use this skill")
    applies_to: list[str] = Field(min_length=1, description="Source path globs it applies to")
    excludes: list[str] = Field(
        default_factory=list, description="Source path globs it never applies to"
    )
    version: str = Field(min_length=1)
    kind: SourceKind
    writes: list[str] = Field(min_length=1, description="Globs of the files it may write")


class Skill(BaseModel):
    """A loaded skill: front matter, body (the prompt text), full text and hash."""

    meta: SkillMeta
    body: str
    text: str
    sha256: str
    path: Path

    @property
    def name(self) -> str:
        """The skill's name."""
        return self.meta.name

    @property
    def version(self) -> str:
        """The skill's version."""
        return self.meta.version

    @property
    def language(self) -> str:
        """The language of the tests it writes: that of the toolchain declaring its kind."""
        return registry.owner_of_kind(self.meta.kind).language

    def applies_to(self, path: str) -> bool:
        """Whether the skill's globs select this source path."""
        return any(glob_match(g, path) for g in self.meta.applies_to) and not any(
            glob_match(g, path) for g in self.meta.excludes
        )

    def may_write(self, path: str) -> bool:
        """Whether the skill allows writing this (test) path."""
        return any(glob_match(g, path) for g in self.meta.writes)

    def examples(self) -> list[tuple[str, str]]:
        """The fenced code blocks of the body as (language, code)."""
        return [(m.group(1), m.group(2)) for m in _FENCE.finditer(self.body)]


@cache
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_match(pattern: str, path: str) -> bool:
    """Match a repository-relative path against a glob.

    ``*`` and ``?`` never cross ``/``; ``**/`` matches any number of directories, including
    none (``app/**/*.rb`` matches ``app/x.rb`` and ``app/a/b/x.rb``).
    """
    return _glob_regex(pattern).match(path) is not None


def load_skill(path: Path) -> Skill:
    """Load and validate one skill file.

    Raises:
        SkillError: No front matter, invalid front matter, name not the file name, a
            missing section, or no example in the skill's language.
    """
    label = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SkillError(f"skill {label}: cannot read: {exc.strerror}") from exc
    m = _FRONT_MATTER.match(text)
    if m is None:
        raise SkillError(f"skill {label}: does not start with a --- front matter")
    try:
        meta = SkillMeta.model_validate(yaml.safe_load(m.group(1)))
    except (yaml.YAMLError, ValidationError) as exc:
        first = str(exc).replace("\n", " ")
        raise SkillError(f"skill {label}: invalid front matter: {first}") from exc
    if meta.name != path.stem:
        raise SkillError(f"skill {label}: front matter name is {meta.name!r}")
    kinds = registry.kinds()
    if meta.kind not in kinds:
        known = ", ".join(kinds)
        raise SkillError(f"skill {label}: kind {meta.kind!r} is no toolchain's (known: {known})")
    body = text[m.end() :].strip() + "\n"
    for section in _SECTIONS:
        if not re.search(rf"^{re.escape(section)}\s*$", body, re.MULTILINE):
            raise SkillError(f"skill {label}: missing section {section!r}")
    skill = Skill(
        meta=meta, body=body, text=text, sha256=hashlib.sha256(text.encode()).hexdigest(), path=path
    )
    if not any(lang == skill.language for lang, _ in skill.examples()):
        raise SkillError(f"skill {label}: no ```{skill.language} example")
    return skill


def load_skills(directory: Path | None = None) -> list[Skill]:
    """Load every skill; a broken skill or a kind without exactly one skill fails here.

    Args:
        directory: The skills directory; the repository's skills/ by default.

    Returns:
        The skills, sorted by name.

    Raises:
        SkillError: One line listing every problem found.
    """
    root = directory or default_skills_dir()
    paths = [p for p in sorted(root.glob("*.md")) if p.name.upper() != "README.MD"]
    # Every file task of a run chooses a skill: the parsed skills are kept while the files'
    # names, sizes and modification times stay the same.
    stamp = tuple((p.name, *_stat(p)) for p in paths)
    with _LOADED_LOCK:
        loaded = _LOADED.get(str(root))
    if loaded is not None and loaded[0] == stamp:
        return list(loaded[1])
    skills = _load_all(paths)
    with _LOADED_LOCK:
        _LOADED[str(root)] = (stamp, tuple(skills))
    logger.debug("loaded %d skills from %s", len(skills), root)
    return skills


def _stat(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def _load_all(paths: list[Path]) -> list[Skill]:
    errors: list[str] = []
    skills: list[Skill] = []
    for path in paths:
        try:
            skills.append(load_skill(path))
        except SkillError as exc:
            errors.append(str(exc))
    for kind in registry.kinds():
        owners = [s.name for s in skills if s.meta.kind == kind]
        if len(owners) != 1:
            errors.append(f"kind {kind}: {len(owners)} skills {owners}, expected exactly 1")
    if errors:
        raise SkillError("; ".join(errors))
    return skills


def choose_skill(
    source: SourceFile | str,
    kind: SourceKind | None = None,
    *,
    skills: list[Skill] | None = None,
) -> Skill:
    """Choose exactly one skill for a source file.

    Args:
        source: A mapped source file, or a repository-relative path.
        kind: The file's kind when ``source`` is a path; taken from ``source`` otherwise.
        skills: The skills to choose from; ``load_skills()`` by default.

    Returns:
        The one skill that applies.

    Raises:
        SkillError: Zero or several skills apply (the message names the file).
    """
    if isinstance(source, SourceFile):
        path, kind = source.path, source.kind
    else:
        path = source
    pool = skills if skills is not None else load_skills()
    if kind is not None:
        # The mapping decided the kind by location; the kind is authoritative.
        matches = [s for s in pool if s.meta.kind == kind]
        how = f"kind {kind}"
    else:
        matches = [s for s in pool if s.applies_to(path)]
        how = "its location"
    if len(matches) != 1:
        names = [s.name for s in matches] or "none"
        raise SkillError(f"{path}: {len(matches)} skills apply by {how} ({names}), expected 1")
    chosen = matches[0]
    if kind is not None and not chosen.applies_to(path):
        logger.debug("%s: kind %s chosen over skill globs (%s)", path, kind, chosen.name)
    return chosen
