"""Whether the database, Redis and the bucket answer, each within a short timeout.
Failures are reported by kind (the exception's class, an AWS error code), never
with the exception's text: that can carry hosts, socket paths or credentials."""
import time
from concurrent.futures import ThreadPoolExecutor, wait
from functools import lru_cache

import boto3
import psycopg
import redis
from botocore.config import Config
from botocore.exceptions import ClientError

from chalicelib.config import Settings, load_settings
from chalicelib.storage.db import database_conninfo

TIMEOUT_SECONDS = 2


class NotConfigured(Exception):
    pass


def _database(_settings: Settings) -> None:  # database_conninfo reads them
    # A connection of its own: a check that hangs must not hold the worker's. The
    # timeout is SET LOCAL in the check's transaction: RDS Proxy refuses the
    # `options` startup parameter.
    with psycopg.connect(database_conninfo(), connect_timeout=TIMEOUT_SECONDS) as conn:
        conn.execute(f"SET LOCAL statement_timeout = {TIMEOUT_SECONDS * 1000}")
        conn.execute("SELECT 1").fetchone()


def _redis(settings: Settings) -> None:
    if not settings.redis_url:
        raise NotConfigured()
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=TIMEOUT_SECONDS,
                                  socket_connect_timeout=TIMEOUT_SECONDS)
    try:
        client.ping()
    finally:
        client.close()


@lru_cache(maxsize=None)
def _s3():
    return boto3.client("s3", config=Config(connect_timeout=TIMEOUT_SECONDS, read_timeout=TIMEOUT_SECONDS,
                                            retries={"total_max_attempts": 1}))


def _bucket(settings: Settings) -> None:
    if not settings.bucket:
        raise NotConfigured()
    _s3().head_bucket(Bucket=settings.bucket)


def _timed(check, settings: Settings) -> dict:
    started = time.perf_counter()
    try:
        check(settings)
        error = None
    except Exception as exc:  # any failure is an answer here, reported by its kind
        error = _kind(exc)
    result = {"ok": error is None, "latencyMs": round((time.perf_counter() - started) * 1000, 1)}
    return result if error is None else {**result, "error": error}


def _kind(exc: Exception) -> str:
    if isinstance(exc, NotConfigured):
        return "not configured"
    if isinstance(exc, ClientError):  # HeadBucket's codes are bare statuses ("404", "403")
        code = str(exc.response.get("Error", {}).get("Code", "ClientError"))
        return f"HTTP {code}" if code.isdigit() else code
    return type(exc).__name__


def check_health() -> dict:
    """{"status": "ok" | "unhealthy", "checks": {name: {ok, latencyMs[, error]}}}; the
    three checks run at once, so the answer takes about the slowest of them."""
    settings = load_settings()
    checks = {"database": _database, "redis": _redis, "bucket": _bucket}
    pool = ThreadPoolExecutor(max_workers=len(checks))
    futures = {name: pool.submit(_timed, check, settings) for name, check in checks.items()}
    wait(futures.values(), timeout=TIMEOUT_SECONDS + 1)
    pool.shutdown(wait=False)  # a check stuck past every timeout must not hold the answer
    results = {name: (f.result() if f.done() else {"ok": False, "latencyMs": (TIMEOUT_SECONDS + 1) * 1000,
                                                   "error": "timed out"})
               for name, f in futures.items()}
    return {"status": "ok" if all(r["ok"] for r in results.values()) else "unhealthy", "checks": results}


def failure_message(report: dict) -> str:
    """'database unreachable: OperationalError; redis unreachable: ConnectionError'."""
    return "; ".join(f"{name} unreachable: {result['error']}"
                     for name, result in report["checks"].items() if not result["ok"])
