"""Whether the database, Redis, the bucket and the embedding provider answer, each check with its own short
timeouts, all at once. A check that answers slowly, or reaches its dependency and gets no
answer in time, is "slow" (the service is degraded, not down); only one that cannot reach
its dependency (refused, not found, not configured) is "down". Failures are reported by
kind (the exception's class, an AWS error code), never with the exception's text: that
can carry hosts, socket paths or credentials."""
import time
from concurrent.futures import ThreadPoolExecutor, wait
from functools import lru_cache
from typing import Optional

import psycopg
import redis

from chalicelib import limits
from chalicelib.config import Settings, load_settings
from chalicelib.errors import Transient
from chalicelib.storage.db import database_conninfo

CONNECT_SECONDS = limits.HEALTH_CONNECT_SECONDS
ANSWER_SECONDS = limits.HEALTH_ANSWER_SECONDS


class NotConfigured(Exception):
    pass


class Reached:
    """Set by a check once its dependency accepted the connection: a timeout after that
    is a slow answer, before it an unreachable dependency. `started` is when the check's
    time starts: a check may move it past building its client (a cold worker's boto3
    client for S3 took 2.7 s at load 13, none of it the bucket's)."""
    def __init__(self) -> None:
        self.reached = False
        self.started = time.perf_counter()

    def __call__(self) -> None:
        self.reached = True


def _database(_settings: Settings, reached: Reached) -> None:  # database_conninfo reads them
    # A connection of its own: a check that hangs must not hold the worker's. The
    # timeout is SET LOCAL in the check's transaction: RDS Proxy refuses the
    # `options` startup parameter.
    with psycopg.connect(database_conninfo(), connect_timeout=CONNECT_SECONDS) as conn:
        reached()
        conn.execute(f"SET LOCAL statement_timeout = {ANSWER_SECONDS * 1000}")
        conn.execute("SELECT 1").fetchone()


def _redis(settings: Settings, reached: Reached) -> None:
    if not settings.redis_url:
        raise NotConfigured()

    def connected(connection) -> None:  # the socket is open; what follows is Redis answering
        reached()
        connection.on_connect()

    client = redis.Redis.from_url(settings.redis_url, socket_timeout=ANSWER_SECONDS,
                                  socket_connect_timeout=CONNECT_SECONDS, redis_connect_func=connected)
    try:
        client.ping()
    finally:
        client.close()


@lru_cache(maxsize=None)
def _s3():
    import boto3
    from botocore.config import Config

    return boto3.client("s3", config=Config(connect_timeout=CONNECT_SECONDS, read_timeout=ANSWER_SECONDS,
                                            retries={"total_max_attempts": 1}))


def _bucket(settings: Settings, reached: Reached) -> None:
    from botocore.exceptions import ReadTimeoutError

    if not settings.bucket:
        raise NotConfigured()
    s3 = _s3()
    reached.started = time.perf_counter()
    try:
        s3.head_bucket(Bucket=settings.bucket)
    except ReadTimeoutError:
        reached()  # the request went out; no answer came
        raise


_embedding_checks: dict[str, tuple[float, Optional[Exception]]] = {}


def _embedding(settings: Settings, reached: Reached) -> None:
    """Seed 004's provider check: the deployment's embedding provider answers (a remote one
    embeds a word, at most once a minute a worker; the local model's files are there). A
    timeout or a throttle is a slow answer: the request reached a provider that is busy."""
    from chalicelib.embeddings.provider import check_provider

    provider = settings.embedding_provider
    if provider == "local":
        check_provider(provider, ANSWER_SECONDS)
        return
    reached()
    at, failure = _embedding_checks.get(provider, (float("-inf"), None))
    if time.monotonic() - at >= limits.HEALTH_EMBEDDING_CHECK_SECONDS:
        try:
            check_provider(provider, ANSWER_SECONDS)
            failure = None
        except Exception as exc:  # reported by its kind, as every check's failure is
            failure = exc
        _embedding_checks[provider] = (time.monotonic(), failure)
    if failure is not None:
        raise failure


def _cause(exc: Exception) -> Exception:
    """A provider's Transient carries what happened as its cause."""
    return exc.__cause__ if isinstance(exc, Transient) and isinstance(exc.__cause__, Exception) else exc


