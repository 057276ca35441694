"""Run archive: every artifact of a run, immutable, with a checksummed manifest.

Layout: `<root>/<flow>/<YYYY-MM-DD>/<run-id>/<relpath>` plus `manifest.json` in the run folder;
the root is a local directory or `s3://bucket/prefix` (boto3; `AWS_ENDPOINT_URL` honoured).
Objects a worker archived for the run are adopted into its manifest (:meth:`RunArchive.adopt`).

Rules:
- Objects are immutable. Writing a relpath again with the same bytes is a no-op; with other bytes
  it raises :class:`ArchiveError`. `manifest.json` alone is rewritten, always with a superset.
- Relpaths are validated (no absolute paths, `..`, `.`, backslashes, empty segments) and files
  that look like secrets (`.env*`, `*.pem`, `*.key`, `id_rsa*`, `credentials*`) are refused with
  an :class:`ArchiveError`. Contents are redacted where they are made (patterns and values); here
  text objects lose the secrets Autopilot holds, by value in every form (a last defence).
- S3 calls retry (botocore's standard mode, then our own bounded exponential backoff for dropped
  connections and 5xx). When S3 stays unavailable the run continues in a local spool
  (`<home>/spool/...`) with one warning; :func:`sync_spool` (also tried after the next successful
  run of the same archive) uploads what is missing. Nothing is lost and nothing is duplicated.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import mimetypes
import re
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from tasks.core.errors import ArchiveError, ConfigError
from tasks.core.secrets import redact_known
from tasks.keep.manifest import (
    MANIFEST,
    SECRET_NAME,
    Manifest,
    ManifestEntry,
    segment,
    validate_relpath,
)
from tasks.keep.stores import LocalStore, RetryPolicy, S3Store, StoreUnavailable

log = logging.getLogger(__name__)

SPOOL_MARKER = "spool.json"
T = TypeVar("T")


class SpoolSync(BaseModel):
    """What :func:`sync_spool` did: manifests of the runs uploaded, one line per failed run."""

    synced: list[Manifest] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class RunArchive:
    """The archive folder of one run. Thread-safe; obtain it from :meth:`Archive.run`."""

    def __init__(self, archive: Archive, flow: str, date: dt.date, run_id: str) -> None:
        self._archive = archive
        self.flow, self.run_id = segment(flow, "flow"), segment(run_id, "run id")
        self.date = date.isoformat()
        self._prefix = f"{self.flow}/{self.date}/{self.run_id}"
        self._entries: dict[str, ManifestEntry] = {}
        self._lock = threading.RLock()
        self._loaded = False
        self._offline: str | None = None
        self.spool_fallback = archive.spool_root is not None

    @property
    def uri(self) -> str:
        """Where this run's objects live (a directory path or an s3:// URI)."""
        return self._archive.store.describe(self._prefix)

    @property
    def spool_dir(self) -> Path | None:
        root = self._archive.spool_root
        return None if root is None else root / self._prefix

    @property
    def spooled(self) -> bool:
        """True when the backend was unavailable and objects went to the local spool."""
        return self._offline is not None

    def put_bytes(self, relpath: str, data: bytes) -> ManifestEntry:
        """Archive `data` at `relpath` (a no-op when the same bytes are already there).

        Raises:
            ArchiveError: bad relpath, a secret file name, different bytes already archived
                there, or the backend failed and no spool is available.
        """
        validate_relpath(relpath)
        ctype = mimetypes.guess_type(relpath)[0] or "application/octet-stream"
        entry = ManifestEntry(
            key=relpath, size=len(data), sha256=hashlib.sha256(data).hexdigest(), content_type=ctype
        )
        with self._lock:
            self._load()
            known = self._entries.get(relpath)
        known_sha = self._create(relpath, data, entry) if known is None else known.sha256
        if known_sha is not None and known_sha != entry.sha256:
            raise ArchiveError(f"{self.uri}/{relpath}: already archived with other content")
        with self._lock:
            self._entries.setdefault(relpath, entry)
            if self._offline:
                self._write_marker(finalized=False)
        return entry

    def put_text(self, relpath: str, text: str) -> ManifestEntry:
        """Archive `text` as UTF-8, without the secrets Autopilot holds (by value)."""
        return self.put_bytes(relpath, redact_known(text).encode("utf-8"))

    def put_json(self, relpath: str, obj: Any) -> ManifestEntry:
        """Archive a pydantic model or a JSON-able value as indented JSON (stable key order)."""
        if isinstance(obj, BaseModel):
            text = obj.model_dump_json(indent=2)
        else:
            text = json.dumps(obj, indent=2, sort_keys=True, default=str)
        return self.put_text(relpath, text + "\n")

    def put_file(self, relpath: str, path: Path) -> ManifestEntry:
        """Archive the bytes of a local file."""
        if SECRET_NAME.match(path.name):
            raise ArchiveError(f"{path}: looks like a secret file; refusing to archive it")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ArchiveError(f"{path}: {exc.strerror or exc}") from None
        return self.put_bytes(relpath, data)

    def entries(self) -> list[ManifestEntry]:
        """The objects this process archived (or adopted) for the run."""
        with self._lock:
            return list(self._entries.values())

    def adopt(self, entries: list[ManifestEntry]) -> None:
        """List in the manifest what another process (a worker) archived for the run."""
        with self._lock:
            for entry in entries:
                if self._entries.setdefault(entry.key, entry).sha256 != entry.sha256:
                    raise ArchiveError(f"{self.uri}/{entry.key}: archived with other content")

    def finalize(self) -> Manifest:
        """Write `manifest.json` (merged with any earlier one) and return it.

        When the backend is unavailable the manifest stays in the spool (see :attr:`spooled`)
        and a warning is logged; :func:`sync_spool` finishes the job later.
        """
        with self._lock:
            self._load()
            if not self._offline:
                try:
                    manifest = self._merge_and_write()
                except StoreUnavailable as exc:
                    self._go_offline(str(exc))
                else:
                    self._archive._sync_finalized_spool()
                    return manifest
            self._write_marker(finalized=True)
            return self._manifest(self._entries)

    # -- internals ------------------------------------------------------------------------------

    def _manifest(self, entries: dict[str, ManifestEntry]) -> Manifest:
        objects = [entries[k] for k in sorted(entries)]
        return Manifest(flow=self.flow, date=self.date, run_id=self.run_id, objects=objects)

    def _load(self) -> None:
        """Adopt the entries of an earlier manifest so a re-archive adds no duplicates."""
        if self._loaded or self._offline:
            return
        self._loaded = True
        try:
            earlier = self._read_manifest()
        except StoreUnavailable as exc:
            self._go_offline(str(exc))
            return
        for entry in earlier.objects if earlier else []:
            self._entries.setdefault(entry.key, entry)

    def _read_manifest(self) -> Manifest | None:
        key = f"{self._prefix}/{MANIFEST}"
        raw = self._guard(lambda: self._archive.store.get(key))
        if raw is None:
            return None
        try:
            return Manifest.model_validate_json(raw)
        except ValueError as exc:
            raise ArchiveError(
                f"{self._archive.store.describe(key)}: broken manifest: {str(exc).splitlines()[0]}"
            ) from None

    def _merge_and_write(self) -> Manifest:
        merged = dict(self._entries)
        earlier = self._read_manifest()  # again: another process may have added objects
        for entry in earlier.objects if earlier else []:
            mine = merged.setdefault(entry.key, entry)
            if mine.sha256 != entry.sha256:
                raise ArchiveError(f"{self.uri}/{entry.key}: manifest lists other content")
        manifest = self._manifest(merged)
        data = (manifest.model_dump_json(indent=2) + "\n").encode()
        key = f"{self._prefix}/{MANIFEST}"
        self._guard(lambda: self._archive.store.replace(key, data, "application/json"))
        self._entries = merged
        return manifest

    def _create(self, relpath: str, data: bytes, entry: ManifestEntry) -> str | None:
        if not self._offline:
            key = f"{self._prefix}/{relpath}"
            try:
                return self._guard(
                    lambda: self._archive.store.create(key, data, entry.sha256, entry.content_type)
                )
            except StoreUnavailable as exc:
                self._go_offline(str(exc))
        assert self.spool_dir is not None  # _go_offline raised otherwise
        spool = LocalStore(self.spool_dir / "objects")
        return self._guard(lambda: spool.create(relpath, data, entry.sha256, entry.content_type))

    def keys(self) -> list[str]:
        """The relative paths of every object stored for this run (manifest or not: a killed
        run never wrote its manifest), sorted.

        Raises:
            ArchiveError: the store cannot be read.
        """
        start = len(self._prefix) + 1
        return [k[start:] for k in self._read(lambda: self._archive.store.list(self._prefix))]

    def get_bytes(self, relpath: str) -> bytes | None:
        """The stored bytes at `relpath`, None when absent.

        Raises:
            ArchiveError: the store cannot be read.
        """
        key = f"{self._prefix}/{validate_relpath(relpath)}"
        return self._read(lambda: self._archive.store.get(key))

    def _read(self, fn: Callable[[], T]) -> T:
        try:
            return self._guard(fn)
        except StoreUnavailable as exc:
            raise ArchiveError(str(exc)) from None

    def _remote_sha(self, relpath: str) -> str | None:
        key = f"{self._prefix}/{relpath}"
        return self._guard(lambda: self._archive.store.sha256_of(key))

    def _guard(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except OSError as exc:
            raise ArchiveError(f"{self.uri}: {exc.strerror or exc}") from None

    def _go_offline(self, reason: str) -> None:
        with self._lock:
            if not self.spool_fallback:
                raise ArchiveError(f"{self.uri}: archive unavailable: {reason}")
            if self._offline is None:
                self._offline = reason
                log.warning(
                    "archive %s unavailable (%s); run kept in spool %s until sync_spool()",
                    self.uri,
                    reason,
                    self.spool_dir,
                )
                self._write_marker(finalized=False)

    def _write_marker(self, finalized: bool) -> None:
        spool_dir = self.spool_dir
        assert spool_dir is not None
        marker = {
            "uri": self._archive.uri,
            "finalized": finalized,
            "manifest": self._manifest(self._entries).model_dump(),
        }
        data = json.dumps(marker, indent=2).encode()
        self._guard(lambda: LocalStore(spool_dir).replace(SPOOL_MARKER, data, ""))


class Archive:
    """An archive root: a local directory or `s3://bucket/prefix`. Use :func:`open_archive`."""

    def __init__(self, uri: str, store: LocalStore | S3Store, spool_root: Path | None) -> None:
        self.uri, self.store, self.spool_root = uri, store, spool_root
        self._syncing = threading.Lock()

    def run(self, flow: str, run_id: str, date: dt.date | None = None) -> RunArchive:
        """The folder `<flow>/<YYYY-MM-DD>/<run-id>` (date defaults to today, UTC)."""
        return RunArchive(self, flow, date or dt.datetime.now(dt.UTC).date(), run_id)

    def find_run(self, flow: str, run_id: str) -> RunArchive:
        """The archived run `run_id` of `flow`, whatever day it ran.

        Raises:
            ArchiveError: no such run in this archive, or the store cannot be read.
        """
        flow, run_id = segment(flow, "flow"), segment(run_id, "run id")
        try:
            keys = self.store.list(flow)
        except (StoreUnavailable, OSError) as exc:
            raise ArchiveError(f"{self.uri}: {exc}") from None
        dates = sorted({k.split("/")[1] for k in keys if k.split("/")[2:3] == [run_id]})
        if not dates:
            raise ArchiveError(f"{self.store.describe(flow)}: no archived {flow} run {run_id}")
        return RunArchive(self, flow, dt.date.fromisoformat(dates[-1]), run_id)

    def sync_spool(self, only_finalized: bool = False) -> SpoolSync:
        """Upload every run this archive left in the spool; each run succeeds or fails alone.

        Call it when no run of this archive is in progress: a run still writing to the spool
        would be uploaded half done (it would be completed by the next sync, nothing lost).
        """
        result = SpoolSync()
        markers = sorted(self.spool_root.glob(f"*/*/*/{SPOOL_MARKER}")) if self.spool_root else []
        with self._syncing:
            for marker_path in markers:
                try:
                    manifest = self._sync_run(marker_path.parent, only_finalized)
                except (ArchiveError, OSError, ValueError) as exc:
                    result.errors.append(f"{marker_path.parent}: {str(exc).splitlines()[0]}")
                else:
                    if manifest is not None:
                        result.synced.append(manifest)
        return result

    def _sync_run(self, run_dir: Path, only_finalized: bool) -> Manifest | None:
        marker = json.loads((run_dir / SPOOL_MARKER).read_text(encoding="utf-8"))
        if only_finalized and not marker.get("finalized"):
            return None
        listed = Manifest.model_validate(marker["manifest"])
        run = RunArchive(self, listed.flow, dt.date.fromisoformat(listed.date), listed.run_id)
        run.spool_fallback = False  # a failed sync keeps the spool as it is
        objects = run_dir / "objects"
        files = [p for p in objects.rglob("*") if p.is_file() and not p.name.endswith(".tmp")]
        spooled = {p.relative_to(objects).as_posix(): p for p in files}
        for relpath, path in sorted(spooled.items()):
            run.put_bytes(relpath, path.read_bytes())
        for entry in listed.objects:
            if entry.key not in spooled:  # uploaded before the outage: check it is really there
                if run._remote_sha(entry.key) != entry.sha256:
                    raise ArchiveError(f"{run.uri}/{entry.key}: missing from archive and spool")
                with run._lock:
                    run._entries.setdefault(entry.key, entry)
        with run._lock:
            run._load()
            try:
                manifest = run._merge_and_write()
            except StoreUnavailable as exc:
                raise ArchiveError(f"{run.uri}: archive unavailable: {exc}") from None
        shutil.rmtree(run_dir)
        log.info("synced spooled run %s (%d objects)", run.uri, len(manifest.objects))
        return manifest

    def _sync_finalized_spool(self) -> None:
        """After a successful run, upload earlier runs that finished while S3 was down."""
        if not self.spool_root or not self.spool_root.is_dir() or self._syncing.locked():
            return
        for error in self.sync_spool(only_finalized=True).errors:
            log.warning("spool sync: %s", error)


def _spool_root(home: Path, uri: str) -> Path:
    return home / "spool" / hashlib.sha256(uri.encode()).hexdigest()[:16]


def open_archive(
    uri: str, *, home: Path | None = None, retry: RetryPolicy | None = None
) -> Archive:
    """Open the archive at `uri`: a local directory, `file://...` or `s3://bucket[/prefix]`.

    Args:
        uri: the archive root (Settings.archive_uri by default in the flows).
        home: AUTOPILOT_HOME for the spool (default: from the settings).
        retry: S3 retry and timeout policy.

    Raises:
        ConfigError: an unsupported scheme or an s3:// URI without a bucket.
    """
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[5:].partition("/")
        if not bucket:
            raise ConfigError(f"archive {uri!r}: no bucket")
        prefix = prefix.strip("/")
        canonical = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
        if home is None:
            from tasks.core.config import load_settings

            home = load_settings().home
        store = S3Store(bucket, prefix, retry or RetryPolicy())
        return Archive(canonical, store, _spool_root(home, canonical))
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+://", uri) and not uri.startswith("file://"):
        raise ConfigError(f"archive {uri!r}: use a directory or s3://bucket/prefix")
    root = Path(uri.removeprefix("file://")).expanduser().resolve()
    return Archive(str(root), LocalStore(root), None)


def sync_spool(home: Path | None = None, retry: RetryPolicy | None = None) -> SpoolSync:
    """Upload every spooled run under `<home>/spool` to the archive it was meant for."""
    if home is None:
        from tasks.core.config import load_settings

        home = load_settings().home
    result = SpoolSync()
    uris: set[str] = set()
    for marker in sorted((home / "spool").glob(f"*/*/*/*/{SPOOL_MARKER}")):
        try:
            uris.add(str(json.loads(marker.read_text(encoding="utf-8"))["uri"]))
        except (OSError, ValueError, KeyError) as exc:
            result.errors.append(f"{marker}: unreadable spool marker: {exc}")
    for uri in sorted(uris):
        part = open_archive(uri, home=home, retry=retry).sync_spool()
        result.synced += part.synced
        result.errors += part.errors
    return result
