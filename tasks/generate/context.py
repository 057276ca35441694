"""The prompt context of one target: source, docs, existing specs, support files, the code it
uses (see :mod:`tasks.toolchains.context_refs`), versions.

Every repository file goes through :func:`tasks.core.secrets.read_for_prompt` (secret files refused,
values redacted); a file that cannot be read is left out with a debug line, never an error, so
one odd file never stops a target. Sizes are bounded so a large monolith cannot blow the prompt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
from pathlib import Path

from pydantic import BaseModel, Field

from tasks.core.errors import BadInputError
from tasks.core.secrets import read_for_prompt
from tasks.core.types import SourceKind
from tasks.generate.targets import Target
from tasks.toolchains.context_refs import python_imported_files, ruby_referenced_files, underscore

log = logging.getLogger(__name__)

#: Per-file and total budgets for the context files (bytes of text).
MAX_FILE_BYTES = 40_000
MAX_CONTEXT_BYTES = 120_000
#: Gems whose versions decide which APIs a spec may use.
_GEMS = (
    "rails",
    "activerecord",
    "rspec-core",
    "rspec-rails",
    "factory_bot",
    "factory_bot_rails",
    "rubocop",
    "simplecov",
    "shoulda-matchers",
)
_LOCK_SPEC = re.compile(r"^ {4}(?P<name>[A-Za-z0-9_.-]+) \((?P<version>[^)]+)\)$")
_CONSTANT = re.compile(r"\b([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)*)\b")


class FileText(BaseModel):
    """A repository file as the prompt shows it."""

    path: str
    text: str


class PromptContext(BaseModel):
    """Everything the generate and fix prompts say about one target besides the skill."""

    language: str
    source: str
    docs: str = ""
    existing_specs: list[FileText] = Field(default_factory=list)
    context_files: list[FileText] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=dict)

    def digest(self) -> str:
        """sha256 of the whole context: part of the nightly's cache key."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()

    def variables(self) -> dict[str, object]:
        """The prompt variables this context provides (see prompts/README.md)."""
        return {
            "language": self.language,
            "source": self.source,
            "existing_specs": [f.model_dump() for f in self.existing_specs],
            "context_files": [f.model_dump() for f in self.context_files],
            "versions": dict(self.versions),
        }


def _read(project: Path, rel: str, max_bytes: int = MAX_FILE_BYTES) -> str | None:
    try:
        return read_for_prompt(project, rel, max_bytes)
    except BadInputError as exc:
        log.debug("context: %s left out: %s", rel, exc)
        return None


def _factory_files(project: Path) -> list[str]:
    root = project / "spec" / "factories"
    if not root.is_dir():
        return []
    return sorted(p.relative_to(project).as_posix() for p in root.rglob("*.rb") if p.is_file())


def _referenced(factory: str, source_text: str, source: str) -> bool:
    """Whether the factory file probably serves the source: it names a constant the source uses
    (``Customer`` -> customers.rb) or the source file itself (a model's own factory)."""
    stem = Path(factory).stem
    names = {underscore(c) for c in _CONSTANT.findall(source_text)}
    names.add(Path(source).stem)
    return any(stem in (n, n + "s", n + "es") or stem.rstrip("s") == n for n in names)


def _ruby_context_paths(project: Path, target: Target, source_text: str) -> list[str]:
    paths = ["spec/rails_helper.rb", "spec/spec_helper.rb", ".rubocop.yml"]
    support = project / "spec" / "support"
    if support.is_dir():
        paths += sorted(p.relative_to(project).as_posix() for p in support.rglob("*.rb"))
    factories = _factory_files(project)
    # The factories the source needs come first; the others follow while the budget lasts, so a
    # model can reuse them instead of writing duplicates.
    needed = [f for f in factories if _referenced(f, source_text, target.source)]
    paths += needed
    # The code around the source (routes, templates, the classes it names), then the schema,
    # then the other factories while the budget lasts.
    paths += ruby_referenced_files(project, target.source, source_text, target.kind)
    if target.kind in (SourceKind.MODEL, SourceKind.SERIALIZER, SourceKind.CONTROLLER):
        paths.append("db/schema.rb")
    return paths + [f for f in factories if f not in needed]


