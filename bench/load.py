"""The load knee (issue 30): concurrent clients ramped on a warm stack until p95 passes
1 s or errors pass 0.1%, and what the same workload needs on AWS, worked out from the
per-request costs measured on the way.

    .venv/bin/python bench/load.py [--quick] [--seconds 10] [--steps 1,2,4,...]

Against the running local stack (`make up`), in the benchmark database (kb_bench, SciFact's
abstracts) with the deployed API Lambda pointed at it (bench/api.py). Each client is a
closed loop with no think time: it sends its next search as soon as the last one answers.
The mix is SciFact train questions, 8 semantic, 1 keyword and 1 hybrid in 10, top 10; every
query embedding is cached first, and every request's maxTokens differs (always more than
ten passages need) so the results cache never answers: each request searches. The key's
rate limit is far above anything reached (throttling off).

Each step starts its clients, lets each make WARM_REQUESTS untimed requests (new API
workers start then: the emulator runs one process per concurrent execution), then times
--seconds. Per step: requests/s, p50/p95/p99, the error rate; the Lambda's own duration and
the search's time from the function's log lines (REPORT, and the search's EMF line); the CPU
each process class spent per request, from /proc (PostgreSQL's is the database's cost); the
database connections the functions held and how many were busy (pg_stat_activity, sampled).
The knee is the last step within both limits.

On two cores the emulator (one Python process for every gateway request), the API workers,
PostgreSQL, Redis and these clients share the same CPUs: the knee measured is this machine's
and the emulator's, not the service's on AWS. That is what the paper calculation is for.
"""
import argparse
import itertools
import json
import math
import os
import re
import statistics
import subprocess
import sys
import threading
import time

from common import ROOT, aws_client, corpus, drop_database, fresh_database, local_env, percentile, queries_and_qrels, save_results

P95_LIMIT_MS = 1000
ERROR_LIMIT = 0.001  # 0.1%
STEPS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
QUICK_STEPS = (1, 2)
MIX = ("semantic",) * 8 + ("keyword", "hybrid")
QUERIES = 50
WARM_REQUESTS = 2
REQUEST_TIMEOUT_S = 30  # API Gateway's own integration timeout is 29 s
API_WORKER = "ministack-lambda-kb-service-api-"
# A step is not started when its API workers (each a process of the size measured so far)
# would take more than this share of the machine's available memory (others work here too).
MEMORY_SHARE = 0.5

# The paper calculation's assumptions (report section; the sources are cited there).
SEED_USERS = 1000  # seed 004: "Throughput: 1000+ concurrent users"
# An agent's user in a session: a turn every ~30 s that searches two or three times (seed
# 004's "3+ documents referenced per agent session"): 6 searches a minute; and a heavy case.
SEARCHES_PER_USER_PER_MINUTE = (6, 60)
VCPU_PER_ACU = 0.25  # 1 ACU ~ 2 GiB with its share of CPU; db.r6g.large: 2 vCPU, 16 GiB = 8 ACU
ACU_GIB = 2
DB_CPU_TARGET = 0.7  # run the database at 70% CPU at most: Aurora scales up on CPU before it is full
MIN_ACU = 0.5


