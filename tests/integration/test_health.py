"""GET /health's checks in-process, against the stack's PostgreSQL, Redis and bucket,
and against Redis servers that answer slowly, never answer or cannot be reached (real
sockets): slow is 200 "degraded", unreachable 503."""
import contextlib
import json
import socket
import threading
import time

import pytest

from chalicelib import health


@pytest.fixture
def aws_env(monkeypatch, local_env, service_env):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
                 "KB_BUCKET"):
        monkeypatch.setenv(name, local_env[name])
    health._s3.cache_clear()
    yield
    health._s3.cache_clear()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _redis_answering_after(delay: float):
    """A Redis on a real socket that answers every command, `delay` seconds late."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve(conn):
        with conn:
            while not stop.is_set():
                data = conn.recv(65536)
                if not data:
                    return
                time.sleep(delay)
                command = data.upper()
                conn.sendall(b"%1\r\n$5\r\nproto\r\n:3\r\n" if b"HELLO" in command  # RESP3's greeting
                             else b"+PONG\r\n" if b"PING" in command else b"+OK\r\n")

    def accept():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    finally:
        stop.set()
        server.close()


def test_all_answer(aws_env, monkeypatch):
    monkeypatch.setattr(health.limits, "HEALTH_SLOW_MS", 60_000)  # a busy box is not the point here
    report = health.check_health()
    assert report["status"] == "ok"
    assert set(report["checks"]) == {"database", "redis", "bucket", "embedding"}
    for check in report["checks"].values():
        assert check["ok"] is True and check["latencyMs"] >= 0 and "slow" not in check
    from chalicelib.api.health import health as route

    response = route()
    assert response.status_code == 200
    assert json.loads(response.body)["data"]["checks"]["redis"]["ok"] is True


def test_a_closed_redis_port_is_named_without_its_address(aws_env, monkeypatch):
    port = _closed_port()
    monkeypatch.setenv("REDIS_URL", f"redis://:s3cret@127.0.0.1:{port}/0")
    report = health.check_health()
    assert report["status"] == "unhealthy"
    assert report["checks"]["database"]["ok"] and report["checks"]["bucket"]["ok"]
    assert report["checks"]["redis"] == {"ok": False, "latencyMs": report["checks"]["redis"]["latencyMs"],
                                         "error": "ConnectionError"}
    message = health.failure_message(report)
    assert message == "redis unreachable: ConnectionError"
    assert str(port) not in json.dumps(report) and "s3cret" not in json.dumps(report)


def test_a_redis_that_answers_slowly_is_degraded_not_down(aws_env, monkeypatch):
    from chalicelib.api.health import health as route

    monkeypatch.setattr(health.limits, "HEALTH_SLOW_MS", 200)
    with _redis_answering_after(0.3) as url:
        monkeypatch.setenv("REDIS_URL", url)
        report = health.check_health()
        response = route()
    redis_check = report["checks"]["redis"]
    assert report["status"] == "degraded"
    assert redis_check["ok"] is True and redis_check["slow"] is True and redis_check["latencyMs"] > 200
    # (on a busy machine the others may be slow too, and are named beside it)
    assert f"redis slow: answered in {redis_check['latencyMs']:.0f} ms (slow above 200 ms)" in report["message"].split("; ")
    assert report["checks"]["database"]["ok"] and report["checks"]["bucket"]["ok"]
    body = json.loads(response.body)
    assert response.status_code == 200
    assert body["data"]["status"] == "degraded" and "redis slow: answered in " in body["data"]["message"]


def test_a_redis_that_accepts_and_never_answers_is_slow_within_its_timeout(aws_env, monkeypatch):
    monkeypatch.setattr(health, "ANSWER_SECONDS", 1)
    monkeypatch.setattr(health.limits, "HEALTH_SLOW_MS", 60_000)
    with socket.socket() as silent:  # accepts the connection, never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
        started = time.monotonic()
        report = health.check_health()
        elapsed = time.monotonic() - started
    assert report["status"] == "degraded"
    assert report["checks"]["redis"]["error"] == "TimeoutError" and report["checks"]["redis"]["slow"] is True
    assert any(part.startswith("redis slow: no answer in ") and part.endswith("(TimeoutError)")
               for part in report["message"].split("; "))
    assert elapsed < health.CONNECT_SECONDS + 1 + 1 + 1.5  # every timeout and the wait's second: the bound is the point


def test_a_missing_bucket_and_database_are_named(aws_env, monkeypatch, service_env):
    monkeypatch.setenv("KB_BUCKET", "kb-no-such-bucket-for-health")
    monkeypatch.setenv("DATABASE_URL", service_env["DATABASE_URL"].replace("/kb_it_", "/kb_absent_"))
    report = health.check_health()
    assert report["checks"]["redis"]["ok"]
    assert report["checks"]["bucket"]["error"] == "HTTP 404"
    assert report["checks"]["database"]["error"] == "OperationalError"
    assert health.failure_message(report) == ("database unreachable: OperationalError; "
                                              "bucket unreachable: HTTP 404")
    assert "pgdata" not in json.dumps(report)  # the socket path in psycopg's message


def test_the_route_answers_503_in_the_error_envelope(aws_env, monkeypatch):
    from chalicelib.api.health import health as route

    monkeypatch.setattr(health.limits, "HEALTH_SLOW_MS", 60_000)
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{_closed_port()}/0")
    response = route()
    body = json.loads(response.body)
    assert response.status_code == 503
    assert body["success"] is False
    assert body["error"]["code"] == "UNHEALTHY"
    assert body["error"]["message"] == "redis unreachable: ConnectionError"
    assert body["error"]["details"]["checks"]["database"]["ok"] is True


def test_a_database_outage_is_a_503_that_names_no_host_or_socket(service_env, tenant, monkeypatch):
    """kb_search and the API answer a dropped database as UNAVAILABLE (retry), with
    nothing of the connection string in what the caller sees."""
    from chalicelib.api.direct_invoke import handle_kb_search
    from chalicelib.storage import db

    _, key = tenant
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("DATABASE_URL", f"postgresql://kb@127.0.0.1:{port}/kb?connect_timeout=2")
    db.reset()
    answer = handle_kb_search({"apiKey": key, "knowledgeBaseId": "kb_x", "query": "q"})
    assert answer["success"] is False
    assert answer["error"]["status"] == 503 and answer["error"]["code"] == "UNAVAILABLE"
    text = json.dumps(answer)
    assert str(port) not in text and "127.0.0.1" not in text and "socket" not in text


def test_the_embedding_provider_is_checked_as_deployed(aws_env, monkeypatch, tmp_path):
    """Seed 004's provider check: the local model's files (without loading the model), a
    remote provider through its real client (here the openai SDK against a local server
    that speaks its protocol), one request, no retries."""
    from tests.integration.openai_server import OpenAIEmbeddingServer

    monkeypatch.setattr(health.limits, "HEALTH_SLOW_MS", 60_000)
    monkeypatch.setenv("KB_MODEL_DIR", str(tmp_path))  # a folder without the model's files
    report = health.check_health()
    assert report["status"] == "unhealthy" and report["checks"]["embedding"]["error"] == "ModelFilesMissing"
    monkeypatch.delenv("KB_MODEL_DIR")
    monkeypatch.setenv("EMBEDDING_PROVIDER", "openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    monkeypatch.setattr(health, "_embedding_checks", {})
    with OpenAIEmbeddingServer(dim=1536) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        assert health.check_health()["checks"]["embedding"]["ok"] is True
        assert server.requests[-1]["input"] == ["health"]
        # a minute's answer per worker: /health needs no key, and each check is a billed request
        assert health.check_health()["checks"]["embedding"]["ok"] is True and len(server.requests) == 1
        health._embedding_checks.clear()
        server.failures = [503]
        failed = health.check_health()
        assert failed["checks"]["embedding"]["error"] == "InternalServerError" and len(server.requests) == 2
        assert failed["status"] == "unhealthy"
        health._embedding_checks.clear()
        server.failures = [429]  # throttled: busy, not down
        throttled = health.check_health()
        assert throttled["status"] == "degraded" and throttled["checks"]["embedding"]["slow"] is True
    health._embedding_checks.clear()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{_closed_port()}/v1")
    down = health.check_health()
    assert down["status"] == "unhealthy" and down["checks"]["embedding"]["error"] == "APIConnectionError"
