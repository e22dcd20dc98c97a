"""The token buckets against the stack's real Redis, under concurrent bursts of threads:
per key and per organisation, the refusals carry Retry-After, a key's limits let its next
requests be refused before authentication, and Redis unreachable lets requests through
with a warning."""
import logging
import math
import secrets
import socket
import threading
import time

import pytest
import redis

from chalicelib import limits
from chalicelib.auth import Principal, throttle
from chalicelib.errors import Throttled
from chalicelib.kv import redis_client


@pytest.fixture
def clean_redis(service_env):
    throttle._scripts.clear()
    yield redis_client()
    redis_client().flushdb()


def _burst(calls) -> tuple[int, list[Throttled], float]:
    """Runs every call at once (threads released together); (allowed, refusals, seconds)."""
    start, lock = threading.Barrier(len(calls)), threading.Lock()
    allowed, refused = [0], []

    def run(call):
        start.wait()
        try:
            call()
        except Throttled as err:
            with lock:
                refused.append(err)
            return
        with lock:
            allowed[0] += 1

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return allowed[0], refused, time.monotonic() - began


def _principal(org: str, rate: int) -> Principal:
    return Principal(user_id="u", org_id=org, role="viewer", key_id=f"key_{secrets.token_hex(4)}",
                     rate_per_second=rate)


def test_one_key_gets_its_burst_and_the_rest_retry_after(clean_redis):
    # a slow refill (1 token a second) so the burst's own duration barely adds tokens
    principal, token = _principal(f"org-{secrets.token_hex(3)}", 1), f"kbk_{secrets.token_hex(8)}"
    burst = 1 * limits.KEY_BURST_SECONDS
    allowed, refused, seconds = _burst([lambda: throttle.take(principal, token)] * 30)
    assert burst <= allowed <= burst + math.ceil(seconds * 1)  # tokens refilled while it ran, if any
    assert len(refused) == 30 - allowed
    assert all(err.retry_after >= 1 and err.code == "THROTTLED" for err in refused)
    assert all("this API key may make 1 requests per second" in err.message for err in refused)


def test_an_organisation_shares_one_bucket_across_its_keys(clean_redis, monkeypatch):
    monkeypatch.setattr(limits, "ORG_RATE_PER_SECOND", 1)
    monkeypatch.setattr(limits, "ORG_BURST_SECONDS", 4)
    monkeypatch.setattr(limits, "KEY_BURST_SECONDS", 8)
    org = f"org-{secrets.token_hex(3)}"
    # six keys of 1 a second, each with a burst of 8 (its 8 calls always fit it), against the
    # organisation's 1 a second with a burst of 4: every refusal is the organisation's
    keys = [(_principal(org, 1), f"kbk_{secrets.token_hex(8)}") for _ in range(6)]
    calls = [lambda p=p, t=t: throttle.take(p, t) for p, t in keys for _ in range(8)]  # 48, 8 a key
    allowed, refused, seconds = _burst(calls)
    assert 4 <= allowed <= 4 + math.ceil(seconds * 1)
    assert len(refused) == 48 - allowed
    assert all("this organisation may make 1 requests per second" in err.message and err.retry_after >= 1
               for err in refused)
    # another organisation's keys are untouched by it
    other = _principal(f"org-{secrets.token_hex(3)}", 100)
    throttle.take(other, f"kbk_{secrets.token_hex(8)}")


def test_a_key_granted_more_than_its_organisation_lifts_the_organisation_to_its_rate(clean_redis, monkeypatch):
    monkeypatch.setattr(limits, "ORG_RATE_PER_SECOND", 1)
    monkeypatch.setattr(limits, "ORG_BURST_SECONDS", 2)
    principal, token = _principal(f"org-{secrets.token_hex(3)}", 10), f"kbk_{secrets.token_hex(8)}"
    allowed, refused, seconds = _burst([lambda: throttle.take(principal, token)] * 30)
    burst = 10 * limits.KEY_BURST_SECONDS  # the key's 20, not the organisation's 2
    assert burst <= allowed <= burst + math.ceil(seconds * 10)
    assert all("this API key may make 10 requests per second" in err.message for err in refused)