# --- the processes' CPU, from /proc ---------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a process, None when it is gone."""
    try:
        raw = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _rss_mib(pid: int) -> float:
    try:
        return int(open(f"/proc/{pid}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return 0.0


def _pid(path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def processes() -> dict[str, list[int]]:
    """The stack's processes by class: gateway (ministack itself), api (the API function's
    workers), lambdas (every other function's), postgres, redis, clients (this one)."""
    state = ROOT / ".kb"
    emulator, postmaster, redis = (_pid(state / "ministack.pid"), _pid(state / "pgdata" / "postmaster.pid"),
                                   _pid(state / "redis.pid"))
    out = {name: [] for name in ("gateway", "api", "lambdas", "postgres", "redis", "clients")}
    out["clients"].append(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        stat = _stat(pid)
        if stat is None:
            continue
        parent = stat[0]
        if pid == emulator:
            out["gateway"].append(pid)
        elif pid == postmaster or parent == postmaster:
            out["postgres"].append(pid)
        elif pid == redis:
            out["redis"].append(pid)
        elif parent == emulator:
            out["api" if API_WORKER in _cmdline(pid) else "lambdas"].append(pid)
    return out


def cpu_seconds(procs: dict[str, list[int]]) -> dict[str, float]:
    return {name: sum(s[1] for s in map(_stat, pids) if s) for name, pids in procs.items()}


def memory_available_mib() -> float:
    line = next(line for line in open("/proc/meminfo") if line.startswith("MemAvailable"))
    return int(line.split()[1]) / 1024


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


# --- the load ---------------------------------------------------------------------------------

def setup(abstracts: int | None):
    """The benchmark database with SciFact's abstracts, a key that is never throttled, and
    the questions; as bench/retrieval.py's setup."""
    from chalicelib.auth import issue_key
    from chalicelib.knowledge_bases import create_knowledge_base
    from retrieval import load as store

    docs = corpus(abstracts)
    queries, _ = queries_and_qrels({d["_id"] for d in docs})
    url = fresh_database()
    principal, key = issue_key("bench-load", "bench", rate_per_second=1_000_000)
    kb = create_knowledge_base(principal, name="SciFact", description="BEIR SciFact subset")
    flat, _ = store(kb, docs)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:  # no autovacuum of the fresh rows inside a step
        conn.execute("VACUUM ANALYZE")
    return url, key, kb, len(docs), len(flat), queries[:QUERIES]


def active_ms(owner_url: str) -> float:
    """Milliseconds the database's sessions have spent running statements (or inside a
    transaction), all sessions together (pg_stat_database, PostgreSQL 14+). A backend reports
    it at most once a second while busy, so each end of a step lags by about that much."""
    import psycopg

    with psycopg.connect(owner_url, autocommit=True) as conn:
        return conn.execute("SELECT active_time + idle_in_transaction_time FROM pg_stat_database"
                            " WHERE datname = current_database()").fetchone()[0]


class Connections(threading.Thread):
    """Samples pg_stat_activity every second while a step is timed: the functions'
    connections (kb_app) open, and those running a statement."""

    def __init__(self, owner_url: str):
        super().__init__(daemon=True)
        self.owner_url, self.samples, self.done = owner_url, [], threading.Event()

    def run(self):
        import psycopg

        with psycopg.connect(self.owner_url, autocommit=True) as conn:
            while not self.done.wait(1.0):
                self.samples.append(conn.execute(
                    "SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM pg_stat_activity"
                    " WHERE usename = 'kb_app' AND datname = current_database()").fetchone())

    def summary(self) -> dict:
        self.done.set()
        self.join()
        held, active = zip(*self.samples) if self.samples else ((0,), (0,))
        return {"heldMax": max(held), "heldMean": statistics.mean(held), "activeMean": statistics.mean(active),
                "activeMax": max(active), "samples": len(self.samples)}


def function_logs(start_ms: int, end_ms: int) -> dict:
    """The API function's REPORT durations and the searches' own durations (their EMF
    line's durationMs) logged between the two times."""
    logs = aws_client("logs")
    lambda_ms, search_ms, token = [], [], None
    while True:
        page = logs.filter_log_events(logGroupName=f"/aws/lambda/{local_env()['KB_API_FUNCTION']}",
                                      startTime=start_ms, endTime=end_ms, **({"nextToken": token} if token else {}))
        for event in page["events"]:
            message = event["message"]
            if message.startswith("REPORT"):
                found = re.search(r"\tDuration: ([\d.]+) ms", message)
                if found:
                    lambda_ms.append(float(found.group(1)))
            elif '"durationMs"' in message:
                try:
                    search_ms.append(float(json.loads(message)["durationMs"]))
                except (ValueError, KeyError, TypeError):
                    pass
        token = page.get("nextToken")
        if not token or not page["events"]:
            break
    return {"lambdaMs": lambda_ms, "searchMs": search_ms}


def step(url: str, key: str, bodies: list[dict], clients: int, seconds: float, owner_url: str, counter) -> dict:
    """`clients` closed loops: WARM_REQUESTS untimed each, then `seconds` timed together."""
    import requests

    results, warm_errors, lock = [], [], threading.Lock()
    window: dict = {}
    sampler = Connections(owner_url)

    def begin():  # run by the last client to reach the barrier, before any is released
        window["procs"] = processes()
        window["cpu"] = cpu_seconds(window["procs"])
        window["activeMs"] = active_ms(owner_url)
        window["start"] = time.monotonic()
        window["startMs"] = int(time.time() * 1000)
        window["stop"] = window["start"] + seconds
        window["loadBefore"] = os.getloadavg()[0]
        sampler.start()

    barrier = threading.Barrier(clients, action=begin)

    def one(session, i: int) -> tuple[int, float, str]:
        body = dict(bodies[i % len(bodies)], maxTokens=50_000 + next(counter) % 50_000)
        started = time.perf_counter()
        try:
            status = session.post(url, json=body, headers={"Authorization": f"Bearer {key}"},
                                  timeout=REQUEST_TIMEOUT_S).status_code
        except requests.RequestException:
            status = 0
        return status, (time.perf_counter() - started) * 1000, body["strategy"]

    def client(offset: int):
        session, i = requests.Session(), offset
        for _ in range(WARM_REQUESTS):
            status, _, _ = one(session, i)
            i += 1
            if status != 200:
                with lock:
                    warm_errors.append(status)
        barrier.wait()
        while time.monotonic() < window["stop"]:
            status, ms, strategy = one(session, i)
            i += 1
            if time.monotonic() <= window["stop"]:  # an answer after the window is not counted
                with lock:
                    results.append((status, ms, strategy))

    threads = [threading.Thread(target=client, args=(n * 7,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - window["start"]
    end_ms = int(time.time() * 1000)
    connections = sampler.summary()
    db_active_ms = active_ms(owner_url) - window["activeMs"]
    procs_after = processes()
    cpu_after = cpu_seconds(window["procs"])
    requests_done = len(results)
    times = [ms for status, ms, _ in results if status == 200]
    errors = sum(status != 200 for status, _, _ in results)
    statuses: dict[str, int] = {}
    for status, _, _ in results:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    logs = function_logs(window["startMs"], end_ms)
    api_workers = procs_after["api"]
    row = {"clients": clients, "seconds": wall, "requests": requests_done, "perSecond": requests_done / wall,
           "p50Ms": percentile(times, 50) if times else None, "p95Ms": percentile(times, 95) if times else None,
           "p99Ms": percentile(times, 99) if times else None,
           "errorRate": errors / requests_done if requests_done else 1.0, "statuses": statuses,
           "warmErrors": len(warm_errors),
           "byStrategy": {s: percentile([ms for st, ms, k in results if k == s and st == 200], 95)
                          for s in set(MIX) if any(k == s and st == 200 for st, _, k in results)},
           # CPU ms per request of each process class (processes alive at the window's start)
           "cpuMsPerRequest": {name: (cpu_after[name] - window["cpu"][name]) * 1000 / max(1, requests_done)
                               for name in cpu_after},
           # the database's sessions busy (in a statement or a transaction) a request, all together
           "dbBusyMsPerRequest": db_active_ms / max(1, requests_done),
           "cpuBusy": sum(cpu_after[n] - window["cpu"][n] for n in cpu_after) / wall,
           "lambdaMsMean": statistics.mean(logs["lambdaMs"]) if logs["lambdaMs"] else None,
           "lambdaMsP95": percentile(logs["lambdaMs"], 95) if logs["lambdaMs"] else None,
           "searchMsMean": statistics.mean(logs["searchMs"]) if logs["searchMs"] else None,
           "logged": len(logs["lambdaMs"]), "connections": connections,
           "apiWorkers": len(api_workers), "apiWorkerRssMib": statistics.mean(map(_rss_mib, api_workers))
           if api_workers else 0.0,
           "loadBefore": window["loadBefore"], "loadAfter": os.getloadavg()[0]}
    return row


def within(row: dict) -> bool:
    return row["p95Ms"] is not None and row["p95Ms"] <= P95_LIMIT_MS and row["errorRate"] <= ERROR_LIMIT


def guard(next_clients: int, rows: list[dict], max_connections: int) -> str | None:
    """Why the next step is not run on this machine, if it should not be."""
    last = rows[-1]
    memory = next_clients * last["apiWorkerRssMib"]
    if memory > MEMORY_SHARE * memory_available_mib():
        return (f"memory: {next_clients} API workers of {last['apiWorkerRssMib']:.0f} MiB would take more than "
                f"{MEMORY_SHARE:.0%} of the {memory_available_mib():,.0f} MiB available")
    per_worker = last["connections"]["heldMax"] / max(1, last["apiWorkers"])
    if next_clients * per_worker > 0.8 * max_connections:
        return f"connections: {next_clients} workers x {per_worker:.1f} near PostgreSQL's max_connections {max_connections}"
    from ministack.services.lambda_svc import _ACCOUNT_CONCURRENCY_CAP

    if _ACCOUNT_CONCURRENCY_CAP and next_clients > _ACCOUNT_CONCURRENCY_CAP:
        return f"the emulator's account concurrency ({_ACCOUNT_CONCURRENCY_CAP}) is below {next_clients}"
    return None


def ramp(url: str, key: str, kb_id: str, queries: list[dict], steps, seconds: float, owner_url: str) -> dict:
    import psycopg
    import requests

    search = f"{local_env()['KB_API_URL']}/knowledge-bases/{kb_id}/search"
    bodies = [{"query": q["text"], "topK": 10, "strategy": strategy}
              for q, strategy in zip(queries, itertools.cycle(MIX))]
    warm = requests.Session()
    for q in queries:  # every query's embedding into the cache
        answer = warm.post(search, json={"query": q["text"], "topK": 1, "strategy": "semantic"},
                           headers={"Authorization": f"Bearer {key}"}, timeout=120)
        if answer.status_code != 200:
            raise SystemExit(f"a warm search answered {answer.status_code}: {answer.text[:300]}")
    with psycopg.connect(owner_url, autocommit=True) as conn:
        max_connections = int(conn.execute("SHOW max_connections").fetchone()[0])
        database_mib = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20
    counter, rows, stopped = itertools.count(), [], "every step ran"
    print(f"{'clients':>7} {'req/s':>7} {'p50 ms':>7} {'p95 ms':>7} {'errors':>7} {'lambda ms':>9} "
          f"{'db cpu ms':>9} {'db busy':>7} {'conns':>5} {'workers':>7} {'cpu busy':>8}  load", flush=True)
    for n, clients in enumerate(steps):
        if rows:
            reason = guard(clients, rows, max_connections)
            if reason:
                stopped = reason
                break
        row = step(search, key, bodies, clients, seconds, owner_url, counter)
        rows.append(row)
        lambda_ms = f"{row['lambdaMsMean']:.1f}" if row["lambdaMsMean"] is not None else "-"
        p50 = f"{row['p50Ms']:.0f}" if row["p50Ms"] is not None else "-"
        p95 = f"{row['p95Ms']:.0f}" if row["p95Ms"] is not None else "-"
        print(f"{clients:7d} {row['perSecond']:7.1f} {p50:>7} {p95:>7} {row['errorRate']:7.2%} {lambda_ms:>9} "
              f"{row['cpuMsPerRequest']['postgres']:9.2f} {row['dbBusyMsPerRequest']:7.2f} {row['connections']['heldMax']:5d} {row['apiWorkers']:7d} "
              f"{row['cpuBusy']:8.2f}  {row['loadBefore']:.2f}", flush=True)
        if not within(row):
            stopped = (f"p95 {row['p95Ms']:.0f} ms over {P95_LIMIT_MS} ms" if row["p95Ms"] is None
                       or row["p95Ms"] > P95_LIMIT_MS else f"errors {row['errorRate']:.2%} over {ERROR_LIMIT:.1%}")
            break
    knee = next((r for r in reversed(rows) if within(r)), None)
    from ministack.services.lambda_svc import _ACCOUNT_CONCURRENCY_CAP

    return {"steps": rows, "stopped": stopped, "knee": knee, "maxConnections": max_connections,
            "databaseMib": database_mib, "emulatorAccountConcurrency": _ACCOUNT_CONCURRENCY_CAP}


# --- on paper: the same workload on AWS ----------------------------------------------------------

def per_request(results: dict) -> dict:
    """The costs the paper calculation uses. Durations (the Lambda's, the database's busy time)
    from the one-client step: they grow with queueing for these two cores (at 16 clients the
    database was busy 162 ms a request for 14 ms of CPU), and on AWS every execution
    environment has CPU of its own. CPU per request from the knee: the most requests, and
    CPU time does not grow with queueing."""
    first, knee = results["steps"][0], results["knee"] or results["steps"][0]
    return {"lambdaMs": first["lambdaMsMean"], "searchMs": first["searchMsMean"],
            "dbCpuMs": knee["cpuMsPerRequest"]["postgres"], "apiCpuMs": knee["cpuMsPerRequest"]["api"],
            "dbBusyMs": first["dbBusyMsPerRequest"],
            "connectionsPerWorker": knee["connections"]["heldMax"] / max(1, knee["apiWorkers"])}


def paper(results: dict) -> list[dict]:
    cost = per_request(results)
    rows = []
    for per_minute in SEARCHES_PER_USER_PER_MINUTE:
        rate = SEED_USERS * per_minute / 60
        concurrency = rate * cost["lambdaMs"] / 1000
        db_vcpu = rate * cost["dbCpuMs"] / 1000
        acu = max(MIN_ACU, math.ceil(db_vcpu / DB_CPU_TARGET / VCPU_PER_ACU * 2) / 2)
        rows.append({"users": SEED_USERS, "searchesPerUserPerMinute": per_minute, "perSecond": rate,
                     "lambdaConcurrency": concurrency, "dbVcpu": db_vcpu, "acu": acu,
                     "proxyConnectionsPinned": math.ceil(concurrency) * cost["connectionsPerWorker"],
                     "proxyConnectionsMultiplexed": rate * cost["dbBusyMs"] / 1000})
    return rows


def report(results: dict) -> str:
    """The section of docs/benchmarks.md (bench/report.py)."""
    knee, cost = results["knee"], per_request(results)
    lines = [f"Closed-loop clients (no think time) ramped through the emulated API Gateway until p95 passed "
             f"{P95_LIMIT_MS:,} ms or errors passed {ERROR_LIMIT:.1%}: SciFact train questions ({results['queries']}) "
             f"over {results['abstracts']:,} abstracts ({results['chunks']:,} chunks), 8 semantic, 1 keyword, 1 hybrid "
             "in 10, top 10, every query embedding cached and the results cache missed (each request's maxTokens "
             f"differs); the key's rate limit is off (1,000,000/s). Each step: {WARM_REQUESTS} untimed requests a "
             f"client (API workers start then), then {results['seconds']:g} s timed (`bench/load.py`). CPU ms a "
             "request per process class from /proc; Lambda ms from the function's REPORT lines; connections of "
             "kb_app sampled from pg_stat_activity.", "",
             "| clients | requests/s | p50 ms | p95 ms | p99 ms | errors | Lambda ms (mean) | search ms (mean) | "
             "CPU ms a request: gateway / API / PostgreSQL / Redis / clients | database busy ms a request | "
             "connections held | API workers | load before |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    for r in results["steps"]:
        c = r["cpuMsPerRequest"]
        lines.append(f"| {r['clients']} | {r['perSecond']:.1f} | {fmt(r['p50Ms'], '.0f')} | {fmt(r['p95Ms'], '.0f')} | "
                     f"{fmt(r['p99Ms'], '.0f')} | {r['errorRate']:.2%} | {fmt(r['lambdaMsMean'], '.1f')} | "
                     f"{fmt(r['searchMsMean'], '.1f')} | {c['gateway']:.1f} / {c['api']:.1f} / {c['postgres']:.1f} / "
                     f"{c['redis']:.1f} / {c['clients']:.1f} | {r['dbBusyMsPerRequest']:.2f} | {r['connections']['heldMax']} | "
                     f"{r['apiWorkers']} | {r['loadBefore']:.2f} |")
    top = results["steps"][-1]
    cpu_total = sum(top["cpuMsPerRequest"].values())
    lines += ["", (f"**The knee on this machine: {knee['clients']} clients**, {knee['perSecond']:.1f} requests/s, "
                   f"p95 {knee['p95Ms']:.0f} ms, errors {knee['errorRate']:.2%}" if knee else
                   "**No step was within both limits on this machine.**")
              + f"; the ramp stopped at: {results['stopped']}. The target is 1000+ concurrent users; these "
                f"clients never pause, so {knee['perSecond'] if knee else 0:.0f} requests/s is what "
                f"{(knee['perSecond'] if knee else 0) * 60 / SEARCHES_PER_USER_PER_MINUTE[0]:,.0f} users searching "
                f"{SEARCHES_PER_USER_PER_MINUTE[0]} times a minute would send. The knee is the emulator's on two "
                f"cores, not the service's: at the last step the processes were busy {top['cpuBusy']:.2f} cores "
                f"between them, {cpu_total:.1f} CPU ms a request, of which the emulator's gateway "
                f"{top['cpuMsPerRequest']['gateway']:.1f}, the API workers {top['cpuMsPerRequest']['api']:.1f}, "
                f"PostgreSQL {top['cpuMsPerRequest']['postgres']:.1f} and the clients "
                f"{top['cpuMsPerRequest']['clients']:.1f}: at that cost {os.cpu_count()} cores could serve at most "
                f"≈{os.cpu_count() * 1000 / cpu_total:.0f} requests/s whatever the clients. ministack starts one worker process per concurrent "
                f"execution (no ceiling per function; its account cap here is "
                f"{results['emulatorAccountConcurrency']}), each with its own database connections "
                f"(max_connections {results['maxConnections']}). `uptime` before: {results['uptimeBefore']}; "
                f"after: {results['uptimeAfter']}.", ""]
    lines += ["What the same workload needs on AWS, on paper from this run's per-request costs: Lambda "
              f"{cost['lambdaMs']:.1f} ms a search (REPORT duration, one client), of which the search itself "
              f"{fmt(cost['searchMs'], '.1f')} ms; the database's sessions busy {cost['dbBusyMs']:.2f} ms a search (one "
              f"client) and PostgreSQL's processes {cost['dbCpuMs']:.2f} CPU ms a search (at the knee: CPU time does not "
              f"grow with queueing, durations do); {cost['connectionsPerWorker']:.1f} connections "
              "held a warm API worker (one, and a second once it served a hybrid search). Assumed: a concurrent "
              f"user of an agent searches {SEARCHES_PER_USER_PER_MINUTE[0]} times a minute (a turn every ~30 s with "
              f"two or three searches; the {SEARCHES_PER_USER_PER_MINUTE[-1]} a minute row is a heavy case); 1 ACU is about 2 GiB of memory with its share of CPU (AWS: "
              "https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/aurora-serverless-v2.how-it-works.html), "
              f"taken as {VCPU_PER_ACU} vCPU (db.r6g.large, 2 vCPU and 16 GiB, is 8 ACU), the database kept "
              f"under {DB_CPU_TARGET:.0%} CPU; the functions' connections are pinned by RDS Proxy (they set "
              "kb.org_id with set_config for the session: "
              "https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/rds-proxy-pinning.html), so each warm "
              "environment holds its own database connections.", "",
              "| users | searches a user a minute | requests/s = users x rate / 60 | Lambda concurrency = "
              "requests/s x Lambda s | database vCPU = requests/s x CPU s | ACUs = vCPU / "
              f"{DB_CPU_TARGET} / {VCPU_PER_ACU} (min {MIN_ACU}) | RDS Proxy connections, pinned = concurrency x "
              "connections a worker | if multiplexed = requests/s x busy s |", "|---|---|---|---|---|---|---|---|"]
    for r in paper(results):
        lines.append(f"| {r['users']:,} | {r['searchesPerUserPerMinute']} | {r['perSecond']:.0f} | "
                     f"{r['lambdaConcurrency']:.1f} | {r['dbVcpu']:.2f} | {r['acu']:.1f} | "
                     f"{r['proxyConnectionsPinned']:.0f} | {r['proxyConnectionsMultiplexed']:.1f} |")
    lines += ["", f"Memory is the other bound of the ACUs: this run's database is {results['databaseMib']:,.0f} MiB; "
                  f"at {ACU_GIB} GiB an ACU, the index and the hot rows must fit the ACUs' shared buffers (the "
                  "template's AuroraMaxCapacity is 4). Lambda's account concurrency defaults to 1,000; warm but idle "
                  "environments hold their pinned connections too, so the proxy's pool must cover the peak number "
                  "of environments, not only the mean concurrency.", ""]
    return "\n".join(lines)


def figures(results: dict) -> dict | None:
    """benchmarks.json's loadKnee."""
    knee = results.get("knee")
    if not knee:
        return None
    return {"clients": knee["clients"], "p95Ms": knee["p95Ms"], "errorRate": knee["errorRate"],
            "perSecond": knee["perSecond"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help=f"steps {QUICK_STEPS}, 2 s each, 200 abstracts")
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--steps", help="comma-separated client counts")
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")] if args.steps else (QUICK_STEPS if args.quick else STEPS)
    seconds = args.seconds or (2 if args.quick else 10)
    import api
    from chalicelib.storage.db import functions_login

    url, key, kb, abstracts, chunks, queries = setup(200 if args.quick else None)
    print(f"corpus: {abstracts} abstracts, {chunks} chunks; {len(queries)} questions; {uptime()}", flush=True)
    before = uptime()
    try:
        # as deployed: the functions log in as kb_app, under row-level security
        with api.api_pointed_at(functions_login(url), os.environ["REDIS_URL"]):
            results = ramp(url, key, kb["id"], queries, steps, seconds, url)
    finally:
        drop_database()
        import redis

        redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()  # this run's cached answers
    results.update({"abstracts": abstracts, "chunks": chunks, "queries": len(queries), "seconds": seconds,
                    "uptimeBefore": before, "uptimeAfter": uptime(), "perRequest": None, "paper": None})
    if results["knee"] or results["steps"]:
        results["perRequest"], results["paper"] = per_request(results), paper(results)
    save_results("load", args.quick, results)
    print(report(results))


if __name__ == "__main__":
    main()
