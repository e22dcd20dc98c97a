"""The API's own overhead: where a warm, cached semantic search spends its time outside
the search, service-side, and what the emulated API Gateway then serves.

    .venv/bin/python bench/api_overhead.py [--quick] [--requests 400] [--gateway] [--seconds 15]
                                           [--floor] [--floor-seconds 5]

Needs the local stack (`make up`); works in the benchmark database (kb_bench) and Redis
database 14, as bench/retrieval.py does, over 200 SciFact abstracts (20 with --quick: a
cached answer does not depend on the corpus's size).

- in process: the Chalice app driven through Chalice's test client (routing, middleware,
  authentication, rate limit, the organisation's database setting, the results cache,
  the retrieval event, the view), logged in as the functions' kb_app, every answer
  from the results cache (each query searched once first). Per stage (exclusive of the
  stages it calls) the median and p95 per request, and the Redis round trips and SQL
  statements per request, counted by wrapping redis-py and psycopg in this process;
- --gateway: requests per second through API Gateway on the emulator with 1, 4 and 16
  clients (bench/api.py's throughput, the deployed API pointed at this database);
- --floor: the same closed loop against throwaway functions that only answer, one printing the
  log line our API prints per search, one printing nothing (bench/gateway_floor.py): what the
  emulator itself allows, beside our figures.
"""
import argparse
import functools
import json
import os
import statistics
import sys
import time
from contextlib import contextmanager, redirect_stdout

from common import aws_client, corpus, fresh_database, percentile, queries_and_qrels, save_results

# name -> (module, attribute): each wrapped in place while a request runs; the time of a
# stage excludes the stages it calls, so the stages and "other" add up to the request.
STAGES = {
    # before the one round trip (commit e88e32f), and since: a stage the code lacks is left out
    "bad-key check": ("chalicelib.auth.throttle", "refuse_if_guessing"),
    "rate limit": ("chalicelib.auth.throttle", "take_before_authentication"),
    "Redis round trip (bad keys, keys' generation, rate limit, the answer read ahead)":
        ("chalicelib.auth.throttle", "check"),
    "rate limit (after lookup)": ("chalicelib.auth.throttle", "take"),
    "key lookup": ("chalicelib.api.http", "authenticate"),
    "key lookup (remembered or not)": ("chalicelib.auth.keys", "authenticate"),
    "organisation setting": ("chalicelib.storage.db", "_act_for"),
    "connection": ("chalicelib.storage.db", "_current"),
    "body": ("chalicelib.api.search", "json_body"),
    "knowledge-base access": ("chalicelib.storage.knowledge_bases", "visible_by_ids"),
    "knowledge-base access (remembered, else read)": ("chalicelib.auth.access", "searchable"),
    "results cache": ("chalicelib.retrieval.results_cache", "cache_key"),
    "results cache read": ("chalicelib.retrieval.results_cache", "cached_result"),
    "results cache (read ahead, else one round trip)": ("chalicelib.retrieval.results_cache", "lookup"),
    "search itself": ("chalicelib.retrieval.search", "_search"),
    "retrieval event": ("chalicelib.metrics", "record_search"),
    "view": ("chalicelib.api.search", "search_view"),
    "serialisation": ("chalicelib.api.search", "ok"),
}


