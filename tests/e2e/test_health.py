"""GET /health through API Gateway, without credentials."""
import requests


def test_health_answers_without_a_key(local_env):
    answer = requests.get(local_env["KB_API_URL"] + "/health", timeout=30)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["success"] is True and body["data"]["status"] == "ok"
    for name in ("database", "redis", "bucket", "embedding"):
        assert body["data"]["checks"][name]["ok"] is True
