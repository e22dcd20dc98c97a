"""Where a knowledge base's documents come from besides its own bucket prefix (seed 003's
FilesAdapter: upload, download, list). A source is mirrored into the prefix by a sync
(sources/mirror.py): new and changed objects are copied in, and copies whose original is
gone are deleted; the bucket's events then run the pipeline as for any upload. Copies carry
the source's version of the object (SOURCE_VERSION metadata), so an unchanged object is not
copied again and a file put into the prefix by other means is never deleted by a mirror.

Two adapters: another S3-compatible bucket and prefix, and a folder on the machine that runs
the functions. A source reads only what its owner may read (SourceRules, checked when it is
written and again at every sync):
- a folder only below the roots the deployment lists (FOLDER_SOURCE_ROOTS; none on AWS),
  links resolved: a link out of them, a broken link or anything but a file is skipped;
- a bucket at a caller's endpointUrl only at public https addresses (on the local stack:
  only the emulator's own endpoint), read with the secret's credentials or anonymously,
  never with the functions' own;
- every name copied in is cleaned as a document path the API takes (no '..', nothing
  absolute), or skipped with its reason."""
import fnmatch
import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterator, Optional, Protocol, Union

from chalicelib import limits, netrules
from chalicelib.errors import Invalid
from chalicelib.paths import clean_path

SOURCE_VERSION = "source-version"  # S3 user metadata on a copy: the source object's version
KINDS = ("s3", "folder")
_SECRET_ARN_PARTS = 7  # arn:partition:secretsmanager:region:account:secret:name (a name may hold ':')


@dataclass(frozen=True)
class SourceObject:
    path: str  # in the knowledge base: the source's name cleaned as a document path
    size: int
    version: str  # changes whenever the object does (an ETag, or size and mtime)
    name: str  # the source's own: a key below the prefix, a file below the folder


@dataclass(frozen=True)
class Skipped:
    name: str  # the source's own, as listed
    reason: str


class TooLargeObject(Exception):
    """download() met more than max_bytes, whatever the listing said the size was."""


