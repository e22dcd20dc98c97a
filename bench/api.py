"""Search through API Gateway on the emulator (HTTP → ministack → Lambda), and
throughput with 1, 4 and 16 concurrent clients.

    .venv/bin/python bench/api.py [--quick]

Loads SciFact into the running stack's own database once (a "bench" organisation),
then times HTTP searches. Throughput runs use cached query embeddings and last a
bounded number of seconds per level.
"""
import argparse
import os
import threading
import time

from common import corpus, local_env, percentile, queries_and_qrels, quiet_metrics, save_results

STRATEGIES = ("semantic", "keyword", "hybrid")


def prepare(docs) -> tuple[str, str]:
    """(knowledge base id, API key) of the bench tenant, loading the corpus once."""
    env = local_env()
    os.environ["DATABASE_URL"], os.environ["REDIS_URL"] = env["DATABASE_URL"], env["REDIS_URL"]
    quiet_metrics()
    import retrieval
    from chalicelib.auth import issue_key
    from chalicelib.knowledge_bases import create_knowledge_base
    from chalicelib.storage import connection

    principal, key = issue_key("bench-api", "bench")
    name = f"SciFact bench ({len(docs)})"
    with connection() as conn:
        row = conn.execute("SELECT id FROM knowledge_bases WHERE owner_id = %s AND name = %s",
                           (principal.user_id, name)).fetchone()
    if row:
        return row["id"], key
    kb = create_knowledge_base(principal, name=name, description="benchmark corpus")
    retrieval.load(kb, docs)
    return kb["id"], key


def timed_search(session, url: str, key: str, body: dict) -> float:
    started = time.perf_counter()
    answer = session.post(url, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    if answer.status_code != 200:
        raise SystemExit(f"search answered {answer.status_code}: {answer.text[:300]}")
    return elapsed


def latency(kb_id: str, key: str, queries) -> dict:
    import redis
    import requests

    env = local_env()
    url = f"{env['KB_API_URL']}/knowledge-bases/{kb_id}/search"
    cache = redis.Redis.from_url(env["REDIS_URL"])
    session = requests.Session()
    timed_search(session, url, key, {"query": "warm up", "strategy": "semantic"})
    out = {}
    for strategy in STRATEGIES:
        for cached in ((False,) if strategy == "keyword" else (False, True)):
            times = []
            for q in queries:
                body = {"query": q["text"], "topK": 10, "strategy": strategy}
                if cached:
                    timed_search(session, url, key, body)
                else:
                    cache.flushdb()
                times.append(timed_search(session, url, key, body))
            out[f"{strategy}/{'hit' if cached else 'miss'}"] = {
                "p50": percentile(times, 50), "p95": percentile(times, 95), "p99": percentile(times, 99)}
    return out


def throughput(kb_id: str, key: str, queries, clients: int, seconds: float) -> dict:
    import requests

    url = f"{local_env()['KB_API_URL']}/knowledge-bases/{kb_id}/search"
    bodies = [{"query": q["text"], "topK": 5, "strategy": "semantic"} for q in queries]
    warm = requests.Session()
    for body in bodies:  # every query embedding cached: this measures the service, not the model
        timed_search(warm, url, key, body)
    times, lock, stop = [], threading.Lock(), time.monotonic() + seconds

    def client(offset: int):
        session, i = requests.Session(), offset
        while time.monotonic() < stop:
            elapsed = timed_search(session, url, key, bodies[i % len(bodies)])
            with lock:
                times.append(elapsed)
            i += 1

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(n * 7,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    return {"clients": clients, "requests": len(times), "perSecond": len(times) / wall,
            "p50": percentile(times, 50), "p95": percentile(times, 95)}


def main(quick: bool = False) -> dict:
    docs = corpus(200 if quick else None)
    queries, _ = queries_and_qrels({d["_id"] for d in docs})
    kb_id, key = prepare(docs)
    sample = queries[: 10 if quick else 50]
    results = {"latency": latency(kb_id, key, sample), "throughput": []}
    print(f"through API Gateway on the emulator, {len(docs)} abstracts:")
    print(f"{'strategy':10} {'cache':6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for label, r in results["latency"].items():
        strategy, cache = label.split("/")
        print(f"{strategy:10} {cache:6} {r['p50']:8.1f} {r['p95']:8.1f} {r['p99']:8.1f}")
    print(f"\n{'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8}")
    for clients in (1, 4, 16):
        row = throughput(kb_id, key, sample[:20], clients, 3 if quick else 15)
        results["throughput"].append(row)
        print(f"{clients:7d} {row['perSecond']:8.1f} {row['p50']:8.1f} {row['p95']:8.1f}")
    save_results("api", quick, results)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    main(parser.parse_args().quick)