def _python_context_paths(project: Path, target: Target, source_text: str) -> list[str]:
    paths = ["tests/conftest.py", "pyproject.toml", "setup.cfg", "pytest.ini"]
    paths += sorted(
        p.relative_to(project).as_posix()
        for p in (project / "tests").glob("**/conftest.py")
        if p.relative_to(project).as_posix() != "tests/conftest.py"
    )
    return paths + python_imported_files(project, target.source, source_text)


def gem_versions(project: Path) -> dict[str, str]:
    """Ruby and the relevant gems' versions from Gemfile.lock (and .ruby-version)."""
    versions: dict[str, str] = {}
    ruby_version = project / ".ruby-version"
    if ruby_version.is_file():
        versions["ruby"] = ruby_version.read_text(encoding="utf-8", errors="replace").strip()
    lock = _read(project, "Gemfile.lock", 400_000)
    if lock is None:
        return versions
    section = ""
    for line in lock.splitlines():
        if line and not line.startswith(" "):
            section = line.strip()
            continue
        if section == "RUBY VERSION" and line.strip().startswith("ruby "):
            versions.setdefault("ruby", line.strip().removeprefix("ruby ").strip())
        match = _LOCK_SPEC.match(line)
        if section in ("GEM", "PATH", "GIT") and match and match.group("name") in _GEMS:
            versions[match.group("name")] = match.group("version")
    return versions


def python_versions(project: Path) -> dict[str, str]:
    """The interpreter the tests run with (this one) and the project's declared requirement."""
    versions = {"python": ".".join(str(v) for v in sys.version_info[:3])}
    pyproject = _read(project, "pyproject.toml")
    if pyproject:
        match = re.search(r'^requires-python\s*=\s*"([^"]+)"', pyproject, re.MULTILINE)
        if match:
            versions["requires-python"] = match.group(1)
    try:
        from importlib.metadata import version

        versions["pytest"] = version("pytest")
    except Exception:  # a missing distribution only drops one line
        pass
    return versions


def _docs(project: Path, source: str) -> str:
    """A doc file named after the source (``docs/<stem>.md``, ``doc/<stem>.md``), if any."""
    stem = Path(source).stem
    for folder in ("docs", "doc"):
        for suffix in (".md", ".rst", ".txt"):
            rel = f"{folder}/{stem}{suffix}"
            if (project / rel).is_file():
                text = _read(project, rel)
                if text:
                    return text
    return ""


def build_context(project: Path, target: Target, language: str) -> PromptContext:
    """Gather the prompt context of `target` from the project (a worktree).

    Args:
        project: the project root (where the toolchain runs).
        target: the target file.
        language: "ruby" or "python".

    Raises:
        BadInputError: the source itself cannot be read (a secret-looking name, outside the
            repository, unreadable).
    """
    source_text = read_for_prompt(project, target.source, MAX_FILE_BYTES * 2)
    specs = [
        FileText(path=s, text=text) for s in target.specs if (text := _read(project, s)) is not None
    ]
    if language == "ruby":
        paths = _ruby_context_paths(project, target, source_text)
        versions = gem_versions(project)
    else:
        paths = _python_context_paths(project, target, source_text)
        versions = python_versions(project)
    files: list[FileText] = []
    used = 0
    for rel in dict.fromkeys(paths):
        if rel in target.specs or not (project / rel).is_file():
            continue
        text = _read(project, rel)
        if not text or not text.strip():  # unreadable, or empty (a bare __init__.py)
            continue
        if used + len(text) > MAX_CONTEXT_BYTES:
            log.debug("context of %s: budget reached, %s left out", target.source, rel)
            continue
        used += len(text)
        files.append(FileText(path=rel, text=text))
    return PromptContext(
        language=language,
        source=source_text,
        docs=_docs(project, target.source),
        existing_specs=specs,
        context_files=files,
        versions=versions,
    )


def context_summary(context: PromptContext) -> str:
    """A JSON line naming what went into a context (for logs and the archive)."""
    return json.dumps(
        {
            "specs": [f.path for f in context.existing_specs],
            "context_files": [f.path for f in context.context_files],
            "versions": context.versions,
        }
    )