class Unreadable(Exception):
    """download() could not read this one object (a file that became a link out, ...): the
    sync skips it with the reason and goes on."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class FilesAdapter(Protocol):
    def list(self) -> Iterator[Union[SourceObject, Skipped]]: ...
    def download(self, name: str, max_bytes: int) -> bytes: ...  # TooLargeObject past max_bytes, Unreadable
    def upload(self, path: str, data: bytes) -> None: ...


@dataclass(frozen=True)
class SourceRules:
    """What a deployment lets a source read."""
    folder_roots: tuple[str, ...] = ()  # absolute, links resolved; none: no folder sources
    own_endpoint: Optional[str] = None  # the deployment's own S3 endpoint (the local stack's emulator); None on AWS

    @classmethod
    def of(cls, settings) -> "SourceRules":
        return cls(folder_roots=tuple(os.path.realpath(r) for r in settings.folder_source_roots if os.path.isabs(r)),
                   own_endpoint=settings.s3_endpoint_url or None)

    def root_of(self, path: str) -> Optional[str]:
        """The listed root a path is below once its links are resolved, else None."""
        real = os.path.realpath(path)
        return next((r for r in self.folder_roots if os.path.commonpath([r, real]) == r), None)


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


def check_endpoint(url: str, rules: SourceRules, field: str = "source.endpointUrl") -> None:
    """An endpoint a caller named obeys the rule a document's URL obeys: on AWS https, and
    every address its host resolves to public (chalicelib/netrules.py); where the deployment
    has an S3 endpoint of its own (the local stack's emulator), that endpoint only: same
    scheme and port, and a host that is it (by name, or by every address it resolves to).
    Only the origin counts: a request's path (its bucket and key) is not compared."""
    if rules.own_endpoint is None:
        netrules.require_public_https(url, field, timeout=limits.URL_CONNECT_SECONDS)
        return
    parts, host, port = netrules.split_url(url, field)
    own, own_host, own_port = netrules.split_url(rules.own_endpoint, "AWS_ENDPOINT_URL")
    same = parts.scheme == own.scheme and port == own_port
    if same and host != own_host:
        theirs = set(netrules.addresses(host, port, timeout=limits.URL_CONNECT_SECONDS, field=field))
        same = theirs <= set(netrules.addresses(own_host, own_port, timeout=limits.URL_CONNECT_SECONDS, field=field))
    if not same:
        raise Invalid.field(field, f"{url} is not this deployment's own S3 endpoint ({rules.own_endpoint}),"
                                   " the only one a source may name here")


def check_secret_arn(arn: str, org_id: str, field: str = "source.secretArn") -> None:
    """arn:{partition}:secretsmanager:{region}:{account}:secret:{name}, the name starting
    with kb-sources/{orgId}/ (the functions' role reads no other secrets)."""
    own = f"{limits.SOURCE_SECRET_PREFIX}{org_id}/"
    parts = arn.split(":", _SECRET_ARN_PARTS - 1)
    if (len(parts) != _SECRET_ARN_PARTS or parts[0] != "arn" or not parts[1] or parts[2] != "secretsmanager"
            or not parts[3] or not parts[4].isdigit() or parts[5] != "secret"):
        raise Invalid.field(field, "must be a Secrets Manager secret's ARN:"
                                   f" arn:aws:secretsmanager:REGION:ACCOUNT:secret:{own}NAME")
    if not parts[6].startswith(own) or len(parts[6]) == len(own):
        raise Invalid.field(field, f"must name a secret whose name starts with {own} (your organisation's)")


def parse_source(value, org_id: str, own_bucket: str, rules: SourceRules) -> Optional[SourceConfig]:
    """The API's `source` object; None (or null) is the bucket prefix alone. A source bucket
    is never the deployment's own (its other knowledge bases are other tenants'), and its
    secret is one made for the caller's organisation: named kb-sources/{orgId}/... (the
    functions' role reads no other secrets, and reaches no other bucket without one). A sync
    parses the stored source again: the rules or the names' addresses may have changed."""
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
        if not rules.folder_roots:
            raise Invalid.field("source.type", "a folder source is read by the functions' own machine, and this"
                                               " deployment lists no folders for sources (FOLDER_SOURCE_ROOTS)")
        path = text("path", required=True)
        if not os.path.isabs(path):
            raise Invalid.field("source.path", "must be an absolute path")
        if rules.root_of(path) is None:
            raise Invalid.field("source.path", "must be below a folder this deployment lists for sources,"
                                               f" links resolved: {', '.join(rules.folder_roots)}")
        return SourceConfig("folder", path=path, include=globs("include"), exclude=globs("exclude"))
    secret, bucket = text("secretArn"), text("bucket", required=True)
    if bucket == own_bucket:
        raise Invalid.field("source.bucket", "is this deployment's own bucket: put files under the knowledge"
                                             " base's prefix instead")
    if secret is not None:
        check_secret_arn(secret, org_id)
    endpoint = text("endpointUrl")
    if endpoint is not None:
        check_endpoint(endpoint, rules)
    return SourceConfig("s3", bucket=bucket, prefix=(text("prefix") or "").strip("/"),
                        endpoint_url=endpoint, region=text("region"), secret_arn=secret,
                        include=globs("include"), exclude=globs("exclude"))


def _listed(name: str, size: int, version: str) -> Union[SourceObject, Skipped]:
    """The source's name as a document path, cleaned as the API cleans one, or why not."""
    try:
        return SourceObject(clean_path(name, "path"), size, version, name)
    except Invalid as err:
        return Skipped(name, err.message.split(": ", 1)[-1])


class S3Files:
    """An S3-compatible bucket and prefix. At an endpoint a caller named, requests are signed
    with the secret's credentials or not at all (UNSIGNED), and each request's host is
    checked again just before it is sent (check_endpoint).

    What remains of DNS rebinding: botocore resolves the name itself when it connects, a
    moment after that check resolved it; a name served with a zero TTL can answer a public
    address to the check and a private one to the connect. Pinning the checked address
    would mean replacing botocore's HTTP layer (it verifies the certificate against the
    name). What such a name gains is small: the request carries no credential of ours,
    only GETs are sent, and an answer is copied only if it parses as an S3 listing."""

    def __init__(self, config: SourceConfig, rules: SourceRules):
        import boto3
        from botocore import UNSIGNED
        from botocore.config import Config

        options: dict = {"endpoint_url": config.endpoint_url, "region_name": config.region}
        if config.secret_arn:
            from chalicelib.aws import client
            secret = json.loads(client("secretsmanager").get_secret_value(SecretId=config.secret_arn)["SecretString"])
            options.update(aws_access_key_id=secret["accessKeyId"], aws_secret_access_key=secret["secretAccessKey"],
                           aws_session_token=secret.get("sessionToken"))
        if config.endpoint_url:
            # path-style: the host is the endpoint's own, never {bucket}.{host}, a name the check did not see
            options["config"] = Config(s3={"addressing_style": "path"}, connect_timeout=limits.URL_CONNECT_SECONDS,
                                       **({} if config.secret_arn else {"signature_version": UNSIGNED}))
        self.s3 = boto3.client("s3", **options)
        if config.endpoint_url:
            self.s3.meta.events.register("before-send.s3", lambda request, **_: check_endpoint(request.url, rules))
        self.bucket, self.prefix = config.bucket, f"{config.prefix}/" if config.prefix else ""

    def list(self) -> Iterator[Union[SourceObject, Skipped]]:
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.prefix):
            for item in page.get("Contents", []):
                if not item["Key"].endswith("/") and item["Key"].startswith(self.prefix):
                    yield _listed(item["Key"][len(self.prefix):], item["Size"], item["ETag"].strip('"'))

    def download(self, name: str, max_bytes: int) -> bytes:
        body = self.s3.get_object(Bucket=self.bucket, Key=self.prefix + name)["Body"]
        data = body.read(max_bytes + 1)  # a store that lists 1 byte and serves gigabytes stops here
        body.close()
        if len(data) > max_bytes:
            raise TooLargeObject(name)
        return data

    def upload(self, path: str, data: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self.prefix + path, Body=data)


