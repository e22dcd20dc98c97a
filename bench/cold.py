"""Cold starts and bursts (issue 33: a burst of 32 searches on cold workers answers with
p95 <= 15 s on this machine, errors only 429; the rate limit holds on cold workers).

    .venv/bin/python bench/cold.py [--quick] [--runs 5] [--clients 32] [--only imports|invoke|burst|limit]

- imports: per Lambda function, a fresh interpreter imports app.py and resolves the
  function's handler (what a cold execution environment does before its first event):
  the interpreter's whole life and the import alone, median of --runs, the functions
  taking turns; and which heavy modules that loaded (none of onnxruntime, boto3, openai,
  mcp should: they load with the first call that needs them).
- invoke: the API (a search whose query embedding is cached) and kb_search (the same,
  invoked directly), each after its warm workers were recycled (an environment change,
  as a deploy does), then again warm; median of --runs.
- burst: the API's workers recycled, then --clients searches at once (queries whose
  embeddings are cached, as an agent's repeated questions are) with the demo key:
  statuses, p50, p95, max.
- limit: the same burst on cold workers with a key limited to 2 requests a second
  (bursts of 4), listing its organisation's knowledge bases: how many were allowed
  against the most the bucket may allow over the burst's span, every refusal a 429
  with Retry-After.

Against the running local stack (`make up`); the figures depend on what else the two
cores do, so the load average is recorded with every figure. Recycling the API's
workers ends requests other clients have in flight on them.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time

from common import ROOT, aws_client, local_env, percentile, save_results

sys.path.insert(0, str(ROOT / "infra"))

TARGET_P95_MS = 15_000
HEAVY = ("onnxruntime", "boto3", "numpy", "openai", "mcp", "tokenizers", "pypdf", "docx", "openpyxl", "httpx",
         "aws_lambda_powertools")
LIMITED_RATE = 2  # requests a second of the limit burst's key (bursts of KEY_BURST_SECONDS times it)
CACHED_QUERIES = ("How do I make a file searchable?", "What file types can I upload?", "How are documents chunked?",
                  "Which embedding model is used?", "How do I search a knowledge base?", "What does a search return?",
                  "How do agents use knowledge bases?", "How do I delete a document?")
CHILD = """
import json, sys, time
started = time.perf_counter()
import importlib
module, _, name = sys.argv[1].rpartition(".")
handler = getattr(importlib.import_module(module), name)
imported = time.perf_counter()
print(json.dumps({"importMs": (imported - started) * 1000,
                  "loaded": [m for m in sys.argv[2].split(",") if m in sys.modules]}))
"""


def load() -> float:
    return os.getloadavg()[0]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def handlers() -> dict[str, str]:
    """{function name as deployed: its handler (module.attribute)}: the API and every blueprint's
    lambda_function."""
    sys.path.insert(0, str(ROOT))
    import app

    return {"api": "app.app"} | {f.name: f.handler_string for f in app.app.pure_lambda_functions}


def imports(runs: int) -> dict:
    """Each function's cold import in a fresh interpreter, the functions taking turns."""
    names = handlers()
    rows = {name: {"processMs": [], "importMs": []} for name in names}
    loaded = {}
    for _ in range(runs):
        for name, attribute in names.items():
            started = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", CHILD, attribute, ",".join(HEAVY)], cwd=ROOT,
                                 capture_output=True, text=True, check=True)
            rows[name]["processMs"].append((time.perf_counter() - started) * 1000)
            child = json.loads(out.stdout.strip().splitlines()[-1])
            rows[name]["importMs"].append(child["importMs"])
            loaded[name] = child["loaded"]
    return {name: {"processMs": statistics.median(r["processMs"]), "importMs": statistics.median(r["importMs"]),
                   "loaded": loaded[name]} for name, r in rows.items()}


def recycle(function: str) -> None:
    """Every warm worker of the function ends (ministack recycles them on an environment
    change, as AWS does on a deploy); the variable is the same every time."""
    from deploy import wait_until_updated

    client = aws_client("lambda")
    variables = client.get_function_configuration(FunctionName=function)["Environment"]["Variables"]
    marker = "1" if variables.get("BENCH_COLD") != "1" else "2"
    client.update_function_configuration(FunctionName=function,
                                         Environment={"Variables": {**variables, "BENCH_COLD": marker}})
    wait_until_updated(client, function)


