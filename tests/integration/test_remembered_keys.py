"""A worker remembers the caller a key names (auth/keys.py) and asks the database again
when the keys' generation in Redis moved: a revocation, a rotation or a role change made
through any worker is seen at the next request of every other one."""
import secrets
import socket
from types import SimpleNamespace

import pytest

from chalicelib import limits
from chalicelib.api.http import authenticated
from chalicelib.auth import issue_key, keys


@pytest.fixture
def route(service_env, monkeypatch):
    """(call the route with a key: its status, the database lookups it made)."""
    lookups, find = [], keys._find_principal
    monkeypatch.setattr(keys, "_find_principal", lambda digest: lookups.append(digest) or find(digest))

    def call(token: str) -> tuple[int, int]:
        request = SimpleNamespace(context={"identity": {"sourceIp": "203.0.113.20"}},
                                  headers={"authorization": f"Bearer {token}"})
        view = authenticated(SimpleNamespace(current_request=request))(lambda caller: {"role": caller.role})
        before = len(lookups)
        answer = view()
        return (200 if isinstance(answer, dict) else answer.status_code), len(lookups) - before

    return call


def _another_worker_revokes(revoke) -> None:
    """What this process remembers survives the revocation, as in a worker that did not make it."""
    kept = dict(keys._remembered)
    revoke()
    keys._remembered.update(kept)


def test_a_remembered_key_skips_the_database_until_revoked_anywhere(route):
    admin, token = issue_key(f"org-{secrets.token_hex(4)}", "ada")
    assert route(token) == (200, 1)
    assert route(token) == (200, 0)  # remembered under the generation it read
    _another_worker_revokes(lambda: keys.revoke_key(admin, admin.key_id))
    assert keys._remembered  # still held here; the generation says it is stale
    assert route(token) == (401, 1)


def test_a_rotated_key_is_refused_at_its_next_request(route):
    admin, token = issue_key(f"org-{secrets.token_hex(4)}", "ada")
    assert route(token)[0] == 200
    rotated = []
    _another_worker_revokes(lambda: rotated.append(keys.rotate_key(admin, admin.key_id)))
    assert route(token) == (401, 1)
    assert route(rotated[0].key) == (200, 1)


def test_a_role_change_is_seen_at_the_next_request(route, service_env):
    org = f"org-{secrets.token_hex(4)}"
    issue_key(org, "ada")
    _, token = issue_key(org, "ed", role="editor")
    assert route(token)[0] == 200
    _another_worker_revokes(lambda: issue_key(org, "ed", role="viewer"))
    request = SimpleNamespace(context={}, headers={"authorization": f"Bearer {token}"})
    view = authenticated(SimpleNamespace(current_request=request))(lambda caller: caller.role)
    assert view() == "viewer"


def test_a_caller_is_remembered_only_for_a_few_seconds(route, monkeypatch):
    _, token = issue_key(f"org-{secrets.token_hex(4)}", "ada")
    monkeypatch.setattr(limits, "KEY_REMEMBERED_SECONDS", 0)
    # each time ended at once: asked again (what an expiry, which Redis cannot announce, relies on)
    assert [route(token) for _ in range(3)] == [(200, 1)] * 3


def test_without_redis_every_request_asks_the_database(route, monkeypatch):
    _, token = issue_key(f"org-{secrets.token_hex(4)}", "ada")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{port}/0")
    assert [route(token) for _ in range(3)] == [(200, 1)] * 3  # no generation to remember it under


def test_kb_search_refuses_a_revoked_key_it_remembered(service_env):
    from chalicelib.api.direct_invoke import handle_kb_search

    admin, token = issue_key(f"org-{secrets.token_hex(4)}", "ada")
    event = {"apiKey": token, "knowledgeBaseId": "kb_nowhere", "query": "q"}
    assert handle_kb_search(event)["error"]["status"] == 404  # authenticated: the knowledge base is not there
    assert keys.remembered(token) == admin
    _another_worker_revokes(lambda: keys.revoke_key(admin, admin.key_id))
    assert handle_kb_search(event)["error"]["status"] == 401


def test_a_broken_path_id_from_a_remembered_caller_is_a_400_not_a_redis_key(service_env):
    """What a route reads ahead is named from its path: an id with broken Unicode is refused as
    the view would refuse it, never sent to Redis (where encoding it failed: a 500)."""
    _, token = issue_key(f"org-{secrets.token_hex(4)}", "ada")
    request = SimpleNamespace(context={}, headers={"authorization": f"Bearer {token}"}, raw_body=b"{}")
    view = authenticated(SimpleNamespace(current_request=request),
                         reads=lambda caller, _request, params: (f"kb:test:{params['kb_id']}",))(
        lambda caller, kb_id: {"kb": kb_id})
    assert view(kb_id="kb_fine") == {"kb": "kb_fine"}  # the caller is remembered from here on
    answer = view(kb_id="kb_\udc80")
    assert answer.status_code == 400 and "kb_id" in answer.body, answer.body