def test_a_known_key_is_refused_before_authentication(clean_redis):
    principal, token = _principal(f"org-{secrets.token_hex(3)}", 1), f"kbk_{secrets.token_hex(8)}"
    assert throttle.check(token, None, None).taken is False  # never seen: authenticate first
    throttle.take(principal, token)  # remembers its rate and organisation
    allowed, refused, seconds = _burst([lambda: throttle.check(token, None, None)] * 20)
    assert 1 <= allowed <= 1 + math.ceil(seconds * 1)  # the burst of 2 less the one taken above
    assert len(refused) == 20 - allowed
    stored = b"".join(clean_redis.keys("kb:rate:*"))
    assert token.encode() not in stored  # Redis holds a digest, not the key


def test_a_caller_the_worker_remembers_takes_its_token_in_the_same_round_trip(clean_redis, monkeypatch):
    principal, token = _principal(f"org-{secrets.token_hex(3)}", 1), f"kbk_{secrets.token_hex(8)}"
    round_trips, execute = [], redis.client.Pipeline.execute
    monkeypatch.setattr(redis.client.Pipeline, "execute", lambda pipe, *a, **k: round_trips.append(1) or
                        execute(pipe, *a, **k))
    checked = throttle.check(token, "203.0.113.7", principal)
    assert checked.taken and checked.keys_generation == "" and len(round_trips) == 1
    allowed, refused, seconds = _burst([lambda: throttle.check(token, "203.0.113.7", principal)] * 20)
    assert 1 <= allowed <= 1 + math.ceil(seconds * 1)  # the burst of 2 less the one taken above
    assert refused and all(err.retry_after >= 1 for err in refused)
    clean_redis.script_flush()  # the script meets NOSCRIPT in the pipeline: loaded again
    with pytest.raises(Throttled):
        throttle.check(token, None, principal)
    assert clean_redis.hget(f"kb:rate:{{{principal.org_id}}}:key:{throttle.token_digest(token)}", "tokens")


def test_an_address_sending_bad_keys_is_refused_in_the_same_round_trip(clean_redis, monkeypatch):
    monkeypatch.setenv("BAD_KEYS_PER_MINUTE", "3")
    source = f"198.51.100.{secrets.randbelow(250)}"
    for _ in range(3):
        throttle.count_bad_key(source)
    with pytest.raises(Throttled, match="keys that are not valid"):
        throttle.check(f"kbk_{secrets.token_hex(8)}", source, None)
    assert throttle.check(f"kbk_{secrets.token_hex(8)}", "198.51.100.251", None).taken is False


