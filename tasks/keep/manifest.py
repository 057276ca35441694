"""The archive's manifest and its object names: what a run's folder lists (every object with its
size and sha256), and which relative paths may name an object (never absolute, ``..``, a
backslash, the manifest itself, or a file that looks like a secret)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from tasks.core.errors import ArchiveError

MANIFEST = "manifest.json"
SECRET_NAME = re.compile(r"^(\.env.*|.*\.pem|.*\.key|id_rsa.*|credentials.*)$", re.IGNORECASE)
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MAX_RELPATH = 1024


class ManifestEntry(BaseModel):
    """One archived object, relative to the run folder."""

    model_config = ConfigDict(frozen=True)

    key: str
    size: int = Field(ge=0)
    sha256: str
    content_type: str = "application/octet-stream"


class Manifest(BaseModel):
    """`manifest.json`: every object of one run, sorted by key."""

    version: int = 1
    flow: str
    date: str
    run_id: str
    objects: list[ManifestEntry] = Field(default_factory=list)


def validate_relpath(relpath: str) -> str:
    """Return `relpath` if it is a safe relative object path, else raise ArchiveError."""
    reason = None
    if not relpath or len(relpath) > _MAX_RELPATH:
        reason = "empty or too long"
    elif "\\" in relpath or "\x00" in relpath:
        reason = "backslash or NUL byte"
    elif relpath.startswith("/"):
        reason = "absolute path"
    elif any(seg in ("", ".", "..") for seg in relpath.split("/")):
        reason = "empty, '.' or '..' segment"
    elif relpath == MANIFEST:
        reason = "reserved name"
    elif SECRET_NAME.match(relpath.rsplit("/", 1)[-1]):
        reason = "looks like a secret file; refusing to archive it"
    if reason:
        raise ArchiveError(f"{relpath!r}: {reason}")
    return relpath


def segment(value: str, what: str) -> str:
    """`value` when it is a safe path segment (a flow, date or run id), else ArchiveError."""
    if not _SEGMENT.match(value) or value in (".", ".."):
        raise ArchiveError(f"{what} {value!r}: use letters, digits, '.', '_' and '-' only")
    return value
