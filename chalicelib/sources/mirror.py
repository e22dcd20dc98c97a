"""A knowledge base's source mirrored into its bucket prefix (see chalicelib/sources). What
was copied, and from which version, is kept in a manifest beside the prefix
(`_sources/{kbId}.json`, outside kb/ so the pipeline never sees it): an unchanged object is
not copied again, and only copies are deleted when their original goes."""
import json
import time
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from chalicelib import limits
from chalicelib.aws import client
from chalicelib.config import load_settings
from chalicelib.errors import BadUpstream
from chalicelib.ingestion.objects import knowledge_base_prefix
from chalicelib.sources import Skipped, SourceConfig, SourceObject, SourceRules, TooLargeObject, Unreadable, adapter_for


@dataclass(frozen=True)
class MirrorReport:
    copied: int
    unchanged: int
    deleted: int
    skipped: tuple[Skipped, ...]  # the source's names not copied, each with why
    more: bool  # stopped at the time budget: a later sync goes on where this one stopped


def manifest_key(kb_id: str) -> str:
    return f"_sources/{kb_id}.json"


def _load(s3, bucket: str, kb_id: str) -> dict[str, str]:
    try:
        return json.loads(s3.get_object(Bucket=bucket, Key=manifest_key(kb_id))["Body"].read())
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return {}
        raise


def _listing(config: SourceConfig, found, skipped: list) -> dict[str, SourceObject]:
    """{path in the knowledge base: object} of what the filters select; names the source
    could not offer, or two names cleaned into one path, go to `skipped`."""
    listing = {}
    for item in found:
        if isinstance(item, Skipped):
            skipped.append(item)
        elif not config.selects(item.path):
            continue
        elif item.path in listing:
            skipped.append(Skipped(item.name, f"becomes the path {item.path}, as {listing[item.path].name} does"))
        else:
            listing[item.path] = item
    return listing


def mirror(kb_id: str, config: SourceConfig, rules: SourceRules) -> MirrorReport:
    """`config` as parse_source reads it now, under today's `rules`: the adapters check again
    what they reach (each request's host, each file's resolved path)."""
    settings, s3 = load_settings(), client("s3")
    bucket, prefix = settings.bucket, knowledge_base_prefix(kb_id)
    manifest = _load(s3, bucket, kb_id)
    skipped: list[Skipped] = []
    adapter = _reached(config, lambda: adapter_for(config, rules))
    listing = _reached(config, lambda: _listing(config, adapter.list(), skipped))
    deadline = time.monotonic() + limits.SOURCE_SYNC_SECONDS
    copied = unchanged = deleted = 0
    more = False
    try:
        for path, found in sorted(listing.items()):
            if manifest.get(path) == found.version:
                unchanged += 1
                continue
            if time.monotonic() > deadline:
                more = True
                break
            if found.size > settings.max_file_bytes:
                skipped.append(Skipped(found.name, f"over the limit of {settings.max_file_bytes} bytes"))
                continue
            if len((prefix + path).encode("utf-8")) > 1024:
                skipped.append(Skipped(found.name, "its key would be over S3's 1024 bytes"))
                continue
            try:
                data = _reached(config, lambda: adapter.download(found.name, settings.max_file_bytes))
            except TooLargeObject:
                skipped.append(Skipped(found.name, f"over the limit of {settings.max_file_bytes} bytes"))
                continue
            except Unreadable as why:
                skipped.append(Skipped(found.name, why.reason))
                continue
            s3.put_object(Bucket=bucket, Key=prefix + path, Body=data)
            manifest[path] = found.version
            copied += 1
        for path in sorted(set(manifest) - set(listing)):  # only copies: what the source no longer offers
            if time.monotonic() > deadline:
                more = True
                break
            s3.delete_object(Bucket=bucket, Key=prefix + path)
            del manifest[path]
            deleted += 1
    finally:
        s3.put_object(Bucket=bucket, Key=manifest_key(kb_id), Body=json.dumps(manifest).encode("utf-8"),
                      ContentType="application/json")
    return MirrorReport(copied=copied, unchanged=unchanged, deleted=deleted, skipped=tuple(skipped), more=more)


def _reached(config, call):
    """What the source answered; a source that cannot be read is a 502 naming it and why."""
    try:
        return call()
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "an error")
        raise BadUpstream(f"the source bucket {config.bucket} answered {code}", code="SOURCE_UNAVAILABLE") from None
    except (BotoCoreError, OSError) as err:
        where = config.bucket if config.kind == "s3" else config.path
        raise BadUpstream(f"the source {where} could not be read: {type(err).__name__}",
                          code="SOURCE_UNAVAILABLE") from None
