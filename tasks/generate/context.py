"""The prompt context of one target: source, docs, existing specs, the support files and the code
it uses (which ones, the toolchain says: :meth:`~tasks.toolchains.base.Toolchain.context_paths`),
versions.

Every repository file goes through :func:`tasks.core.secrets.read_for_prompt` (secret files
refused, values redacted); a file that cannot be read is left out with a debug line, never an
error, so one odd file never stops a target. Sizes are bounded so a large monolith cannot blow the
prompt.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from pydantic import BaseModel, Field

from tasks.core.secrets import read_for_prompt, read_if_allowed
from tasks.generate.targets import Target
from tasks.toolchains.base import Toolchain

log = logging.getLogger(__name__)

#: Per-file and total budgets for the context files (bytes of text).
MAX_FILE_BYTES = 40_000
MAX_CONTEXT_BYTES = 120_000


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


def _docs(project: Path, source: str) -> str:
    """A doc file named after the source (``docs/<stem>.md``, ``doc/<stem>.md``), if any."""
    stem = Path(source).stem
    for folder in ("docs", "doc"):
        for suffix in (".md", ".rst", ".txt"):
            rel = f"{folder}/{stem}{suffix}"
            if (project / rel).is_file():
                text = read_if_allowed(project, rel, MAX_FILE_BYTES)
                if text:
                    return text
    return ""


def build_context(project: Path, target: Target, chain: Toolchain) -> PromptContext:
    """Gather the prompt context of `target` from the project (a worktree): the files the
    toolchain names (helpers, factories or fixtures, the code the source uses), within budget.

    Args:
        project: the project root (where the toolchain runs).
        target: the target file.
        chain: the project's toolchain.

    Raises:
        BadInputError: the source itself cannot be read (a secret-looking name, outside the
            repository, unreadable).
    """
    source_text = read_for_prompt(project, target.source, MAX_FILE_BYTES * 2)
    specs = [
        FileText(path=s, text=text)
        for s in target.specs
        if (text := read_if_allowed(project, s, MAX_FILE_BYTES)) is not None
    ]
    paths = chain.context_paths(project, target.source, target.kind, source_text)
    files: list[FileText] = []
    used = 0
    for rel in dict.fromkeys(paths):
        if rel in target.specs or not (project / rel).is_file():
            continue
        text = read_if_allowed(project, rel, MAX_FILE_BYTES)
        if not text or not text.strip():  # unreadable, or empty (a bare __init__.py)
            continue
        if used + len(text) > MAX_CONTEXT_BYTES:
            log.debug("context of %s: budget reached, %s left out", target.source, rel)
            continue
        used += len(text)
        files.append(FileText(path=rel, text=text))
    return PromptContext(
        language=chain.language,
        source=source_text,
        docs=_docs(project, target.source),
        existing_specs=specs,
        context_files=files,
        versions=chain.versions(project),
    )
