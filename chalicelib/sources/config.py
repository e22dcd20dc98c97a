"""A source as a knowledge base stores it (SourceConfig), the rules a deployment holds it to
(SourceRules), and parse_source, which checks what the API is given: what the package
offers and why is in chalicelib/sources/__init__.py."""
import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Iterator, Optional, Protocol, Union

from chalicelib import limits, netrules
from chalicelib.errors import Invalid

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