def test_bad_keys_of_the_last_minute_still_count_after_it_ends(clean_redis, monkeypatch):
    from types import SimpleNamespace

    monkeypatch.setenv("BAD_KEYS_PER_MINUTE", "20")
    source = f"198.51.100.{secrets.randbelow(250)}"
    minute = (int(time.time()) // 60 + 1) * 60
    monkeypatch.setattr(throttle, "time", SimpleNamespace(time=lambda: minute - 0.5))
    for _ in range(21):  # 21 guesses in the last half second of a minute
        throttle.count_bad_key(source)
    monkeypatch.setattr(throttle, "time", SimpleNamespace(time=lambda: minute + 0.5))
    with pytest.raises(Throttled, match="keys that are not valid") as refused:  # and the next minute has begun
        throttle.check(f"kbk_{secrets.token_hex(8)}", source, None)
    assert refused.value.retry_after == 3  # 21 * (60 - t)/60 < 20 from t = 2.9 s
    monkeypatch.setattr(throttle, "time", SimpleNamespace(time=lambda: minute + 4))
    assert throttle.check(f"kbk_{secrets.token_hex(8)}", source, None).taken is False


def test_the_sliding_estimate_and_its_wait():
    seen, wait = throttle.bad_keys_seen(0, 20, 0.5)  # just after the minute turned
    assert seen > 19.8 and wait == 1
    # a whole second past the moment the estimate falls to the limit, where it is still refused
    seen, wait = throttle.bad_keys_seen(20, 0, 10)  # twenty this minute, ten seconds in
    assert seen == 20 and wait == 51
    seen, wait = throttle.bad_keys_seen(40, 0, 10)  # twice over: half of the next minute too
    assert seen == 40 and wait == 50 + 30 + 1
    seen, wait = throttle.bad_keys_seen(10, 20, 30)  # 10 + 20 * 30/60 = 20: refused until 20 * (60-t)/60 < 10
    assert seen == 20 and wait == 1
    seen, wait = throttle.bad_keys_seen(5, 30, 6)  # 5 + 27 = 32: until 30 * (60-t)/60 < 15, t > 30
    assert seen == 32 and wait == 25
    assert throttle.bad_keys_seen(3, 0, 59)[0] == 3


def test_the_script_is_loaded_again_after_a_script_flush(clean_redis):
    principal, token = _principal(f"org-{secrets.token_hex(3)}", 5), f"kbk_{secrets.token_hex(8)}"
    throttle.take(principal, token)
    clean_redis.script_flush()  # as a failover to a new node would: EVALSHA meets NOSCRIPT
    throttle.take(principal, token)
    assert clean_redis.hget(f"kb:rate:{{{principal.org_id}}}:key:{throttle.token_digest(token)}", "tokens")


def test_the_route_answers_429_with_retry_after_before_the_database(service_env, monkeypatch):
    from types import SimpleNamespace

    from chalicelib.api.http import authenticated
    from chalicelib.auth import issue_key, keys

    principal, token = issue_key(f"org-{secrets.token_hex(4)}", "alice", rate_per_second=1)
    request = SimpleNamespace(context={"identity": {"sourceIp": "203.0.113.9"}},
                              headers={"authorization": f"Bearer {token}"})
    view = authenticated(SimpleNamespace(current_request=request))(lambda caller: {"org": caller.org_id})
    assert view() == {"org": principal.org_id}  # authenticated, and its limits remembered
    lookups, find = [], keys._find_principal
    monkeypatch.setattr(keys, "_find_principal", lambda key: lookups.append(key) or find(key))
    answers = []
    for _ in range(limits.KEY_BURST_SECONDS + 1):  # a burst of 2 at 1 a second
        keys._remembered.clear()  # as a worker that never saw the key: its limits from Redis
        answers.append(view())
    refused = [a for a in answers if not isinstance(a, dict)]
    assert refused and all(a.status_code == 429 and int(a.headers["Retry-After"]) >= 1 for a in refused)
    assert len(lookups) == len(answers) - len(refused)  # only the allowed ones reached the database


def test_redis_unreachable_lets_requests_through_with_a_warning(service_env, monkeypatch, caplog):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("REDIS_URL", f"redis://127.0.0.1:{port}/0")
    principal, token = _principal("org-x", 1), f"kbk_{secrets.token_hex(8)}"
    with caplog.at_level(logging.WARNING, logger="chalicelib.auth.throttle"):
        checked = throttle.check(token, "203.0.113.9", principal)
        assert checked.taken and checked.keys_generation is None  # decided: not limited, nothing remembered
        for _ in range(5):  # over the burst of 2: not limited
            throttle.take(principal, token)
    assert "rate limiter unavailable, not limiting" in caplog.text
    assert isinstance(redis_client(), redis.Redis)


def test_what_a_view_reads_ahead_comes_with_the_check_and_a_key_that_fails_there_limits_nothing_less(clean_redis):
    """check()'s `ahead` keys ride in its round trip; one whose GET fails (a key of another type)
    is left out for the view to read, and the bucket is still taken from and still refuses."""
    principal, token = _principal(f"org-{secrets.token_hex(3)}", 1), f"kbk_{secrets.token_hex(8)}"
    clean_redis.script_flush()  # the first check loads the script again (NOSCRIPT) and keeps what it read
    clean_redis.set("kb:test:ahead", b"answer")
    clean_redis.hset("kb:test:hash", "field", "value")  # a GET of it fails with WRONGTYPE
    ahead = ("kb:test:ahead", "kb:test:absent", "kb:test:hash")
    checked = [throttle.check(token, "198.51.100.7", principal, ahead)
               for _ in range(int(limits.KEY_BURST_SECONDS))]  # the key's whole burst at 1 a second
    assert {c.taken for c in checked} == {True}
    assert checked[0].ahead == {"kb:test:ahead": b"answer", "kb:test:absent": None}
    with pytest.raises(Throttled):
        throttle.check(token, "198.51.100.7", principal, ahead)