def demo() -> tuple[str, str, str]:
    """(API URL, the demo key, the demo knowledge base's id)."""
    import requests

    env = local_env()
    url, key = env["KB_API_URL"], env["KB_API_KEY"]
    kbs = requests.get(f"{url}/knowledge-bases?limit=100", headers={"Authorization": f"Bearer {key}"},
                       timeout=120).json()["data"]["items"]
    kb = next(k for k in kbs if k["name"] == "Demo knowledge base")
    return url, key, kb["id"]


def search(url: str, key: str, kb_id: str, query: str) -> tuple[int, float, dict]:
    import requests

    started = time.perf_counter()
    try:
        answer = requests.post(f"{url}/knowledge-bases/{kb_id}/search", json={"query": query, "topK": 5},
                               headers={"Authorization": f"Bearer {key}"}, timeout=120)
        status, headers = answer.status_code, answer.headers
    except requests.RequestException:
        status, headers = 0, {}
    return status, (time.perf_counter() - started) * 1000, dict(headers)


def cache_queries(url: str, key: str, kb_id: str) -> None:
    for query in CACHED_QUERIES:  # warm: each query's embedding lands in Redis
        status, _, _ = search(url, key, kb_id, query)
        if status != 200:
            raise SystemExit(f"a warm search answered {status}")


def invoke(runs: int) -> dict:
    """The first call of a recycled function against the next, warm, one."""
    url, key, kb_id = demo()
    cache_queries(url, key, kb_id)
    env = local_env()
    lam = aws_client("lambda")

    def direct() -> float:
        started = time.perf_counter()
        answer = json.loads(lam.invoke(FunctionName=env["KB_SEARCH_FUNCTION"], Payload=json.dumps(
            {"apiKey": key, "knowledgeBaseId": kb_id, "query": CACHED_QUERIES[0]}))["Payload"].read())
        if not answer.get("success"):
            raise SystemExit(f"kb_search answered {answer}")
        return (time.perf_counter() - started) * 1000

    def through_api() -> float:
        status, ms, _ = search(url, key, kb_id, CACHED_QUERIES[0])
        if status != 200:
            raise SystemExit(f"a search answered {status}")
        return ms

    out = {}
    for label, function, call in (("api", env["KB_API_FUNCTION"], through_api),
                                  ("kb_search", env["KB_SEARCH_FUNCTION"], direct)):
        cold, warm, loads = [], [], []
        for _ in range(runs):
            recycle(function)
            loads.append(load())
            cold.append(call())
            warm.append(call())
        out[label] = {"coldMs": statistics.median(cold), "warmMs": statistics.median(warm),
                      "coldRuns": cold, "load": max(loads)}
    return out


def _at_once(clients: int, call) -> list:
    start, lock, results = threading.Barrier(clients), threading.Lock(), []

    def one(i: int):
        start.wait()
        result = call(i)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def burst(clients: int) -> dict:
    url, key, kb_id = demo()
    cache_queries(url, key, kb_id)
    recycle(local_env()["KB_API_FUNCTION"])
    before = uptime()
    started = time.monotonic()
    results = _at_once(clients, lambda i: search(url, key, kb_id, CACHED_QUERIES[i % len(CACHED_QUERIES)]))
    span = time.monotonic() - started
    times = [ms for _, ms, _ in results]
    statuses: dict[str, int] = {}
    for status, _, _ in results:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {"clients": clients, "statuses": statuses, "p50": percentile(times, 50), "p95": percentile(times, 95),
            "max": max(times), "seconds": span, "uptimeBefore": before, "uptimeAfter": uptime()}


