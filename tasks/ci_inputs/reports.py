"""CI's reports in: local paths, ``file://`` and ``s3://bucket/key`` URIs, fetched into the run.

Each URI names a report or a directory of reports (a local directory, or an S3 prefix ending
in ``/``). Every file is size-bounded (the S3 object's declared size is checked before its body is
read and the download is cut at the bound anyway) and copied into the run's own
directory under a name that cannot escape it. Each failure is one line naming the URI; one
bad URI never loses the others. boto3 honours ``AWS_ENDPOINT_URL`` for S3-compatible servers.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)

#: A report larger than this is refused (JUnit files of very large suites stay well below).
MAX_REPORT_BYTES = 256 * 1024 * 1024
#: At most this many files from one directory or prefix.
MAX_FILES_PER_URI = 500
#: What a directory or prefix contributes: JUnit XML and RSpec/pytest JSON, and plain logs.
REPORT_SUFFIXES = (".xml", ".json", ".log", ".txt")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class FetchedReport(BaseModel):
    """One report now in the run's directory."""

    model_config = ConfigDict(extra="forbid")

    uri: str = Field(description="Where it came from (the URI, or the file inside a directory)")
    path: str = Field(description="The local copy")
    size: int
    sha256: str


class FetchedReports(BaseModel):
    """Everything fetched, and one line per URI (or file) that could not be."""

    model_config = ConfigDict(extra="forbid")

    files: list[FetchedReport] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)

    @property
    def paths(self) -> list[Path]:
        return [Path(f.path) for f in self.files]


class _TooLarge(Exception):
    pass


def fetch_reports(
    uris: list[str],
    dest: Path,
    *,
    max_bytes: int = MAX_REPORT_BYTES,
    s3_client: Any | None = None,
) -> FetchedReports:
    """Fetch every report `uris` name into `dest` (created); never raises for a bad URI.

    Args:
        uris: local paths, ``file://`` URIs, ``s3://bucket/key`` or ``s3://bucket/prefix/``.
        dest: the run's directory for them.
        max_bytes: the largest report accepted.
        s3_client: a boto3 S3 client (default: one from the environment, made when needed).
    """
    dest.mkdir(parents=True, exist_ok=True)
    out = FetchedReports()
    client = s3_client
    for uri in uris:
        try:
            if uri.startswith("s3://"):
                client = client or _s3_client()
                _fetch_s3(uri, dest, max_bytes, client, out)
            else:
                _fetch_local(uri, dest, max_bytes, out)
        except Exception as exc:  # one URI's failure never loses the others
            out.errors.append(f"{uri}: {_why(exc)}")
    for error in out.errors:
        log.warning("report not fetched: %s", error)
    return out


def _s3_client() -> Any:
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 4, "mode": "standard"}, connect_timeout=10)
    return boto3.session.Session().client("s3", config=config)


def _target(dest: Path, uri: str, name: str) -> Path:
    """A unique, safe file name in `dest` for `uri` (its last segment kept readable)."""
    stem = _SAFE.sub("_", name)[-80:].strip("._") or "report"
    digest = hashlib.sha256(uri.encode()).hexdigest()[:10]
    return dest / f"{digest}-{stem}"


def _fetch_local(uri: str, dest: Path, max_bytes: int, out: FetchedReports) -> None:
    path = Path(unquote(urlparse(uri).path)) if uri.startswith("file://") else Path(uri)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in REPORT_SUFFIXES)
        if not files:
            raise ValueError("no report files (.xml, .json, .log, .txt) in this directory")
        for file in files[:MAX_FILES_PER_URI]:
            _copy_one(f"{uri.rstrip('/')}/{file.relative_to(path)}", file, dest, max_bytes, out)
        if len(files) > MAX_FILES_PER_URI:
            out.errors.append(f"{uri}: only the first {MAX_FILES_PER_URI} of {len(files)} files")
        return
    if not path.exists():
        raise FileNotFoundError("no such file")
    if not path.is_file():
        raise ValueError("not a regular file")
    _copy_one(uri, path, dest, max_bytes, out)


