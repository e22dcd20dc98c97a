"""Settings read from the environment.

Only endpoints and credentials differ between the local stack and AWS; everything
else has the same default in both places.
"""
import os
from dataclasses import dataclass

from chalicelib import limits


@dataclass(frozen=True)
class Settings:
    database_url: str
    database_secret_arn: str
    database_host: str
    database_name: str
    redis_url: str
    bucket: str
    state_machine_arn: str
    trigger_dlq_url: str
    embedding_provider: str
    query_cache_ttl_seconds: int
    default_chunk_tokens: int
    default_chunk_overlap: int
    work_prefix: str
    max_file_bytes: int
    max_uncompressed_bytes: int
    max_pages: int
    upload_url_seconds: int  # a presigned PUT's lifetime; a registration whose bytes never came expires then
    key_rate_per_second: int
    bad_keys_per_minute: int
    cors_origins: tuple[str, ...]
    console_demo_key_file: str
    url_private_addresses_allowed: bool  # documents fetched from URLs: the local stack's test servers
    folder_source_roots: tuple[str, ...]  # folders a knowledge base's source may read (sources/); none on AWS
    s3_endpoint_url: str  # the deployment's own S3 endpoint when it has one (the local stack's emulator)


def redis_url() -> str:
    """REDIS_URL alone, for every Redis call: load_settings builds all the settings (~70 µs;
    a cached search called it 4 times, cProfile of bench/api_overhead.py's requests)."""
    return os.environ.get("REDIS_URL", "")


def key_rate_per_second() -> int:
    """A key's requests a second unless it names its own; read alone, as redis_url is."""
    return int(os.environ.get("KEY_RATE_PER_SECOND", str(limits.KEY_RATE_PER_SECOND)))


def bad_keys_per_minute() -> int:
    """Bad keys an address may send in a sliding minute; read alone: every request's rate
    check asks it twice, and building every setting for it showed in a cached search's time."""
    return int(os.environ.get("BAD_KEYS_PER_MINUTE", str(limits.BAD_KEYS_PER_MINUTE)))


def reranker_configured() -> bool:
    """Whether the deployment has a reranker: RERANKER bedrock (Bedrock's Rerank, the default)
    or none (a region without it, or a deployment that does not grant it)."""
    return os.environ.get("RERANKER", "bedrock") != "none"


def load_settings() -> Settings:
    env = os.environ
    return Settings(
        database_url=env.get("DATABASE_URL", ""),
        database_secret_arn=env.get("DATABASE_SECRET_ARN", ""),
        database_host=env.get("DATABASE_HOST", ""),
        database_name=env.get("DATABASE_NAME", "kb"),
        redis_url=redis_url(),
        bucket=env.get("KB_BUCKET", "kb-documents-local"),
        state_machine_arn=env.get("STATE_MACHINE_ARN", ""),
        trigger_dlq_url=env.get("TRIGGER_DLQ_URL", ""),
        embedding_provider=env.get("EMBEDDING_PROVIDER", "local"),
        query_cache_ttl_seconds=int(env.get("QUERY_CACHE_TTL_SECONDS", str(7 * 24 * 3600))),
        default_chunk_tokens=int(env.get("CHUNK_TOKENS", str(int(limits.CHUNK_TOKENS.default)))),
        default_chunk_overlap=int(env.get("CHUNK_OVERLAP_TOKENS", "50")),
        work_prefix=env.get("PIPELINE_WORK_PREFIX", "_pipeline/"),
        max_file_bytes=int(env.get("MAX_FILE_BYTES", str(100 * 1024 * 1024))),
        max_uncompressed_bytes=int(env.get("MAX_UNCOMPRESSED_BYTES", str(512 * 1024 * 1024))),
        max_pages=int(env.get("MAX_PAGES", "5000")),
        upload_url_seconds=int(env.get("UPLOAD_URL_SECONDS", str(limits.PRESIGNED_EXPIRY_SECONDS))),
        key_rate_per_second=key_rate_per_second(),
        bad_keys_per_minute=bad_keys_per_minute(),
        cors_origins=tuple(o.strip().rstrip("/") for o in env.get("CORS_ORIGINS", "").split(",") if o.strip()),
        # local stack only: the file holding the demo key the console offers (infra/template.yaml)
        console_demo_key_file=env.get("CONSOLE_DEMO_KEY_FILE", ""),
        # A URL's host may resolve inside the network only where the template says so: the
        # local stack (its test servers are on 127.0.0.1), never on AWS (documents/url_fetch.py).
        url_private_addresses_allowed=env.get("URL_PRIVATE_ADDRESSES", "refuse") == "allow",
        # absolute paths, separated as in PATH; empty: no folder sources (infra/template.yaml)
        folder_source_roots=tuple(p for p in env.get("FOLDER_SOURCE_ROOTS", "").split(os.pathsep) if p.strip()),
        s3_endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL", ""),
    )
