"""Archive storage backends: a local directory and S3 (boto3), both create-only.

`create` never overwrites: it returns the existing object's sha256 when the key exists, so the
archive can tell "same content, nothing to do" from "different content, refuse".
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)
T = TypeVar("T")


class RetryPolicy(BaseModel):
    """How hard to try S3 before spooling. Tests use tiny values for a fast failure."""

    model_config = ConfigDict(frozen=True)

    attempts: int = Field(4, ge=1, description="Our own attempts around each S3 call")
    base_delay_s: float = Field(0.5, ge=0, description="First backoff; doubles each attempt")
    max_delay_s: float = Field(8.0, ge=0)
    botocore_attempts: int = Field(3, ge=1, description="botocore 'standard' mode max_attempts")
    connect_timeout_s: float = Field(5.0, gt=0)
    read_timeout_s: float = Field(60.0, gt=0)


class StoreUnavailable(Exception):
    """The backend cannot be reached (after retries); the message is one line."""


class LocalStore:
    """Objects as files under `root`; creation is atomic and never overwrites (hard link)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def describe(self, key: str) -> str:
        return str(self.root / key)

    def sha256_of(self, key: str) -> str | None:
        data = self.get(key)
        return None if data is None else hashlib.sha256(data).hexdigest()

    def create(self, key: str, data: bytes, sha256: str, content_type: str) -> str | None:
        """Write `key` unless it exists; return the existing object's sha256 if it did."""
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        try:
            # link() fails when the target exists, so a concurrent writer can never be clobbered.
            path.hardlink_to(tmp)
            return None
        except FileExistsError:
            return self.sha256_of(key)
        finally:
            tmp.unlink(missing_ok=True)

    def get(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            return None

    def list(self, prefix: str) -> list[str]:
        """Every key under `prefix` (a folder), sorted; temporary files excluded."""
        base = self.root / prefix
        if not base.is_dir():
            return []
        return sorted(
            p.relative_to(self.root).as_posix()
            for p in base.rglob("*")
            if p.is_file() and not p.name.endswith(".tmp")
        )

    def replace(self, key: str, data: bytes, content_type: str) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)


class S3Store:
    """Objects in `s3://bucket/prefix`; sha256 kept in the object's metadata."""

    def __init__(self, bucket: str, prefix: str, retry: RetryPolicy) -> None:
        import boto3
        from botocore.config import Config

        self.bucket, self.prefix, self.retry = bucket, prefix, retry
        config = Config(
            retries={"max_attempts": retry.botocore_attempts, "mode": "standard"},
            connect_timeout=retry.connect_timeout_s,
            read_timeout=retry.read_timeout_s,
        )
        # The endpoint comes from AWS_ENDPOINT_URL(_S3) when set: botocore reads it natively.
        self.client = boto3.session.Session().client("s3", config=config)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def describe(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def _call(
        self, verb: str, key: str, fn: Callable[[], T], absent: tuple[int, ...] = ()
    ) -> T | None:
        """`fn()` with bounded retries; None when S3 answers with one of the `absent` statuses.

        Raises:
            StoreUnavailable: connection failures or 5xx after all attempts, or any other error
                answer (403, missing bucket): the caller spools rather than loses the object.
        """
        from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, HTTPClientError

        what, delay = f"{verb} {self.describe(key)}", self.retry.base_delay_s
        for attempt in range(1, self.retry.attempts + 1):
            try:
                return fn()
            except ClientError as exc:
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
                code = exc.response.get("Error", {}).get("Code", "") or str(status)
                if status in absent:
                    return None
                if status < 500 and "Throttl" not in code and code != "SlowDown":
                    raise StoreUnavailable(f"{what}: {code}") from None
                reason = code
            except (ConnectionError, HTTPClientError) as exc:  # dropped, refused, timed out
                reason = str(exc).splitlines()[0]
            except BotoCoreError as exc:  # credentials, configuration: retrying will not help
                raise StoreUnavailable(f"{what}: {str(exc).splitlines()[0]}") from None
            if attempt < self.retry.attempts:
                log.debug("%s failed (%s); retry %d in %.2f s", what, reason, attempt, delay)
                time.sleep(delay)
                delay = min(delay * 2, self.retry.max_delay_s)
        raise StoreUnavailable(f"{what}: {reason} after {self.retry.attempts} attempts")

    def sha256_of(self, key: str) -> str | None:
        k = self._key(key)
        head = self._call(
            "HEAD", key, lambda: self.client.head_object(Bucket=self.bucket, Key=k), (404,)
        )
        if head is None:
            return None
        sha = head.get("Metadata", {}).get("sha256")
        if sha:
            return str(sha)
        data = self.get(key)  # written by someone else: hash the bytes
        return None if data is None else hashlib.sha256(data).hexdigest()

    def create(self, key: str, data: bytes, sha256: str, content_type: str) -> str | None:
        """Upload `key` unless it exists; return the existing object's sha256 if it did."""
        existing = self.sha256_of(key)
        if existing is not None:
            return existing
        k = self._key(key)
        # If-None-Match makes a racing second writer fail (412) instead of overwriting.
        done = self._call(
            "PUT",
            key,
            lambda: self.client.put_object(
                Bucket=self.bucket,
                Key=k,
                Body=data,
                ContentType=content_type,
                Metadata={"sha256": sha256},
                IfNoneMatch="*",
            ),
            (409, 412),
        )
        return self.sha256_of(key) if done is None else None

    def get(self, key: str) -> bytes | None:
        k = self._key(key)
        obj = self._call(
            "GET", key, lambda: self.client.get_object(Bucket=self.bucket, Key=k), (404,)
        )
        return None if obj is None else bytes(obj["Body"].read())

    def list(self, prefix: str) -> list[str]:
        """Every key under `prefix` (a folder), sorted, relative to the store's prefix."""
        start = self._key(prefix.rstrip("/") + "/")
        keys: list[str] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": start}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call(
                "LIST", prefix, functools.partial(self.client.list_objects_v2, **kwargs)
            )
            assert page is not None  # no status is treated as absent
            strip = len(self.prefix) + 1 if self.prefix else 0
            keys.extend(str(o["Key"])[strip:] for o in page.get("Contents", []))
            token = page.get("NextContinuationToken")
            if not token:
                return sorted(keys)

    def replace(self, key: str, data: bytes, content_type: str) -> None:
        k = self._key(key)
        self._call(
            "PUT",
            key,
            lambda: self.client.put_object(
                Bucket=self.bucket, Key=k, Body=data, ContentType=content_type
            ),
        )