class FolderFiles:
    """A folder of the machine that runs the functions, below a root the deployment lists;
    hidden files and folders are skipped. Links are resolved: what a link reaches is read
    only if it is a file below a listed root; a link to a folder is not followed."""

    def __init__(self, config: SourceConfig, rules: SourceRules):
        self.root, self.rules = Path(config.path), rules

    def _allowed_root(self) -> Path:
        if not self.rules.folder_roots or self.rules.root_of(str(self.root)) is None:
            raise Invalid.field("source.path", f"{self.root} is not below a folder this deployment lists for sources")
        real = Path(os.path.realpath(self.root))
        if not real.is_dir():
            raise Invalid.field("source.path", f"{self.root} is not a folder this deployment can read")
        return real

    def _regular(self, path: Path) -> tuple[str, os.stat_result]:
        """(the file's resolved path, its stat), or Unreadable saying why not."""
        real = os.path.realpath(path)
        if self.rules.root_of(real) is None:
            raise Unreadable("a link to outside the folders this deployment lists for sources")
        try:
            info = os.stat(real)
        except OSError as err:
            raise Unreadable("a broken link" if path.is_symlink() else f"could not be read ({err.strerror})") from None
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("not a regular file")
        return real, info

    def list(self) -> Iterator[Union[SourceObject, Skipped]]:
        root, failed = self._allowed_root(), []

        def unlisted() -> Iterator[Skipped]:  # folders os.walk could not open
            while failed:
                error = failed.pop(0)
                yield Skipped(Path(error.filename).relative_to(root).as_posix(), f"could not be read ({error.strerror})")

        for folder, dirs, files in os.walk(root, onerror=failed.append):
            here = Path(folder)
            yield from unlisted()
            for name in sorted(d for d in dirs if not d.startswith(".") and (here / d).is_symlink()):
                yield Skipped((here / name).relative_to(root).as_posix(), "a link to a folder: not followed")
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (here / d).is_symlink())
            for name in sorted(f for f in files if not f.startswith(".")):
                relative = (here / name).relative_to(root).as_posix()
                try:
                    _, info = self._regular(here / name)
                except Unreadable as why:
                    yield Skipped(relative, why.reason)
                    continue
                version = hashlib.sha256(f"{info.st_size}:{info.st_mtime_ns}".encode()).hexdigest()[:32]
                yield _listed(relative, info.st_size, version)
        yield from unlisted()

    def download(self, name: str, max_bytes: int) -> bytes:
        real, _ = self._regular(self._allowed_root() / name)
        # O_NOFOLLOW: a link put in the file's place since it was resolved is refused, not followed.
        # A folder above it swapped for a link in that moment is not caught: only who writes below a
        # root on this machine (its operator) could do that, and could as well copy the file there.
        try:
            handle = os.fdopen(os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb")
        except OSError as err:
            raise Unreadable(f"could not be read ({err.strerror})") from None
        with handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise Unreadable("not a regular file")
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise TooLargeObject(name)
        return data

    def upload(self, path: str, data: bytes) -> None:
        target = self.root / clean_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def adapter_for(config: SourceConfig, rules: SourceRules) -> FilesAdapter:
    return S3Files(config, rules) if config.kind == "s3" else FolderFiles(config, rules)
