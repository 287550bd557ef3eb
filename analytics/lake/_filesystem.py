"""Where the lake lives: a local directory (the default) or `s3://bucket/prefix`.

Its tables are Delta tables written and maintained by delta-rs (`storage_options` carry the S3 endpoint
and credentials to it); pyarrow's filesystem (`fs`) reads the files delta-rs names and the erasure mask.
An S3 lake is handed to DuckDB as an fsspec filesystem wrapping the same pyarrow filesystem
(`Lake.register`): DuckDB's extension site is not reachable here (`INSTALL httpfs` fails), though the
httpfs extension wheel from PyPI (`duckdb-extension-httpfs` 1.5.5) loads offline by path on duckdb 1.5.5."""

from __future__ import annotations

__all__ = ["Lake", "lake_from_settings", "open_lake", "restrict_tree"]

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs
from fsspec.implementations.arrow import ArrowFSWrapper

from analytics.lake._errors import LakeMissing
from config import Settings
from schema import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, private_dir

S3_SCHEME = "s3://"


class _S3Wrapper(ArrowFSWrapper):  # type: ignore[misc]
    """ArrowFSWrapper answering to `s3://` paths, so DuckDB routes them to it."""

    protocol = "s3"


@dataclass(frozen=True)
class Lake:
    """A lake root. `base` is the root as the pyarrow filesystem sees it (an absolute local path, or
    `bucket/prefix`); `uri` is how SQL sees it (the same local path, or `s3://bucket/prefix`)."""

    fs: pafs.FileSystem
    base: str
    uri: str
    is_local: bool
    _fsspec: Any = field(default=None, repr=False, compare=False)
    # delta-rs's object-store options (endpoint, region, credentials): never logged, never shown.
    storage_options: dict[str, str] = field(default_factory=dict, repr=False, compare=False)

    def path(self, relative: str) -> str:
        """The filesystem path of a lake-relative path (`changes/event_date=…/x.parquet`)."""
        return f"{self.base}/{relative}" if relative else self.base

    def uri_for(self, relative: str) -> str:
        return f"{self.uri}/{relative}" if relative else self.uri

    def table_uri(self, table: str) -> str:
        """The URI delta-rs opens for a lake-relative table directory (`changes`, `snapshots/state`)."""
        return self.uri_for(table)

    def relative(self, path: str) -> str:
        """The lake-relative form of a filesystem path."""
        prefix = f"{self.base}/"
        if not path.startswith(prefix):
            raise ValueError("path is outside the lake")
        return path[len(prefix) :]

    def register(self, con: Any) -> None:
        """Let a DuckDB connection read this lake's `uri` (a no-op for a local lake)."""
        if self.is_local:
            return
        con.register_filesystem(self._fsspec if self._fsspec is not None else _S3Wrapper(self.fs))


def open_lake(
    root: str,
    *,
    endpoint_url: str | None = None,
    region: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    create: bool = True,
) -> Lake:
    """Open a lake root: a local directory (created if missing, owner-only) or `s3://bucket/prefix`.

    With `create=False` (every read) a missing local root raises `LakeMissing` and nothing is created.

    For S3, `endpoint_url` (e.g. moto on `http://127.0.0.1:PORT`) overrides AWS's endpoint; credentials
    default to the standard AWS chain. The bucket must exist.
    """
    if root.startswith(S3_SCHEME):
        bucket_and_prefix = root[len(S3_SCHEME) :].strip("/")
        if not bucket_and_prefix:
            raise ValueError("an s3 lake root names a bucket")
        options: dict[str, Any] = {"region": region, "allow_delayed_open": True}
        # delta-rs commits on S3 by conditional PUTs (If-None-Match on the next log entry), so writers on
        # many hosts append safely without a lock table (schema/lake.md, "Many writers").
        storage: dict[str, str] = {}
        if region:
            storage["AWS_REGION"] = region
        if endpoint_url:
            parts = urlsplit(endpoint_url)
            options["endpoint_override"] = parts.netloc or parts.path
            options["scheme"] = parts.scheme or "https"
            storage["AWS_ENDPOINT_URL"] = endpoint_url
            if options["scheme"] == "http":
                storage["AWS_ALLOW_HTTP"] = "true"
        if access_key and secret_key:
            options["access_key"] = access_key
            options["secret_key"] = secret_key
            storage["AWS_ACCESS_KEY_ID"] = access_key
            storage["AWS_SECRET_ACCESS_KEY"] = secret_key
        s3 = pafs.S3FileSystem(**options)
        return Lake(
            fs=s3,
            base=bucket_and_prefix,
            uri=f"{S3_SCHEME}{bucket_and_prefix}",
            is_local=False,
            _fsspec=_S3Wrapper(s3),
            storage_options=storage,
        )
    base = os.path.abspath(root).rstrip("/") or "/"
    if not create and not os.path.isdir(base):
        raise LakeMissing(root)
    private_dir(base)  # the lake holds user ids: owner-only, as every file under it
    return Lake(fs=pafs.LocalFileSystem(), base=base, uri=base, is_local=True)


def lake_from_settings(settings: Settings, *, create: bool = True) -> Lake:
    """The settings' lake; `create=False` for a read (a missing local root raises `LakeMissing`)."""
    aws = settings.aws
    return open_lake(
        settings.lake.root,
        endpoint_url=aws.endpoint("s3"),
        region=aws.region,
        access_key=aws.access_key_id.get_secret_value() if aws.access_key_id else None,
        secret_key=aws.secret_access_key.get_secret_value() if aws.secret_access_key else None,
        create=create,
    )


def restrict_tree(lake: Lake, relative: str) -> None:
    """Locally, narrow every file under `relative` to its owner (0600) and every folder to 0700, the
    folders between it and the root included. delta-rs creates files with the process's umask (0644
    commonly), and a table's maintenance (vacuum, checkpoint, log clean-up) writes files no commit's
    own restriction names; a walk of the whole folder leaves none behind. A file deleted meanwhile (a
    concurrent vacuum) is skipped. On S3 there are no modes: access is the bucket's policy."""
    if not lake.is_local:
        return
    top = lake.path(relative)
    for folder, _, names in os.walk(top):
        _chmod(folder, PRIVATE_DIR_MODE)
        for name in names:
            _chmod(os.path.join(folder, name), PRIVATE_FILE_MODE)
    parent = os.path.dirname(top)
    while parent.startswith(f"{lake.base}/"):
        _chmod(parent, PRIVATE_DIR_MODE)
        parent = os.path.dirname(parent)


def _chmod(path: str, mode: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.chmod(path, mode)
