"""The prompt context of a Ruby source: the spec helpers, the factories it needs (and the
others), the code it names, the schema; and the versions that decide which APIs a spec may use.

A test can only be right about the code around its target if the model sees it: the classes a
Rails file names (its superclass with the authentication filter, the serializer a controller
renders, the service a model calls), the routes of a controller, the templates of a mailer.
Found by names, never by running anything: constants are mapped to files with the Rails naming
rule (``OrderSerializer`` -> ``order_serializer.rb`` under ``app/`` or ``lib/``).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path, PurePosixPath

from tasks.core.secrets import read_if_allowed

log = logging.getLogger(__name__)

#: At most this many referenced files per source (the context budget bounds their size).
MAX_REFERENCED = 12
_CONSTANT = re.compile(r"\b[A-Z][A-Za-z0-9]*\b")
#: A CamelCase constant a source uses (its factory is named after it).
_CAMEL = re.compile(r"\b([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)*)\b")
_RUBY_ROOTS = ("app", "lib")
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


def context_paths(project: Path, source: str, kind: str, source_text: str) -> list[str]:
    """The helpers, the factories the source needs, the code it names, the schema, then the
    other factories (the budget decides how many are shown)."""
    paths = ["spec/rails_helper.rb", "spec/spec_helper.rb", ".rubocop.yml"]
    support = project / "spec" / "support"
    if support.is_dir():
        paths += sorted(p.relative_to(project).as_posix() for p in support.rglob("*.rb"))
    factories = _factory_files(project)
    # The factories the source needs come first; the others follow while the budget lasts, so a
    # model can reuse them instead of writing duplicates.
    needed = [f for f in factories if _referenced(f, source_text, source)]
    paths += needed
    # The code around the source (routes, templates, the classes it names), then the schema,
    # then the other factories while the budget lasts.
    paths += referenced_files(project, source, source_text, kind)
    if kind in ("model", "serializer", "controller"):
        paths.append("db/schema.rb")
    return paths + [f for f in factories if f not in needed]


def gem_versions(project: Path) -> dict[str, str]:
    """Ruby and the relevant gems' versions from Gemfile.lock (and .ruby-version)."""
    versions: dict[str, str] = {}
    ruby_version = project / ".ruby-version"
    if ruby_version.is_file():
        versions["ruby"] = ruby_version.read_text(encoding="utf-8", errors="replace").strip()
    lock = read_if_allowed(project, "Gemfile.lock", 400_000)
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


def underscore(name: str) -> str:
    """Rails' ``underscore`` of a constant: ``OrderSerializer`` -> ``order_serializer``."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _factory_files(project: Path) -> list[str]:
    root = project / "spec" / "factories"
    if not root.is_dir():
        return []
    return sorted(p.relative_to(project).as_posix() for p in root.rglob("*.rb") if p.is_file())


def _referenced(factory: str, source_text: str, source: str) -> bool:
    """Whether the factory file probably serves the source: it names a constant the source uses
    (``Customer`` -> customers.rb) or the source file itself (a model's own factory)."""
    stem = Path(factory).stem
    names = {underscore(c) for c in _CAMEL.findall(source_text)}
    names.add(Path(source).stem)
    return any(stem in (n, n + "s", n + "es") or stem.rstrip("s") == n for n in names)


def _ruby_index(project: Path) -> dict[str, list[str]]:
    """Every ``.rb`` file under app/ and lib/, by file stem."""
    index: dict[str, list[str]] = {}
    for root in _RUBY_ROOTS:
        base = project / root
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.rb")):
            if path.is_file():
                index.setdefault(path.stem, []).append(path.relative_to(project).as_posix())
    return index


def referenced_files(project: Path, source: str, source_text: str, kind: str) -> list[str]:
    """Files a Ruby source needs to be understood, most useful first.

    Routes for a controller and templates for a mailer, then the files of the constants the
    source names, in the order it names them.
    """
    found: list[str] = []
    if kind == "controller" and (project / "config/routes.rb").is_file():
        found.append("config/routes.rb")
    if kind == "mailer":
        views = project / "app/views" / PurePosixPath(source).stem
        if views.is_dir():
            found += sorted(
                p.relative_to(project).as_posix() for p in views.rglob("*") if p.is_file()
            )
    index = _ruby_index(project)
    for constant in dict.fromkeys(_CONSTANT.findall(source_text)):
        for rel in index.get(underscore(constant), [])[:3]:
            if rel != source and rel not in found:
                found.append(rel)
    return found[:MAX_REFERENCED]
