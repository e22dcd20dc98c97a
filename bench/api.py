"""Search through API Gateway on the emulator (HTTP → ministack → the API Lambda),
used by bench/retrieval.py at each corpus size, and throughput with concurrent clients.

The benchmark corpus lives in a database of its own (kb_bench); while it is timed
through the API, the deployed API Lambda is pointed at that database and Redis
database (`api_pointed_at`) and put back afterwards, so the tenants of the local
stack are never mixed with the synthetic corpus.
"""
import contextlib
import sys
import threading
import time

from common import ROOT, aws_client, local_env, percentile

sys.path.insert(0, str(ROOT / "infra"))

STRATEGIES = ("semantic", "keyword", "hybrid")
API_FUNCTION = "kb-service-api"


def _set_environment(client, variables: dict) -> None:
    from deploy import wait_until_updated

    client.update_function_configuration(FunctionName=API_FUNCTION, Environment={"Variables": variables})
    wait_until_updated(client, API_FUNCTION)


@contextlib.contextmanager
def api_pointed_at(database_url: str, redis_url: str):
    """The deployed API Lambda reads this database and Redis until the block ends
    (UpdateFunctionConfiguration recycles its warm workers both ways)."""
    client = aws_client("lambda")
    original = client.get_function_configuration(FunctionName=API_FUNCTION)["Environment"]["Variables"]
    _set_environment(client, {**original, "DATABASE_URL": database_url, "REDIS_URL": redis_url})
    try:
        yield
    finally:
        _set_environment(client, original)


@contextlib.contextmanager
def stage_unthrottled():
    """The deployed API's stage without its throttle until the block ends; yields the stage's
    own (requests/s, burst). The template's ApiThrottleRate/ApiThrottleBurst (200/s, bursts of
    400), which the emulator enforces, let a closed loop of T seconds make at most 400 + 200 T
    requests: 240/s over 10 s, 227/s over 15 s. Throughput measured under it is the cap's, and
    a faster build measured lower (the 4-client runs of issue 30 reported 176-231 req/s)."""
    url = local_env()["KB_API_URL"]
    api_id, stage = url.split("/restapis/", 1)[1].split("/")[:2]
    client = aws_client("apigateway")
    own = client.get_stage(restApiId=api_id, stageName=stage).get("methodSettings", {}).get("*/*", {})
    if own.get("throttlingRateLimit") is None or own.get("throttlingBurstLimit") is None:
        yield None, None  # no throttle to lift
        return

    def throttle(rate, burst) -> None:
        client.update_stage(restApiId=api_id, stageName=stage, patchOperations=[
            {"op": "replace", "path": "/*/*/throttling/rateLimit", "value": str(rate)},
            {"op": "replace", "path": "/*/*/throttling/burstLimit", "value": str(burst)}])

    throttle(100_000, 50_000)
    try:
        yield own.get("throttlingRateLimit"), own.get("throttlingBurstLimit")
    finally:
        throttle(own["throttlingRateLimit"], own["throttlingBurstLimit"])