def limited_key() -> str:
    """A key of an organisation of its own at LIMITED_RATE requests a second (made once)."""
    path = ROOT / ".kb" / "bench-cache" / "cold-limited-key.txt"
    if path.exists():
        return path.read_text().strip()
    os.environ["DATABASE_URL"] = local_env()["DATABASE_URL"]
    sys.path.insert(0, str(ROOT))
    from chalicelib.auth import issue_key

    key = issue_key("bench-cold-limit", "bench", rate_per_second=LIMITED_RATE)[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(key)
    return key


def limit(clients: int) -> dict:
    import requests

    from chalicelib import limits

    url, key = local_env()["KB_API_URL"], limited_key()
    recycle(local_env()["KB_API_FUNCTION"])
    time.sleep(limits.KEY_BURST_SECONDS)  # the key's bucket full again after earlier runs

    def one(_):
        started = time.perf_counter()
        try:
            answer = requests.get(f"{url}/knowledge-bases?limit=1", headers={"Authorization": f"Bearer {key}"},
                                  timeout=120)
            status, retry_after = answer.status_code, answer.headers.get("Retry-After")
        except requests.RequestException:
            status, retry_after = 0, None
        return status, retry_after, started, time.perf_counter()

    before = uptime()
    results = _at_once(clients, one)
    allowed = sum(status == 200 for status, *_ in results)
    refused = [r for r in results if r[0] == 429]
    # The bucket's decisions fall between the first request's start and the last answer.
    span = max(end for *_, end in results) - min(start for *_, start, _ in results)
    burst_size = LIMITED_RATE * limits.KEY_BURST_SECONDS
    return {"clients": clients, "rate": LIMITED_RATE, "burst": burst_size, "allowed": allowed,
            "refused": len(refused), "refusedWithRetryAfter": sum(r[1] is not None for r in refused),
            "other": clients - allowed - len(refused), "seconds": span,
            "mostAllowed": burst_size + math.floor(span * LIMITED_RATE),
            "uptimeBefore": before, "uptimeAfter": uptime()}


def report(results: dict) -> str:
    """The section of docs/benchmarks.md (bench/report.py)."""
    lines = []
    if "imports" in results:
        lines += ["Every function's execution environment imports app.py (Chalice's handlers live there), so the "
                  "import is the same for all; what differs is the first call. A fresh interpreter per function "
                  f"imports app.py and resolves its handler, median of {results['runs']} runs, the functions taking "
                  "turns (`bench/cold.py`).", "",
                  "| function | interpreter start to handler, ms | import app.py, ms | heavy modules loaded |",
                  "|---|---|---|---|"]
        for name, row in results["imports"].items():
            lines.append(f"| {name} | {row['processMs']:.0f} | {row['importMs']:.0f} | "
                         f"{', '.join(row['loaded']) or '-'} |")
        lines += ["", "onnxruntime, boto3, openai and the MCP SDK load with the first call that needs them: a "
                      "search whose query embedding is cached never loads the model.", ""]
    if "invoke" in results:
        lines += ["First call of a recycled function (its warm workers ended by an environment change, as a "
                  "deploy does) and the next, warm, call: a search whose query embedding is cached, median of "
                  f"{results['runs']} runs.", "", "| function | cold call, ms | warm call, ms | load (1 min) |",
                  "|---|---|---|---|"]
        for name, row in results["invoke"].items():
            lines.append(f"| {name} | {row['coldMs']:.0f} | {row['warmMs']:.0f} | {row['load']:.1f} |")
        lines.append("")
    if "burst" in results:
        b = results["burst"]
        statuses = ", ".join(f"{n} x {s}" for s, n in sorted(b["statuses"].items()))
        verdict = "within" if b["p95"] <= TARGET_P95_MS else "over"
        lines += [f"A burst of {b['clients']} searches at once on recycled API workers (cached query embeddings): "
                  f"{statuses}; p50 {b['p50']:.0f} ms, p95 {b['p95']:.0f} ms ({verdict} the {TARGET_P95_MS:,} ms "
                  f"target), max {b['max']:.0f} ms. `uptime` before: {b['uptimeBefore']}; after: "
                  f"{b['uptimeAfter']}.", ""]
    if "limit" in results:
        r = results["limit"]
        lines += [f"The rate limit on cold workers: {r['clients']} requests at once with a key limited to "
                  f"{r['rate']} a second (bursts of {r['burst']}): {r['allowed']} allowed (the bucket may allow at "
                  f"most {r['mostAllowed']} over the {r['seconds']:.1f} s the burst took), {r['refused']} refused "
                  f"with 429 ({r['refusedWithRetryAfter']} with Retry-After), {r['other']} other. `uptime` before: "
                  f"{r['uptimeBefore']}; after: {r['uptimeAfter']}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--only", choices=("imports", "invoke", "burst", "limit"))
    args = parser.parse_args()
    runs = args.runs or (1 if args.quick else 5)  # --quick checks the harness: one run of each
    clients = min(args.clients, 4) if args.quick else args.clients
    results: dict = {"runs": runs, "targetP95Ms": TARGET_P95_MS}
    steps = {"imports": lambda: imports(runs), "invoke": lambda: invoke(runs), "burst": lambda: burst(clients),
             "limit": lambda: limit(clients)}
    for name, step in steps.items():
        if args.only in (None, name):
            print(f"{name}: {uptime()}", flush=True)
            results[name] = step()
            print(json.dumps(results[name], indent=1), flush=True)
    save_results("cold" if args.only is None else f"cold-{args.only}", args.quick, results)
    print(report(results))


if __name__ == "__main__":
    main()