def _answer_timeout(exc: Exception) -> bool:
    from botocore.exceptions import ClientError, ReadTimeoutError

    exc = _cause(exc)
    throttled = (type(exc).__name__ == "RateLimitError"  # openai's 429, without importing the SDK here
                 or isinstance(exc, ClientError) and exc.response.get("Error", {}).get("Code") == "ThrottlingException")
    return (throttled or isinstance(exc, (redis.TimeoutError, psycopg.errors.QueryCanceled, ReadTimeoutError,
                                          TimeoutError))
            or type(exc).__name__ == "APITimeoutError")


def _timed(check, settings: Settings, reached: Reached) -> dict:
    reached.started = time.perf_counter()
    try:
        check(settings, reached)
        error = None
    except Exception as exc:  # any failure is an answer here, reported by its kind
        error = exc
    latency = round((time.perf_counter() - reached.started) * 1000, 1)
    if error is None:
        return {"ok": True, "latencyMs": latency} | ({"slow": True} if latency > limits.HEALTH_SLOW_MS else {})
    slow = reached.reached and _answer_timeout(error)
    return {"ok": False, "latencyMs": latency, "error": _kind(error)} | ({"slow": True} if slow else {})


def _kind(exc: Exception) -> str:
    from botocore.exceptions import ClientError

    exc = _cause(exc)
    if isinstance(exc, NotConfigured):
        return "not configured"
    if isinstance(exc, ClientError):  # HeadBucket's codes are bare statuses ("404", "403")
        code = str(exc.response.get("Error", {}).get("Code", "ClientError"))
        return f"HTTP {code}" if code.isdigit() else code
    return type(exc).__name__


def _state(result: dict) -> str:
    return "slow" if result.get("slow") else ("ok" if result["ok"] else "down")


def check_health() -> dict:
    """{"status": "ok" | "degraded" | "unhealthy", "checks": {name: {ok, latencyMs[, slow]
    [, error]}}[, "message"]}: unhealthy when a check is down, degraded when one is slow
    (the message names it and its time). The checks run at once, so the answer takes
    about the slowest of them, and at most every timeout plus a second."""
    settings = load_settings()
    checks = {"database": _database, "redis": _redis, "bucket": _bucket, "embedding": _embedding}
    reached = {name: Reached() for name in checks}
    pool = ThreadPoolExecutor(max_workers=len(checks))
    started = time.perf_counter()
    futures = {name: pool.submit(_timed, check, settings, reached[name]) for name, check in checks.items()}
    wait(futures.values(), timeout=CONNECT_SECONDS + ANSWER_SECONDS + 1)
    pool.shutdown(wait=False)  # a check stuck past every timeout must not hold the answer
    waited = round((time.perf_counter() - started) * 1000, 1)
    # Still running: nothing says its dependency is down (a busy box starts a client
    # slowly too), so it is slow.
    results = {name: (f.result() if f.done() else {"ok": False, "latencyMs": waited, "error": "no answer",
                                                   "slow": True})
               for name, f in futures.items()}
    states = {name: _state(r) for name, r in results.items()}
    if "down" in states.values():
        return {"status": "unhealthy", "checks": results}
    if "slow" in states.values():
        return {"status": "degraded", "checks": results, "message": slow_message(results)}
    return {"status": "ok", "checks": results}


def slow_message(checks: dict) -> str:
    """'redis slow: answered in 1520 ms; bucket slow: no answer in 4000 ms (ReadTimeoutError)'."""
    parts = []
    for name, r in checks.items():
        if r.get("slow"):
            answer = (f"answered in {r['latencyMs']:.0f} ms (slow above {limits.HEALTH_SLOW_MS} ms)" if r["ok"]
                      else f"no answer in {r['latencyMs']:.0f} ms ({r['error']})")
            parts.append(f"{name} slow: {answer}")
    return "; ".join(parts)


def failure_message(report: dict) -> str:
    """'database unreachable: OperationalError; redis unreachable: ConnectionError'."""
    return "; ".join(f"{name} unreachable: {result['error']}"
                     for name, result in report["checks"].items() if _state(result) == "down")
