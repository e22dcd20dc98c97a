"""Where a knowledge base's documents come from besides its own bucket prefix (seed 003's
FilesAdapter: upload, download, list). A source is mirrored into the prefix by a sync
(documents/sync.py): new and changed objects are copied in, and copies whose original is
gone are deleted; the bucket's events then run the pipeline as for any upload. Copies carry
the source's version of the object (SOURCE_VERSION metadata), so an unchanged object is not
copied again and a file put into the prefix by other means is never deleted by a mirror.

Two adapters: another S3-compatible bucket and prefix (credentials from a Secrets Manager
secret, or the functions' own role), and a folder on the machine that runs the functions
(the local stack's; a deployment allows it with FOLDER_SOURCES=allow)."""
import fnmatch
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterator, Optional, Protocol

from chalicelib import limits
from chalicelib.errors import Invalid

SOURCE_VERSION = "source-version"  # S3 user metadata on a copy: the source object's version
KINDS = ("s3", "folder")


@dataclass(frozen=True)
class SourceObject:
    path: str  # below the source's prefix or folder, '/'-separated
    size: int
    version: str  # changes whenever the object does (an ETag, or size and mtime)


class TooLargeObject(Exception):
    """download() met more than max_bytes, whatever the listing said the size was."""


class FilesAdapter(Protocol):
    def list(self) -> Iterator[SourceObject]: ...
    def download(self, path: str, max_bytes: int) -> bytes: ...  # TooLargeObject past max_bytes
    def upload(self, path: str, data: bytes) -> None: ...


@dataclass(frozen=True)
class SourceConfig:
    """A knowledge base's `source`, as stored (knowledge_bases.source, migration 0025)."""
    kind: str
    bucket: Optional[str] = None
    prefix: str = ""
    endpoint_url: Optional[str] = None
    region: Optional[str] = None
    secret_arn: Optional[str] = None
    path: Optional[str] = None
    include: tuple[str, ...] = field(default_factory=tuple)
    exclude: tuple[str, ...] = field(default_factory=tuple)

    def as_json(self) -> dict:
        return {k: v for k, v in (("type", self.kind), ("bucket", self.bucket), ("prefix", self.prefix or None),
                                  ("endpointUrl", self.endpoint_url), ("region", self.region),
                                  ("secretArn", self.secret_arn), ("path", self.path),
                                  ("include", list(self.include) or None), ("exclude", list(self.exclude) or None))
                if v is not None}

    def selects(self, path: str) -> bool:
        name = PurePosixPath(path).name
        def hit(patterns):
            return any(fnmatch.fnmatch(p, g) for g in patterns for p in (name, path))
        return (not self.include or hit(self.include)) and not (self.exclude and hit(self.exclude))


