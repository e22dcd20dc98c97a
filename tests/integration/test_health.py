"""GET /health's checks in-process, against the stack's PostgreSQL, Redis and bucket,
and against a Redis port and a bucket that do not answer."""
import json
import socket
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


def test_all_answer(aws_env):
    report = health.check_health()
    assert report["status"] == "ok"
    assert set(report["checks"]) == {"database", "redis", "bucket"}
    for check in report["checks"].values():
        assert check["ok"] is True and 0 <= check["latencyMs"] < 2000
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


def test_a_redis_that_never_answers_times_out(aws_env, monkeypatch):
    with socket.socket() as silent:  # accepts the connection, never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
        started = time.monotonic()
        report = health.check_health()
        elapsed = time.monotonic() - started
    assert report["checks"]["redis"]["error"] == "TimeoutError"
    assert elapsed < health.TIMEOUT_SECONDS + 1.5  # the bound is the point, not a speed figure


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
