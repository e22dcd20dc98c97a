"""The two adapters (seed 003's FilesAdapter: upload, download, list): another S3-compatible
bucket and prefix (S3Files), and a folder of the machine that runs the functions
(FolderFiles); adapter_for picks one for a source."""
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Iterator, Union

from chalicelib import limits
from chalicelib.errors import Invalid
from chalicelib.paths import clean_path
from chalicelib.sources.config import (FilesAdapter, Skipped, SourceConfig, SourceObject, SourceRules, TooLargeObject,
                                       Unreadable, check_endpoint)


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