class Tally:
    """Per request: exclusive seconds per stage, Redis round trips, SQL statements."""

    def __init__(self):
        self.stack: list[list] = []  # [name, started, seconds in callees]
        self.seconds: dict[str, float] = {}
        self.redis = self.sql = 0

    def reset(self) -> None:
        self.stack, self.seconds, self.redis, self.sql = [], {}, 0, 0

    def timed(self, name: str, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            self.stack.append([name, time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                _, started, inner = self.stack.pop()
                spent = time.perf_counter() - started
                self.seconds[name] = self.seconds.get(name, 0.0) + spent - inner
                if self.stack:
                    self.stack[-1][2] += spent
        return wrapper


@contextmanager
def instrumented(tally: Tally):
    """The stages wrapped, and every Redis command (a pipeline: one) and SQL statement counted."""
    import importlib

    import psycopg
    import redis
    import redis.client

    saved = []

    def patch(owner, attr, value):
        saved.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, value)

    for name, (module, attr) in STAGES.items():
        owner = importlib.import_module(module)
        if hasattr(owner, attr):
            patch(owner, attr, tally.timed(name, getattr(owner, attr)))

    def counting(kind, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            setattr(tally, kind, getattr(tally, kind) + 1)
            return fn(*args, **kwargs)
        return wrapper

    patch(redis.Redis, "execute_command", counting("redis", redis.Redis.execute_command))
    patch(redis.client.Pipeline, "execute", counting("redis", redis.client.Pipeline.execute))
    patch(psycopg.Cursor, "execute", counting("sql", psycopg.Cursor.execute))
    try:
        yield
    finally:
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)


def setup(docs: list[dict]):
    from chalicelib.auth import issue_key
    from chalicelib.knowledge_bases import create_knowledge_base
    from retrieval import load

    fresh_database()
    principal, key = issue_key("bench", "bench", rate_per_second=1_000_000)  # the service, not the limit
    kb = create_knowledge_base(principal, name="SciFact", description="BEIR SciFact subset")
    load(kb, docs)
    return principal, key, kb


def in_process(kb: dict, key: str, queries: list[dict], requests: int) -> dict:
    """Per-stage medians and p95 (ms) of warm, cached semantic searches through the app."""
    from chalice.test import Client

    from chalicelib.storage import db

    os.environ["DATABASE_URL"] = db.functions_login(os.environ["DATABASE_URL"])
    os.environ["DATABASE_TIMEOUTS"] = "api"  # as the API function runs (infra/template.yaml)
    db.reset()
    from app import app

    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    bodies = [json.dumps({"query": q["text"], "topK": 5, "strategy": "semantic"}) for q in queries]
    path = f"/knowledge-bases/{kb['id']}/search"
    tally, rows = Tally(), []
    # The EMF lines the service prints (stdout is the function's log) go nowhere here.
    with Client(app) as client, open(os.devnull, "w") as sink, redirect_stdout(sink):
        def one(body: str) -> float:
            started = time.perf_counter()
            answer = client.http.post(path, headers=headers, body=body)
            elapsed = time.perf_counter() - started
            if answer.status_code != 200:
                raise SystemExit(f"search answered {answer.status_code}: {answer.body[:300]}")
            return elapsed

        for body in bodies * 2:  # the embeddings, then the answers, cached
            one(body)
        with instrumented(tally):
            for i in range(requests):
                tally.reset()
                total = one(bodies[i % len(bodies)])
                staged = dict(tally.seconds)
                staged["other (routing, middleware, test client)"] = total - sum(staged.values())
                rows.append({"total": total, "stages": staged, "redis": tally.redis, "sql": tally.sql})
    if any(r["stages"].get("search itself") for r in rows):
        raise SystemExit("a search missed the results cache: the figures would not be of cached answers")
    names = [n for n in [*STAGES, "other (routing, middleware, test client)"]
             if any(n in r["stages"] for r in rows)]

    def ms(values):
        return {"p50": statistics.median(values) * 1000, "p95": percentile(values, 95) * 1000}

    return {"requests": len(rows), "total": ms([r["total"] for r in rows]),
            "stages": [{"stage": n, **ms([r["stages"].get(n, 0.0) for r in rows])} for n in names],
            "redisRoundTrips": statistics.median(r["redis"] for r in rows),
            "sqlStatements": statistics.median(r["sql"] for r in rows)}


def gate(runs: int) -> dict:
    """What the results cache's gate costs the search that finds it lapsed (freshness.reopen: the
    changes Redis missed marked, the gate set; once per limits.RESULTS_CACHE_GATE_SECONDS): ms, with
    nothing noted and with 20 knowledge bases' changes noted while Redis was away."""
    from chalicelib import freshness
    from chalicelib.kv import redis_client
    from chalicelib.storage import connection, unmarked_changes

    timings = {}
    for noted in (0, 20):
        values = []
        for _ in range(runs):
            with connection() as conn:
                unmarked_changes.note(conn, [f"kb_gate{i:02d}" for i in range(noted)])
            redis_client().delete(freshness.GATE)
            started = time.perf_counter()
            if not freshness.reopen():
                raise SystemExit("the results cache's gate could not be opened")
            values.append(time.perf_counter() - started)
        timings[noted] = {"p50": statistics.median(values) * 1000, "p95": percentile(values, 95) * 1000}
    return {"runs": runs, "noted0": timings[0], "noted20": timings[20]}


def gateway(kb: dict, key: str, queries: list[dict], seconds: float) -> list[dict]:
    """Our API's closed loop at 1, 4 and 16 clients, its stage's throttle lifted (api.stage_unthrottled)."""
    import api

    with api.api_pointed_at(os.environ["DATABASE_URL"], os.environ["REDIS_URL"]), api.stage_unthrottled():
        return [api.throughput(kb["id"], key, queries, clients, seconds) for clients in (1, 4, 16)]


def floor(kb: dict, key: str, queries: list[dict], seconds: float) -> list[dict]:
    """gateway()'s closed loop, same bodies and client counts, against bench/gateway_floor.py's functions."""
    import api
    from gateway_floor import floor_apis

    load, bodies = load_average(), api.semantic_bodies(queries)
    with floor_apis(answer_bytes(kb, key, bodies)) as urls:
        return [{"function": variant, "load": load, **api.closed_loop(url, key, bodies, clients, seconds)}
                for clients in (1, 4, 16) for variant, url in urls.items()]


def answer_bytes(kb: dict, key: str, bodies: list[dict]) -> int:
    """The median size of our API's answers to these bodies, through the gateway."""
    import api
    import requests

    with api.api_pointed_at(os.environ["DATABASE_URL"], os.environ["REDIS_URL"]), requests.Session() as session:
        sizes = [len(session.post(api.search_url(kb["id"]), json=body, headers={"Authorization": f"Bearer {key}"},
                                  timeout=120).content) for body in bodies]
    return int(statistics.median(sizes))


def print_gateway(results: dict) -> None:
    """Per client count, our API's req/s, p50 and p95 ms beside each floor function's, as measured."""
    columns = {"our API": results.get("gateway", [])}
    for row in results.get("gatewayFloor", []):
        columns.setdefault(f"floor, {row['function']}", []).append(row)
    columns = {name: {row["clients"]: row for row in rows} for name, rows in columns.items() if rows}
    print(f"\nthrough API Gateway (cached answers; load {results['loadBefore']}): req/s, p50 ms, p95 ms")
    widths = {name: max(24, len(name)) for name in columns}
    print(f"{'clients':>7} " + " ".join(f"{name:>{widths[name]}}" for name in columns))
    for clients in (1, 4, 16):
        cells = []
        for name, rows in columns.items():
            row = rows.get(clients)
            cells.append(f"{row['perSecond']:{widths[name] - 16}.1f}{row['p50']:8.1f}{row['p95']:8.1f}" if row
                         else f"{'':{widths[name]}}")
        print(f"{clients:7d} " + " ".join(cells))


def alternating(kb: dict, key: str, queries: list[dict], seconds: float, zips: list[str], rounds: int) -> list[dict]:
    """Each code zip in turn as the API function's (UpdateFunctionCode recycles its workers), each
    measured as gateway() does, `rounds` times: two builds compared on the same loaded machine
    within minutes of each other. The last zip stays deployed. Main (6b10b6a) against issue 30's
    branch (d0eb8f7), 3 rounds of 10 s, load average 7-15: mean 45.0 / 92.0 / 105.3 against
    65.3 / 135.5 / 188.3 req/s at 1 / 4 / 16 clients (the branch's best round 80.9 / 192.9 / 209.7)."""
    from pathlib import Path

    import api
    from deploy import wait_until_updated

    client, rows = aws_client("lambda"), []
    for n in range(rounds):
        for path in zips:
            client.update_function_code(FunctionName=api.API_FUNCTION, ZipFile=Path(path).read_bytes())
            wait_until_updated(client, api.API_FUNCTION)
            load = load_average()
            for row in gateway(kb, key, queries, seconds):
                rows.append({"round": n + 1, "code": Path(path).name, "load": load, **row})
                print(f"round {n + 1} {Path(path).name:24} {row['clients']:3d} clients {row['perSecond']:7.1f} req/s"
                      f"  p50 {row['p50']:6.1f}  p95 {row['p95']:6.1f} ms  (load {load})", flush=True)
    return rows


def report(results: dict) -> str:
    """The docs/benchmarks.md section (bench/report.py)."""
    lines = [f"A warm semantic search answered from the results cache, through the Chalice app in process "
             f"(routing, middleware, authentication, rate limit, the organisation's database setting, the results "
             f"cache, the retrieval event, the view), logged in as `kb_app`; {results['requests']} requests, load "
             f"average {results['loadBefore']} before and {results['loadAfter']} after. Each stage's time excludes "
             f"the stages it calls. A request made **{results['redisRoundTrips']:g} Redis round trips and "
             f"{results['sqlStatements']:g} SQL statement{'' if results['sqlStatements'] == 1 else 's'}** (one round trip: "
             "remembered key callers and remembered views of the knowledge bases, `access.searchable`).", "", "| stage | p50 ms | p95 ms |", "|---|---|---|"]
    lines += [f"| {r['stage']} | {r['p50']:.3f} | {r['p95']:.3f} |" for r in results["stages"]]
    lines.append(f"| **request** | **{results['total']['p50']:.3f}** | **{results['total']['p95']:.3f}** |")
    if results.get("gate"):
        g = results["gate"]
        lines += ["", f"The results cache's gate is read in that same round trip. The search that finds it lapsed "
                      f"(once every {results.get('gateSeconds', '?')} s per deployment) first marks the changes Redis "
                      f"missed and opens it again: p50 {g['noted0']['p50']:.2f} / p95 {g['noted0']['p95']:.2f} ms with "
                      f"none noted, {g['noted20']['p50']:.2f} / {g['noted20']['p95']:.2f} ms with 20 knowledge bases' "
                      f"changes noted ({g['runs']} runs each)."]
    if results.get("gateway"):
        lines += ["", *gateway_table(results)]
    return "\n".join(lines)


def gateway_table(results: dict) -> list[str]:
    """Our API through the emulated gateway beside the floor functions of the same run (--floor)."""
    floors = {}
    for row in results.get("gatewayFloor", []):
        floors.setdefault(row["function"], {})[row["clients"]] = row
    # the floor that differs from our API only by the service's own work, where this run has it
    fair = next((name for name in ("one log line, our answer's size", "one log line") if name in floors), "one log line")
    lines = [f"Through API Gateway on the emulator, cached answers, {results.get('gatewaySeconds', '?')} s per client "
             "count (`--gateway`); beside it (`--floor`) functions that only answer: one printing the log line ours "
             "prints a search, one that also answers as many bytes as ours does, one silent; what ministack itself "
             "allows (it holds a worker until its stderr has been quiet 5 ms after each answer, 50 ms when nothing "
             "came). Our API's stage throttle (ApiThrottleRate/ApiThrottleBurst: 200/s, bursts of 400) is lifted for "
             "the run (`api.stage_unthrottled`): under it 10-15 s of a closed loop make at most 227-240 requests/s, "
             "the cap's figure, not the service's. Requests/s, p50 / p95 ms.", "",
             "| clients | our API | " + " | ".join(f"floor, {name}" for name in floors) + f" | ours / floor ({fair}) |",
             "|---|---|" + "---|" * len(floors) + "---|"]
    for row in results["gateway"]:
        cells = [f"{r['perSecond']:.1f} ({r['p50']:.1f} / {r['p95']:.1f})" if r else "-"
                 for r in (f.get(row["clients"]) for f in floors.values())]
        floor = floors.get(fair, {}).get(row["clients"])
        ratio = f"{row['perSecond'] / floor['perSecond']:.2f}" if floor else "-"
        lines.append(f"| {row['clients']} | **{row['perSecond']:.1f}** ({row['p50']:.1f} / {row['p95']:.1f}) | "
                     + " | ".join(cells) + f" | {ratio} |")
    refused = [f"{row['clients']} clients: " + ", ".join(f"{n} × {status}" for status, n in row["refused"].items())
               for row in results["gateway"] if row.get("refused")]
    if refused:
        lines += ["", "Answers other than 200 (counted, not timed): " + "; ".join(refused) + "."]
    return lines


def figures(results: dict) -> dict:
    """benchmarks.json's apiOverhead."""
    return {"requests": results["requests"], "redisRoundTrips": results["redisRoundTrips"],
            "sqlStatements": results["sqlStatements"], "p50Ms": results["total"]["p50"],
            "p95Ms": results["total"]["p95"],
            "stages": [{"stage": r["stage"], "p50Ms": r["p50"], "p95Ms": r["p95"]} for r in results["stages"]],
            "load": [results["loadBefore"], results["loadAfter"]],
            "gate": results.get("gate"),
            "gateway": [{"clients": r["clients"], "perSecond": r["perSecond"], "p50Ms": r["p50"], "p95Ms": r["p95"],
                         "refused": r.get("refused", {})}
                        for r in results.get("gateway", [])],
            "gatewayFloor": [{"function": r["function"], "clients": r["clients"], "perSecond": r["perSecond"],
                              "p50Ms": r["p50"], "p95Ms": r["p95"]} for r in results.get("gatewayFloor", [])]}


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer requests: checks the harness runs")
    parser.add_argument("--requests", type=int, default=400, help="in-process requests measured")
    parser.add_argument("--gateway", action="store_true", help="also requests/s through API Gateway")
    parser.add_argument("--seconds", type=float, default=15, help="seconds per gateway client count")
    parser.add_argument("--floor", action="store_true",
                        help="also requests/s of do-nothing functions through API Gateway: the emulator's floor")
    parser.add_argument("--floor-seconds", type=float, default=5,
                        help="seconds per floor function and client count (six such runs)")
    parser.add_argument("--alternate", nargs="+", metavar="ZIP",
                        help="code zips (build/local/deployment.zip of each build) measured in turn instead")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --alternate")
    args = parser.parse_args()
    docs = corpus(20 if args.quick else 200)
    queries = queries_and_qrels({d["_id"] for d in docs})[0][:20]
    from chalicelib import metrics

    events = metrics.count_lookup, metrics.record_search
    principal, key, kb = setup(docs)
    metrics.count_lookup, metrics.record_search = events  # quieted by fresh_database; their cost counts here
    owner_url = os.environ["DATABASE_URL"]
    results = {"loadBefore": load_average()}
    if args.alternate:
        results["alternating"] = alternating(kb, key, queries, args.seconds, args.alternate, args.rounds)
        save_results("api_overhead_alternating", args.quick, results)
        return results
    if args.gateway:
        results["gatewaySeconds"] = 1 if args.quick else args.seconds
        results["gateway"] = gateway(kb, key, queries, results["gatewaySeconds"])
    if args.floor:
        results["gatewayFloor"] = floor(kb, key, queries, 1 if args.quick else args.floor_seconds)
    if args.gateway or args.floor:
        print_gateway(results)
    results.update(in_process(kb, key, queries, 40 if args.quick else args.requests))
    results["loadAfter"] = load_average()
    from chalicelib import limits
    results["gateSeconds"] = limits.RESULTS_CACHE_GATE_SECONDS
    results["gate"] = gate(10 if args.quick else 100)
    print(f"\nthe results cache's gate reopened: p50 {results['gate']['noted0']['p50']:.2f} ms with no change noted, "
          f"{results['gate']['noted20']['p50']:.2f} ms with 20")
    print(f"\nin process, {results['requests']} cached semantic searches (load {results['loadBefore']} -> "
          f"{results['loadAfter']}): {results['redisRoundTrips']:g} Redis round trips and "
          f"{results['sqlStatements']:g} SQL statements a request")
    print(f"{'stage':58} {'p50 ms':>8} {'p95 ms':>8}")
    for row in results["stages"]:
        print(f"{row['stage']:58} {row['p50']:8.3f} {row['p95']:8.3f}")
    print(f"{'request':58} {results['total']['p50']:8.3f} {results['total']['p95']:8.3f}")
    os.environ["DATABASE_URL"] = owner_url
    from common import drop_database

    drop_database()
    save_results("api_overhead", args.quick, results)
    return results


if __name__ == "__main__":
    sys.exit(main() and 0)