def _timed_post(session, url: str, key: str, body: dict):
    """(milliseconds, the answer)."""
    started = time.perf_counter()
    answer = session.post(url, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    return (time.perf_counter() - started) * 1000, answer


def timed_search(session, url: str, key: str, body: dict) -> float:
    elapsed, answer = _timed_post(session, url, key, body)
    if answer.status_code != 200:
        raise SystemExit(f"search answered {answer.status_code}: {answer.text[:300]}")
    return elapsed


def search_url(kb_id: str) -> str:
    return f"{local_env()['KB_API_URL']}/knowledge-bases/{kb_id}/search"


def latency(kb_id: str, key: str, queries, redis_url: str) -> dict:
    """p50/p95/p99 per strategy through the API; a miss flushes the Redis database
    the Lambda caches query embeddings in, a hit searches the same query twice."""
    import redis
    import requests

    url, cache, session = search_url(kb_id), redis.Redis.from_url(redis_url), requests.Session()
    timed_search(session, url, key, {"query": "warm up", "strategy": "semantic"})
    out = {}
    for strategy in STRATEGIES:
        for cached in ((False,) if strategy == "keyword" else (False, True)):
            times = []
            for q in queries:
                body = {"query": q["text"], "topK": 10, "strategy": strategy}
                if cached:  # a semantic search caches the query's embedding, cheaply at any size
                    timed_search(session, url, key, {"query": q["text"], "topK": 1, "strategy": "semantic"})
                else:
                    cache.flushdb()
                times.append(timed_search(session, url, key, body))
            out[f"{strategy}/{'hit' if cached else 'miss'}"] = {
                "p50": percentile(times, 50), "p95": percentile(times, 95), "p99": percentile(times, 99)}
    # What reranking adds (issue 16): hybrid with rerank, query embeddings cached. The
    # emulator's Rerank keeps the order it is given, so this is the call's cost (the
    # candidates' texts out, the scores back), not a reranking model's.
    times = [timed_search(session, url, key, {"query": q["text"], "topK": 10, "strategy": "hybrid", "rerank": True})
             for q in queries]
    out["hybrid+rerank/hit"] = {"p50": percentile(times, 50), "p95": percentile(times, 95),
                                "p99": percentile(times, 99)}
    return out


def throughput(kb_id: str, key: str, queries, clients: int, seconds: float) -> dict:
    """Requests per second of cached semantic searches through the deployed API (closed_loop)."""
    return closed_loop(search_url(kb_id), key, semantic_bodies(queries), clients, seconds)


def semantic_bodies(queries) -> list[dict]:
    return [{"query": q["text"], "topK": 5, "strategy": "semantic"} for q in queries]


def closed_loop(url: str, key: str, bodies: list[dict], clients: int, seconds: float) -> dict:
    """Requests per second with `clients` threads posting `bodies` to `url` for `seconds` on warm
    workers: every thread first sends each body once, together (as many API workers as clients
    start then, and every query's embedding and answer is cached), and the clock starts once all
    have. This measures the warm service, not the model nor cold starts (cold_burst and
    bench/cold.py measure those): warmed by one client, the 16-client run used to start 12
    workers inside its 15 s (.kb/logs/ministack.log), each importing the app on a CPU the
    others were serving on (8.4 req/s, p95 22.6 s, load 7-12, bench/api_overhead.py).
    An answer other than 200 is counted by status (`refused`), not timed, and the client goes on:
    a client that stopped at its first 429 left fewer clients than the run says."""
    import requests

    times, refused, lock, clock = [], {}, threading.Lock(), {}
    warm = threading.Barrier(clients, action=lambda: clock.update(started=time.monotonic(),
                                                                   stop=time.monotonic() + seconds))

    def client(offset: int):
        session, i = requests.Session(), offset
        for body in bodies:
            timed_search(session, url, key, body)
        warm.wait()
        while time.monotonic() < clock["stop"]:
            elapsed, answer = _timed_post(session, url, key, bodies[i % len(bodies)])
            with lock:
                if answer.status_code == 200:
                    times.append(elapsed)
                else:
                    refused[answer.status_code] = refused.get(answer.status_code, 0) + 1
            i += 1

    threads = [threading.Thread(target=client, args=(n * 7,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - clock["started"]
    return {"clients": clients, "requests": len(times), "perSecond": len(times) / wall,
            "p50": percentile(times, 50), "p95": percentile(times, 95),
            "refused": {str(status): n for status, n in sorted(refused.items())}}


def cold_burst(kb_id: str, key: str, queries, clients: int) -> dict:
    """`clients` searches at once on freshly started API workers: an environment
    change recycles every warm worker (as a deploy or a scale-out does), then each
    request may start one. Errors are counted, not raised; each query is new, so
    its embedding is computed too."""
    import secrets

    import requests

    client = aws_client("lambda")
    variables = client.get_function_configuration(FunctionName=API_FUNCTION)["Environment"]["Variables"]
    _set_environment(client, {**variables, "BENCH_COLD_START": secrets.token_hex(4)})
    url, results, lock = search_url(kb_id), [], threading.Lock()

    def one(i: int):
        started = time.perf_counter()
        try:
            status = requests.post(url, json={"query": f"{queries[i % len(queries)]['text']} ({i})", "topK": 5},
                                   headers={"Authorization": f"Bearer {key}"}, timeout=120).status_code
        except requests.RequestException:
            status = 0
        with lock:
            results.append((status, (time.perf_counter() - started) * 1000))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times = [ms for _, ms in results]
    return {"clients": clients, "errors": sum(status != 200 for status, _ in results),
            "p50": percentile(times, 50), "p95": percentile(times, 95), "max": max(times)}
