"""Which files of a Rails or plain Ruby project are sources (of which kind), specs and support,
and where a new spec goes (the contract; tests/tasks/toolchains/test_mapping.py exercises each
rule).

``*.rb`` under ``app/`` and ``lib/`` are sources, and so are those of any other top-level
folder that holds Ruby code (``extras/``, ``engines/``...) except the ones Rails and RSpec
own (config/, db/, spec/, test/, features/, bin/, script/, public/, vendor/, tmp/, log/,
coverage/, storage/, node_modules/, doc/). Kind by location: ``app/models`` model,
``app/serializers`` serializer, ``app/controllers`` controller, ``app/mailers`` mailer,
``app/helpers`` helper; the rest of ``app/`` (services, jobs, ...) and ``lib/`` plain ruby.
``app/*/concerns/`` are modules mixed into others, so they are plain ruby too.
Skipped: ``app/assets``, ``app/views``, ``app/javascript``, ``app/channels/application_cable``,
every ``application_*.rb`` under ``app/`` (framework base classes: testing them means testing
Rails), ``lib/**/templates/`` (generator templates), and everything outside app/ and lib/
(config/, db/, bin/, spec/, test/, vendor/).
Specs: ``app/<dir>/x.rb`` -> ``spec/<dir>/x_spec.rb``; ``<folder>/x.rb`` ->
``spec/<folder>/x_spec.rb``; ``lib/x/y.rb`` ->
``spec/lib/x/y_spec.rb`` (``spec/x/y_spec.rb``, the gem layout, also counts); a controller
``app/controllers/admin/users_controller.rb`` -> ``spec/requests/admin/users_spec.rb``, with
``spec/requests/admin/users_controller_spec.rb``,
``spec/controllers/admin/users_controller_spec.rb`` and the flattened
``spec/requests/admin_users_spec.rb`` also counting. Every ``*_spec.rb`` below
the spec's stem directory (``spec/models/user/**/*_spec.rb``) belongs to the source too.
A file under spec/ that holds examples but lacks the ``_spec.rb`` suffix is never loaded by
RSpec (unless ``.rspec`` sets ``--pattern``): the mapping warns about it.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from tasks.toolchains.files import FileRules, SpecPlan

#: The kinds of Ruby sources, each with one skill: Rails' five and plain Ruby.
KINDS = ("model", "serializer", "controller", "mailer", "helper", "ruby")
#: app/<dir> -> kind; the other app/ directories hold plain Ruby.
_RAILS_KINDS: dict[str, str] = {
    "models": "model",
    "serializers": "serializer",
    "controllers": "controller",
    "mailers": "mailer",
    "helpers": "helper",
}
_RAILS_SKIP = ("app/assets/", "app/views/", "app/javascript/", "app/channels/application_cable/")
#: Top-level folders whose Ruby files are not sources (Rails', RSpec's and tooling's own).
_RUBY_NOT_SOURCE = frozenset(
    {"config", "db", "spec", "test", "features", "bin", "script", "public", "vendor", "tmp"}
    | {"log", "coverage", "storage", "node_modules", "doc", "docs", "sig"}
)
#: spec/ folders of support, not examples: factories, helpers, shared examples.
_SUPPORT_DIRS = frozenset(
    {"support", "factories", "fixtures", "shared_examples", "shared_contexts"}
)
_SHARED_PREFIXES = ("spec/factories/", "spec/support/")
_DEFINES_EXAMPLES = re.compile(r"^\s*(?:RSpec\.)?(?:describe|context|feature)\b", re.MULTILINE)


class RubyFileRules(FileRules):
    """RSpec's files in a Ruby project: ``spec/**/*_spec.rb``, support under spec/."""

    def __init__(self, repo: Path) -> None:
        super().__init__(repo)
        self.test_roots = ["spec"]

    def is_test_file(self, path: str) -> bool:
        return path.startswith("spec/") and path.endswith("_spec.rb")

    def is_support_file(self, path: str) -> bool:
        return path.startswith(_SHARED_PREFIXES)

    def sources(self, files: list[str]) -> list[tuple[str, str]]:
        return sorted((f, k) for f in files if (k := source_kind(f)) is not None)

    def plan(self, source: str) -> SpecPlan:
        return spec_plan(source)

    def warnings(self, files: list[str], specs: list[str]) -> list[str]:
        """Files under spec/ that hold examples RSpec never loads (no ``_spec.rb`` suffix),
        unless ``.rspec`` sets its own ``--pattern``."""
        if _rspec_pattern_set(self.repo):
            return []
        taken = set(specs)
        warnings: list[str] = []
        for path in files:
            parts = PurePosixPath(path).parts
            in_tree = (
                parts[0] == "spec" and len(parts) > 1 and not _SUPPORT_DIRS.intersection(parts)
            )
            if path in taken or not in_tree or not path.endswith(".rb"):
                continue
            if _matches(self.repo, path, _DEFINES_EXAMPLES):
                fix = path.removesuffix(".rb") + "_spec.rb"
                warnings.append(
                    f"{path}: holds examples but RSpec only loads files ending in _spec.rb "
                    f"(rename it {fix})"
                )
        return warnings


def source_kind(path: str) -> str | None:
    """The kind of a Ruby source at `path`, or None when it is not a source."""
    parts = PurePosixPath(path).parts
    if not path.endswith(".rb") or len(parts) < 2 or parts[0] in _RUBY_NOT_SOURCE:
        return None
    if parts[0].startswith(".") or path.endswith("_spec.rb"):
        return None
    if parts[0] != "app":
        return None if "templates" in parts else "ruby"
    if path.startswith(_RAILS_SKIP) or parts[-1].startswith("application_") or len(parts) < 3:
        return None
    if "concerns" in parts:
        return "ruby"
    return _RAILS_KINDS.get(parts[1], "ruby")


def spec_plan(source: str) -> SpecPlan:
    """Where the specs of `source` may be (see the module docstring), and the new spec's path."""
    parts = PurePosixPath(source).with_suffix("").parts
    if parts[0] != "app":
        stems = ["spec/" + "/".join(parts), "spec/" + "/".join(parts[1:])]
    elif parts[1] == "controllers" and "concerns" not in parts:
        rest = "/".join(parts[2:])
        short = rest.removesuffix("_controller")
        stems = [f"spec/requests/{short}", f"spec/requests/{rest}", f"spec/controllers/{rest}"]
        if "/" in short:  # a namespace flattened into the name: spec/requests/admin_users_spec.rb
            stems.append(f"spec/requests/{short.replace('/', '_')}")
    else:
        stems = ["spec/" + "/".join(parts[1:])]
    plan = SpecPlan(source=source, expected=f"{stems[0]}_spec.rb")
    for stem in stems:
        plan.exact.setdefault(f"{stem}_spec.rb", (1, 0, 1))
        plan.dirs.setdefault(f"{stem}/", (0, 0, 1))
    return plan


def _rspec_pattern_set(repo: Path) -> bool:
    try:
        return "--pattern" in (repo / ".rspec").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _matches(repo: Path, path: str, pattern: re.Pattern[str]) -> bool:
    try:
        text = (repo / path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return pattern.search(text) is not None