def _copy_one(uri: str, path: Path, dest: Path, max_bytes: int, out: FetchedReports) -> None:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise _TooLarge(f"{size} bytes, over the {max_bytes}-byte limit")
        target = _target(dest, uri, path.name)
        digest = hashlib.sha256()
        with path.open("rb") as src, target.open("wb") as dst:
            copied = 0
            while chunk := src.read(1024 * 1024):
                copied += len(chunk)
                if copied > max_bytes:  # grew while we read it
                    raise _TooLarge(f"over the {max_bytes}-byte limit")
                digest.update(chunk)
                dst.write(chunk)
    except Exception as exc:
        out.errors.append(f"{uri}: {_why(exc)}")
        return
    out.files.append(
        FetchedReport(uri=uri, path=str(target), size=copied, sha256=digest.hexdigest())
    )


def split_s3(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> (bucket, key)."""
    parsed = urlparse(uri)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    if not bucket:
        raise ValueError("no bucket in the URI")
    return bucket, key


def _fetch_s3(uri: str, dest: Path, max_bytes: int, client: Any, out: FetchedReports) -> None:
    bucket, key = split_s3(uri)
    if key == "" or key.endswith("/"):
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
        keys = [
            obj["Key"]
            for page in pages
            for obj in page.get("Contents", [])
            if obj["Key"].endswith(REPORT_SUFFIXES)
        ]
        if not keys:
            raise ValueError("no report objects under this prefix")
        for one in keys[:MAX_FILES_PER_URI]:
            _get_object(f"s3://{bucket}/{one}", bucket, one, dest, max_bytes, client, out)
        if len(keys) > MAX_FILES_PER_URI:
            out.errors.append(f"{uri}: only the first {MAX_FILES_PER_URI} of {len(keys)} objects")
        return
    _get_object(uri, bucket, key, dest, max_bytes, client, out)


def _get_object(
    uri: str, bucket: str, key: str, dest: Path, max_bytes: int, client: Any, out: FetchedReports
) -> None:
    target = _target(dest, uri, key.rsplit("/", 1)[-1])
    try:
        # GET, not HEAD: a HEAD answer has no body, so no error code (bucket or key?).
        answer = client.get_object(Bucket=bucket, Key=key)
        body = answer["Body"]
        if int(answer.get("ContentLength", 0)) > max_bytes:
            body.close()
            raise _TooLarge(f"{answer['ContentLength']} bytes, over the {max_bytes}-byte limit")
        digest = hashlib.sha256()
        copied = 0
        with target.open("wb") as dst:
            while chunk := body.read(1024 * 1024):
                copied += len(chunk)
                if copied > max_bytes:
                    raise _TooLarge(f"over the {max_bytes}-byte limit")
                digest.update(chunk)
                dst.write(chunk)
    except Exception as exc:
        target.unlink(missing_ok=True)
        out.errors.append(f"{uri}: {_why(exc)}")
        return
    out.files.append(
        FetchedReport(uri=uri, path=str(target), size=copied, sha256=digest.hexdigest())
    )


def _why(exc: BaseException) -> str:
    """One line: S3's error code, the OS's words, or the exception's first line."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        code = error.get("Code") or response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        words = {
            "404": "no such object",
            "NoSuchKey": "no such object",
            "NoSuchBucket": "no such bucket",
            "403": "access denied",
            "AccessDenied": "access denied",
        }
        return words.get(str(code), f"S3 error {code}: {error.get('Message', '')}".strip())
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower() if isinstance(exc, FileNotFoundError) else exc.strerror
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def cleanup(dest: Path) -> None:
    """Remove the fetched copies (best effort)."""
    shutil.rmtree(dest, ignore_errors=True)


def local_reports(reports: list[str], dest: Path) -> tuple[list[str], list[str]]:
    """Local report paths as they are, ``s3://`` ones fetched into `dest`; one line per
    report that could not be fetched."""
    uris = [r for r in reports if r.startswith("s3://")]
    local = [r for r in reports if not r.startswith("s3://")]
    if not uris:
        return local, []
    fetched = fetch_reports(uris, dest)
    return local + [str(p) for p in fetched.paths], list(fetched.errors)