def parse_source(value, org_id: str, own_bucket: str, allow_private: bool) -> Optional[SourceConfig]:
    """The API's `source` object; None (or null) is the bucket prefix alone. A source bucket
    is never the deployment's own (its other knowledge bases are other tenants'), and its
    secret is one made for the caller's organisation: named kb-sources/{orgId}/... (the
    functions' role reads no other secrets, and reaches no other bucket without one). An
    endpointUrl is https at a public address unless private ones are allowed (the local
    stack), as a document fetched from a URL."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in KINDS:
        raise Invalid.field("source.type", f"must be one of {', '.join(KINDS)}")
    allowed = {"s3": {"type", "bucket", "prefix", "endpointUrl", "region", "secretArn", "include", "exclude"},
               "folder": {"type", "path", "include", "exclude"}}[value["type"]]
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise Invalid.field(f"source.{unknown[0]}", f"is not a field of a {value['type']} source;"
                                                    f" use {', '.join(sorted(allowed))}")

    def text(name: str, required: bool = False) -> Optional[str]:
        got = value.get(name)
        if got is None and not required:
            return None
        if not isinstance(got, str) or not got.strip() or len(got) > limits.SOURCE_FIELD_MAX_CHARS:
            raise Invalid.field(f"source.{name}", f"must be text of 1 to {limits.SOURCE_FIELD_MAX_CHARS} characters")
        return got.strip()

    def globs(name: str) -> tuple[str, ...]:
        got = value.get(name) or []
        if not isinstance(got, list) or len(got) > limits.FILTER_LIST_MAX or not all(isinstance(g, str) and g
                                                                                   for g in got):
            raise Invalid.field(f"source.{name}", f"must be a list of up to {limits.FILTER_LIST_MAX} globs")
        return tuple(got)

    if value["type"] == "folder":
        if os.environ.get("FOLDER_SOURCES") != "allow":
            raise Invalid.field("source.type", "a folder source is read by the functions' own machine: only a local"
                                               " deployment allows it (FOLDER_SOURCES=allow)")
        path = text("path", required=True)
        if not os.path.isabs(path):
            raise Invalid.field("source.path", "must be an absolute path")
        return SourceConfig("folder", path=path, include=globs("include"), exclude=globs("exclude"))
    secret, bucket = text("secretArn"), text("bucket", required=True)
    if bucket == own_bucket:
        raise Invalid.field("source.bucket", "is this deployment's own bucket: put files under the knowledge"
                                             " base's prefix instead")
    if secret is not None and f":secret:{limits.SOURCE_SECRET_PREFIX}{org_id}/" not in secret:
        raise Invalid.field("source.secretArn", f"must name a secret whose name starts with"
                                                f" {limits.SOURCE_SECRET_PREFIX}{org_id}/ (your organisation's)")
    endpoint = text("endpointUrl")
    if endpoint is not None and not allow_private:
        if secret is None:  # the functions' own credentials are never sent to a caller's endpoint
            raise Invalid.field("source.secretArn", "is required with an endpointUrl: the store's own credentials,"
                                                    f" in a secret named {limits.SOURCE_SECRET_PREFIX}{org_id}/...")
        from chalicelib.documents.url_fetch import require_public_host
        require_public_host(endpoint, "source.endpointUrl")
    return SourceConfig("s3", bucket=bucket, prefix=(text("prefix") or "").strip("/"),
                        endpoint_url=endpoint, region=text("region"), secret_arn=secret,
                        include=globs("include"), exclude=globs("exclude"))


def source_of(stored: Optional[dict]) -> Optional[SourceConfig]:
    """A stored source back into its record (what parse_source accepted)."""
    if not stored:
        return None
    return SourceConfig(kind=stored["type"], bucket=stored.get("bucket"), prefix=stored.get("prefix") or "",
                        endpoint_url=stored.get("endpointUrl"), region=stored.get("region"),
                        secret_arn=stored.get("secretArn"), path=stored.get("path"),
                        include=tuple(stored.get("include") or ()), exclude=tuple(stored.get("exclude") or ()))


class S3Files:
    """An S3-compatible bucket and prefix."""

    def __init__(self, config: SourceConfig):
        import boto3

        credentials = {}
        if config.secret_arn:
            from chalicelib.aws import client
            secret = json.loads(client("secretsmanager").get_secret_value(SecretId=config.secret_arn)["SecretString"])
            credentials = {"aws_access_key_id": secret["accessKeyId"],
                           "aws_secret_access_key": secret["secretAccessKey"],
                           "aws_session_token": secret.get("sessionToken")}
        self.s3 = boto3.client("s3", endpoint_url=config.endpoint_url, region_name=config.region, **credentials)
        self.bucket, self.prefix = config.bucket, f"{config.prefix}/" if config.prefix else ""

    def list(self) -> Iterator[SourceObject]:
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
            for item in page.get("Contents", []):
                if not item["Key"].endswith("/"):
                    yield SourceObject(item["Key"][len(self.prefix):], item["Size"], item["ETag"].strip('"'))

    def download(self, path: str, max_bytes: int) -> bytes:
        body = self.s3.get_object(Bucket=self.bucket, Key=self.prefix + path)["Body"]
        data = body.read(max_bytes + 1)  # a store that lists 1 byte and serves gigabytes stops here
        body.close()
        if len(data) > max_bytes:
            raise TooLargeObject(path)
        return data

    def upload(self, path: str, data: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self.prefix + path, Body=data)


class FolderFiles:
    """A folder of the machine that runs the functions; hidden files and folders are skipped."""

    def __init__(self, config: SourceConfig):
        self.root = Path(config.path)

    def list(self) -> Iterator[SourceObject]:
        if not self.root.is_dir():
            raise Invalid.field("source.path", f"{self.root} is not a folder this deployment can read")
        for root, dirs, files in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(f for f in files if not f.startswith(".")):
                path = Path(root) / name
                stat = path.stat()
                version = hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:32]
                yield SourceObject(path.relative_to(self.root).as_posix(), stat.st_size, version)

    def download(self, path: str, max_bytes: int) -> bytes:
        with (self.root / path).open("rb") as handle:
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise TooLargeObject(path)
        return data

    def upload(self, path: str, data: bytes) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def adapter_for(config: SourceConfig) -> FilesAdapter:
    return S3Files(config) if config.kind == "s3" else FolderFiles(config)
