"""Pages of a 100,000-document knowledge base (issue 27: p95 <= 50 ms service-side).

    .venv/bin/python bench/documents_list.py [--quick] [--documents 100000] [--runs 40]

On the local stack's database (`make up` first; DATABASE_URL of .kb/local.env), in an
organisation of its own: a knowledge base, then its document rows in one INSERT ... SELECT
(paths in a tree of 12 top folders, 30 parts each, ten files a folder with an index.html
and a README.md among them, in random physical order; 90 % PROCESSED, 5 % FAILED, 3 %
PENDING, 2 % PROCESSING; updated over the past year), then ANALYZE. Timed in-process as
the API runs it, logged in as kb_app under row-level security (bench/common.as_the_functions):
chalicelib.documents.service.list_documents for each sort's first page and a page 50,000
rows in (the token the walk reached), and with a prefix and a status filter, at limit 100
and 1000; the page query alone beside it; then every page of each sort followed by its
nextToken at limit 1000 (each row seen once), and EXPLAIN (ANALYZE, BUFFERS) of each page
query. One page of 100 through the deployed API for comparison, when it pages. The
knowledge base and its rows are deleted at the end.
"""
import argparse
import json
import secrets
import statistics
import time
from dataclasses import replace

from common import local_env, percentile, save_results

TARGET_MS = 50  # issue 27's service-side p95 for one page
TOP_FOLDERS = ("guides", "api", "reference", "manuals", "howto", "release-notes", "faq", "tutorials",
               "admin", "security", "internals", "archive")
# Ten files a folder; j = row number mod 10 picks the name.
NAMES = ("index.html", "README.md", "install.html", "usage.md", "changes.txt", "overview.pdf", "config.rst",
         "examples.html", "notes.txt", "manual.docx")

# One statement: row i is file NAMES[i % 10] of folder f = i / 10, which sits in
# TOP_FOLDERS[f % 12]/part-NN/topic-f; rows in random physical order (as documents arrive).
INSERT = """
INSERT INTO documents (id, kb_id, s3_key, filename, content_type, size_bytes, content_hash, status,
                       error_code, error_message, page_count, chunk_count, token_count,
                       created_at, updated_at, processed_at, indexed_hash, kind, execution_arn)
SELECT 'doc_' || substr(md5(%(kb_id)s || i), 1, 16), %(kb_id)s, 'kb/' || %(kb_id)s || '/' || path, name,
       CASE ext WHEN 'html' THEN 'text/html' WHEN 'md' THEN 'text/markdown' WHEN 'pdf' THEN 'application/pdf'
                WHEN 'docx' THEN 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'
                ELSE 'text/plain' END,
       1000 + (h %% 400000), encode(sha256(convert_to(path, 'UTF8')), 'hex'), status,
       CASE WHEN status = 'FAILED' THEN 'EXTRACTION_FAILED' END,
       CASE WHEN status = 'FAILED' THEN 'the file could not be read' END,
       CASE WHEN ext = 'pdf' THEN 1 + h %% 40 END,
       CASE WHEN status = 'PROCESSED' THEN 1 + h %% 60 ELSE 0 END,
       CASE WHEN status = 'PROCESSED' THEN 200 + h %% 20000 ELSE 0 END,
       updated - interval '1 day', updated, CASE WHEN status = 'PROCESSED' THEN updated END,
       CASE WHEN status = 'PROCESSED' THEN encode(sha256(convert_to(path, 'UTF8')), 'hex') END, 'file',
       -- a PENDING row is a run's, not a registration waiting for its bytes: the stack's minute sweep
       -- would expire those (and move them in the walk by updatedAt); no sweep looks at a run-less one
       CASE WHEN status = 'PENDING' THEN 'bench-run-' || i END
FROM (SELECT i, h, name, split_part(name, '.', 2) AS ext,
             (%(tops)s::text[])[1 + (i / 10) %% 12] || '/part-' || lpad(((i / 120) %% 30)::text, 2, '0')
                 || '/topic-' || (i / 10) || '/' || name AS path,
             CASE WHEN h %% 100 < 90 THEN 'PROCESSED' WHEN h %% 100 < 95 THEN 'FAILED'
                  WHEN h %% 100 < 98 THEN 'PENDING' ELSE 'PROCESSING' END AS status,
             now() - (h %% 31536000) * interval '1 second' AS updated
      FROM (SELECT i, ('x' || substr(md5(i::text), 1, 8))::bit(32)::int & 2147483647 AS h,
                   (%(names)s::text[])[1 + i %% 10] AS name
            FROM generate_series(0, %(n)s - 1) AS i) AS numbered
      ORDER BY md5(i::text || 'order')) AS rows
"""


def setup(documents: int):
    """(principal, key, kb) of a new organisation, with `documents` rows in its knowledge base."""
    import psycopg

    from chalicelib.auth import issue_key
    from chalicelib.knowledge_bases import create_knowledge_base

    principal, key = issue_key(f"bench-documents-{secrets.token_hex(3)}", "bench", rate_per_second=1_000_000)
    kb = create_knowledge_base(principal, name="100k documents", description="bench/documents_list.py")
    started = time.perf_counter()
    try:
        with psycopg.connect(local_env()["DATABASE_URL"], autocommit=True) as conn:
            conn.execute(INSERT, {"kb_id": kb["id"], "n": documents, "tops": list(TOP_FOLDERS), "names": list(NAMES)})
            conn.execute("ANALYZE documents")  # autovacuum would, some time after a bulk load
    except BaseException:
        delete(kb["id"])
        raise
    print(f"{documents:,} document rows inserted and analysed in {time.perf_counter() - started:.1f} s")
    return principal, key, kb


def delete(kb_id: str) -> None:
    """The knowledge base and (ON DELETE CASCADE) its rows; nothing of it is in the bucket."""
    import psycopg

    with psycopg.connect(local_env()["DATABASE_URL"], autocommit=True) as conn:
        conn.execute("DELETE FROM knowledge_bases WHERE id = %s", (kb_id,))


def cases(documents: int) -> list[tuple[str, dict]]:
    """(name, DocumentQuery fields) of each timed page; 'deep' pages start at the token a
    walk reached about half-way through what the query matches."""
    return [
        ("path, first page", {"sort": "path"}),
        ("path, deep", {"sort": "path", "deep": documents // 2}),
        ("updatedAt, first page", {"sort": "updatedAt"}),
        ("updatedAt, deep", {"sort": "updatedAt", "deep": documents // 2}),
        ("status, first page", {"sort": "status"}),
        ("status, deep", {"sort": "status", "deep": documents // 2}),
        ("prefix guides/, path", {"sort": "path", "prefix": "guides/"}),
        ("prefix guides/, path, deep", {"sort": "path", "prefix": "guides/", "deep": documents // 24}),
        ("prefix guides/part-07/, path", {"sort": "path", "prefix": "guides/part-07/"}),
        ("prefix guides/, updatedAt", {"sort": "updatedAt", "prefix": "guides/"}),
        ("status FAILED, path", {"sort": "path", "status": "FAILED"}),
        ("status FAILED, path, deep", {"sort": "path", "status": "FAILED", "deep": documents // 40}),
        ("status FAILED, updatedAt", {"sort": "updatedAt", "status": "FAILED"}),
        ("status PENDING, updatedAt", {"sort": "updatedAt", "status": "PENDING"}),
        ("one path", {"sort": "path", "path": "guides/part-00/topic-0/index.html"}),
    ]


def deep_token(principal, kb_id: str, query, rows_in: int):
    """The `after` key of the page that starts rows_in rows into the query's order, reached
    by following nextToken at limit 1000 (then 100) as a client would."""
    from chalicelib.documents import listing, service

    seen, after = 0, None
    while seen < rows_in:
        step = min(1000, rows_in - seen)
        rows, token = service.list_documents(principal, kb_id, replace(query, limit=step, after=after))
        if token is None:
            break
        seen += len(rows)
        after = listing.decode_token(token, kb_id, query.sort)
    return after


def timed(fn, runs: int) -> dict:
    fn()  # a warm-up call, left out
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return {"p50": statistics.median(times), "p95": percentile(times, 95), "max": max(times)}


class Recorder:
    """A connection that keeps the statement it is given and answers nothing."""

    def execute(self, sql, params=None):
        self.sql, self.params = sql, params
        return self

    def fetchall(self):
        return []

    def fetchone(self):
        return None


def page_query(principal, kb_id: str, query) -> tuple[str, dict]:
    """The page's own SELECT, as storage.documents.list_page sends it (limit + 1, as the
    service asks)."""
    from chalicelib.storage import documents

    recorder = Recorder()
    documents.list_page(recorder, principal, kb_id, replace(query, limit=query.limit + 1))
    return recorder.sql, recorder.params


def access_query(principal, kb_id: str) -> tuple[str, dict]:
    """What access.kb_to_read sends before the page: the knowledge base alone (its stats,
    which read every document, cost 95-236 ms a page at 100,000 until the check left them out)."""
    from chalicelib.storage import knowledge_bases

    recorder = Recorder()
    knowledge_bases.get_visible(recorder, principal, kb_id, stats=False)
    return recorder.sql, recorder.params


def explain(sql: str, params: dict, table: str = "documents d") -> dict:
    """EXPLAIN (ANALYZE, BUFFERS) of a statement as kb_app (row-level security on),
    condensed: the node that reads `table` (index, rows, what its filter threw away),
    a sort if there is one, the buffers and the times."""
    import re

    from chalicelib.storage import connection

    with connection() as conn:
        plan = [r["QUERY PLAN"] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()]
    scan = next(i for i, line in enumerate(plan) if f" on {table}" in line)
    details = []  # the node's own lines, up to its first child (the policies' subplans)
    for line in plan[scan + 1:]:
        if line.lstrip().startswith(("->", "SubPlan", "InitPlan")):
            break
        details.append(line.strip())
    node = re.sub(r"\s*\(cost=[^)]*\)", "", plan[scan].strip().removeprefix("->").strip())
    node = re.sub(f" on {table}", "", node).replace("actual time=", "").replace(" loops=1", "")
    cond = next((d.split(": ", 1)[1] for d in details if d.startswith(("Index Cond", "Recheck Cond"))), "")
    cond = re.sub(r"'kb/kb_[0-9a-f]+/", "'", re.sub(r"kb_id = 'kb_[0-9a-f]+'::text", "kb_id", cond)).replace("::text", "")
    removed = sum(int(d.rsplit(" ", 1)[1]) for d in details if d.startswith("Rows Removed by Filter"))
    sort = next((line.strip() for line in plan if "Sort Method" in line), None)
    buffers = next(line.strip() for line in plan if line.strip().startswith("Buffers"))
    times = {name: float(re.search(rf"{name} Time: ([\d.]+)", "\n".join(plan)).group(1)) for name in ("Planning", "Execution")}
    return {"node": node, "cond": cond, "removedByFilter": removed, "sort": sort, "buffers": buffers,
            "planningMs": times["Planning"], "executionMs": times["Execution"]}


def plan_lines(plan: dict) -> list[str]:
    lines = [plan["node"] + (f", rows removed by filter {plan['removedByFilter']:,}" if plan["removedByFilter"] else "")]
    if plan["cond"]:
        lines.append(f"Cond: {plan['cond']}")
    if plan["sort"]:
        lines.append(plan["sort"])
    lines.append(f"{plan['buffers']}; planning {plan['planningMs']:.2f} ms, execution {plan['executionMs']:.2f} ms")
    return lines


def measure(principal, kb, documents: int, runs: int) -> dict:
    from chalicelib.api.views import document_view
    from chalicelib.auth.access import kb_to_read
    from chalicelib.documents import service
    from chalicelib.documents.listing import DocumentQuery
    from chalicelib.storage import connection, documents as document_rows

    kb_id, out = kb["id"], []
    for name, fields in cases(documents):
        fields = dict(fields)
        rows_in = fields.pop("deep", 0)
        base = DocumentQuery(limit=100, **fields)
        after = deep_token(principal, kb_id, base, rows_in) if rows_in else None
        for limit in (100, 1000):
            query = replace(base, limit=limit, after=after)
            rows, _ = service.list_documents(principal, kb_id, query)

            def page_only(q=query):
                with connection() as conn:
                    document_rows.list_page(conn, principal, kb_id, replace(q, limit=q.limit + 1))

            row = {"case": name, "limit": limit, "rows": len(rows), "rowsIn": rows_in,
                   "service": timed(lambda q=query: service.list_documents(principal, kb_id, q), runs),
                   "pageQuery": timed(page_only, runs),
                   "views": timed(lambda r=rows: json.dumps([document_view(x) for x in r], default=str), runs),
                   "plan": explain(*page_query(principal, kb_id, query))}
            out.append(row)
            s = row["service"]
            print(f"{name:32} limit {limit:4}: {len(rows):4} rows  service p50 {s['p50']:6.1f} p95 {s['p95']:6.1f} ms"
                  f"  (page query p50 {row['pageQuery']['p50']:5.1f}, views+JSON {row['views']['p50']:5.1f})"
                  f"{'' if s['p95'] <= TARGET_MS else '  OVER ' + str(TARGET_MS) + ' ms'}")
            for line in plan_lines(row["plan"]):
                print(f"      {line}")

    def read_kb():
        with connection() as conn:
            kb_to_read(conn, principal, kb_id)
    access = {**timed(read_kb, runs), "plan": explain(*access_query(principal, kb_id), table="knowledge_bases kb")}
    print(f"access.kb_to_read alone (the knowledge base, without its stats): p50 {access['p50']:.1f} "
          f"p95 {access['p95']:.1f} ms")
    for line in plan_lines(access["plan"]):
        print(f"      {line}")
    return {"cases": out, "kbToRead": access}


def walk(principal, kb_id: str, documents: int) -> list[dict]:
    """Every page of each sort at limit 1000, following nextToken: each row once."""
    from chalicelib.documents import listing, service
    from chalicelib.documents.listing import DocumentQuery

    out = []
    for sort in listing.SORTS:
        ids, times, after = [], [], None
        while True:
            started = time.perf_counter()
            rows, token = service.list_documents(principal, kb_id, DocumentQuery(limit=1000, sort=sort, after=after))
            times.append((time.perf_counter() - started) * 1000)
            ids += [r["id"] for r in rows]
            if token is None:
                break
            after = listing.decode_token(token, kb_id, sort)
        complete = len(ids) == len(set(ids)) == documents
        out.append({"sort": sort, "pages": len(times), "rows": len(ids), "complete": complete,
                    "p50": statistics.median(times), "p95": percentile(times, 95), "max": max(times)})
        print(f"walk by {sort:9}: {len(times)} pages, {len(ids):,} rows, each once: {complete};"
              f" a page p50 {statistics.median(times):.1f} p95 {percentile(times, 95):.1f} max {max(times):.1f} ms")
        if not complete:
            raise SystemExit(f"the walk by {sort} saw {len(ids):,} rows ({len(set(ids)):,} distinct) of {documents:,}")
    return out


def through_api(key: str, kb_id: str, rows_in: int, runs: int) -> dict | None:
    """GET .../documents?limit=100 through API Gateway and the API Lambda, first page and
    the page rows_in rows in; None when the deployed API does not page yet."""
    import requests

    url = f"{local_env()['KB_API_URL']}/knowledge-bases/{kb_id}/documents"
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"
    probe = session.get(url, params={"limit": 1}, timeout=60)
    if probe.status_code != 200 or "nextToken" not in probe.json()["data"]:
        print(f"through the API: skipped, the deployed API does not page ({probe.status_code}); "
              "`.venv/bin/python localstack/stack.py up --no-demo` deploys the working tree")
        return None
    token = None
    for _ in range(rows_in // 1000):  # fetched 1000 at a time
        token = session.get(url, params={"limit": 1000, **({"nextToken": token} if token else {})},
                            timeout=60).json()["data"]["nextToken"]
    out = {}
    for name, params in (("first page", {"limit": 100}), ("deep", {"limit": 100, "nextToken": token})):
        session.get(url, params=params, timeout=60)
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            answer = session.get(url, params=params, timeout=60)
            times.append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 200 and len(answer.json()["data"]["items"]) == 100, answer.text[:300]
        out[name] = {"p50": statistics.median(times), "p95": percentile(times, 95)}
        print(f"through the API, {name:10} limit 100: p50 {out[name]['p50']:.1f} p95 {out[name]['p95']:.1f} ms")
    return out


def report(results: dict) -> str:
    """The section of docs/benchmarks.md (bench/report.py)."""
    n, target = results["documents"], results["targetMs"]
    lines = [f"{n:,} documents in one knowledge base: paths in a tree of 12 top folders of 30 parts, ten files a "
             "folder (an index.html and a README.md among them); 90 % PROCESSED, 5 % FAILED, 3 % PENDING, 2 % "
             "PROCESSING; updated over a year; inserted in one statement in random physical order, then analysed "
             "(`bench/documents_list.py`). Service-side: `documents.service.list_documents` in-process as the "
             "functions run it (logged in as `kb_app`, row-level security on): the access check, then the page. "
             "Beside it the page query alone, and the views and JSON the API adds. Deep: the page a walk by "
             "nextToken reached half-way through what the query matches. Median and p95 of "
             f"{results['runs']} calls; the plan is EXPLAIN (ANALYZE, BUFFERS) of the page query. "
             f"The target: p95 <= {target} ms service-side.", "",
             "| query | limit | rows | p50 ms | p95 ms | page query p50 ms | views + JSON p50 ms | plan of the page query |",
             "|---|---|---|---|---|---|---|---|"]
    for c in results["cases"]:
        s, plan = c["service"], c["plan"]
        scan = plan["node"].split(" (", 1)[0] + (f", {plan['removedByFilter']:,} filtered out" if plan["removedByFilter"] else "")
        sort = ", then a sort" if plan["sort"] else ""
        hits = plan["buffers"].replace("Buffers: ", "")
        over = " **over**" if s["p95"] > target else ""
        lines.append(f"| {c['case']} | {c['limit']} | {c['rows']:,} | {s['p50']:.1f} | {s['p95']:.1f}{over} | "
                     f"{c['pageQuery']['p50']:.1f} | {c['views']['p50']:.1f} | {scan}{sort}; {hits}; "
                     f"{plan['executionMs']:.2f} ms |")
    access = results["kbToRead"]
    hundreds = [c for c in results["cases"] if c["limit"] == 100]
    pages = statistics.median(c["service"]["p50"] for c in hundreds)
    query = statistics.median(c["pageQuery"]["p50"] for c in hundreds)
    share = (f" A page of 100 takes {pages:.1f} ms at the median, its page query {query:.1f} ms: nearly all the rest "
             "is this check." if access["p50"] > pages / 2 else "")
    lines += ["", f"The access check before each page (`access.kb_to_read`) alone: p50 {access['p50']:.1f} ms, p95 "
                  f"{access['p95']:.1f} ms; {access['plan']['node'].split(' (', 1)[0]} for the knowledge base alone, without its stats "
                  f"({access['plan']['buffers'].replace('Buffers: ', '')}, {access['plan']['executionMs']:.1f} ms).{share}",
              "", "Every page of each sort at limit 1000, each following the last one's nextToken:", "",
              "| sort | pages | rows, each once | page p50 ms | page p95 ms | max ms |", "|---|---|---|---|---|---|"]
    for w in results["walk"]:
        lines.append(f"| {w['sort']} | {w['pages']} | {w['rows']:,}, {'yes' if w['complete'] else 'NO'} | "
                     f"{w['p50']:.1f} | {w['p95']:.1f} | {w['max']:.1f} |")
    if results.get("api"):
        api = results["api"]
        lines += ["", "Through API Gateway on the emulator (HTTP, the API Lambda warm, its access check, the page, "
                      f"views and JSON), a page of 100: first page p50 {api['first page']['p50']:.0f} ms, p95 "
                      f"{api['first page']['p95']:.0f} ms; {n // 2:,} rows in p50 {api['deep']['p50']:.0f} ms, p95 "
                      f"{api['deep']['p95']:.0f} ms."]
    before, after = results["loadAverage"]
    lines += ["", f"Load average (1 min) when the run started: {before:.2f}, when it ended: {after:.2f}."]
    return "\n".join(lines)


def main() -> None:
    import os

    from common import as_the_functions

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="10,000 documents, 5 runs a case")
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--api-runs", type=int, default=20)
    args = parser.parse_args()
    documents, runs = (10_000, 5) if args.quick else (args.documents, args.runs)
    env = local_env()
    os.environ["DATABASE_URL"] = env["DATABASE_URL"]
    load_before = os.getloadavg()[0]
    principal, key, kb = setup(documents)
    try:
        with as_the_functions(principal):
            results = {"documents": documents, "runs": runs, "targetMs": TARGET_MS, **measure(principal, kb, documents, runs),
                       "walk": walk(principal, kb["id"], documents)}
        results["api"] = through_api(key, kb["id"], documents // 2, 3 if args.quick else args.api_runs)
    finally:
        delete(kb["id"])
    results["loadAverage"] = (load_before, os.getloadavg()[0])
    over = [f"{c['case']} (limit {c['limit']})" for c in results["cases"] if c["service"]["p95"] > TARGET_MS]
    print(f"p95 over {TARGET_MS} ms: {', '.join(over) if over else 'none'}")
    save_results("documents-list", args.quick, results)


if __name__ == "__main__":
    main()
