"""A real mixed folder through the deployed pipeline and in-process: prints figures, asserts nothing.

    .venv/bin/python -m bench.real_folder [--files 300] [--quick]

The folder is assembled when the benchmark runs, from files a Debian machine has: HTML
manuals and plain-text files (README, copyright, AUTHORS, NEWS, *.txt, *.md, *.rst) under
/usr/share/doc, plus the PDFs, DOCX files and Markdown page of tests/data/docs. The same files, once each:

- in-process: extract, chunk and embed one document after another in this process (the
  model loaded once, a thread per core), which is the work without the orchestration;
- deployed: put into the bucket under kb/{kbId}/<path> at once, through S3 -> SQS ->
  trigger -> Step Functions -> Lambda on the running local stack (`make up` first), until
  every document is PROCESSED or FAILED (read from the documents table).

Both rates (documents and chunks a minute, per-document time p50/p95) and their ratio,
with where the deployed documents spent their time (documents.step_durations).
"""
import argparse
import collections
import hashlib
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # as a script (report.py) and as -m bench.real_folder

from common import DATA, ROOT, aws_client, local_env, percentile, save_results  # noqa: E402
from ingestion import scratch_knowledge_base  # noqa: E402

DOC_ROOT = Path(os.environ.get("KB_BENCH_DOC_DIR", "/usr/share/doc"))
FOLDER = ROOT / ".kb" / "bench-cache" / "real-folder"
HTML_NAME = re.compile(r"\.x?html?$", re.I)
TEXT_NAME = re.compile(r"^(README.*|copyright|AUTHORS|NEWS|TODO.*|BUGS|THANKS|FAQ|INSTALL|NOTICE|changelog"
                       r"|.*\.(txt|md|rst))$")
# Emptier files say nothing; the few larger ones (Node.js's all.html, 8 MB) would make the
# run a test of one document. 95% of the HTML here is under 280 KB, of the text under 50 KB.
MIN_BYTES, MAX_BYTES = 100, 512 * 1024
COMPRESSED = {".gz", ".bz2", ".xz", ".zst"}
HTML_SHARE = 0.4  # of the files from /usr/share/doc; the rest text (a Debian doc tree has ~250 HTML, ~1,800 text)
STEPS = ("extract", "chunk", "embed", "store")


def candidates() -> tuple[list[Path], list[Path]]:
    """(HTML, text) files under DOC_ROOT within the size bounds, each content once, in path order."""
    html, text, seen = [], [], set()
    for path in sorted(DOC_ROOT.rglob("*")):
        if path.is_symlink() or not path.is_file() or not MIN_BYTES <= path.stat().st_size <= MAX_BYTES:
            continue
        kind = html if HTML_NAME.search(path.name) else text if TEXT_NAME.match(path.name) else None
        if kind is None or path.suffix in COMPRESSED:  # README.gz: a user would not upload the archive
            continue
        digest = hashlib.sha256(path.read_bytes()).digest()
        if digest not in seen:
            seen.add(digest)
            kind.append(path)
    return html, text


def spread(items: list, k: int) -> list:
    """k items evenly spaced over the list (so over many packages, not the first few)."""
    k = min(k, len(items))
    return [items[int(i * len(items) / k)] for i in range(k)]


def assemble(n_files: int) -> list[tuple[str, bytes]]:
    """[(path in the folder, bytes)]: the documents of tests/data/docs, then HTML and text from the doc
    tree, written to .kb/bench-cache/real-folder/ as well (for `kb docs upload` by hand)."""
    shared = sorted(p for p in (DATA / "docs").iterdir() if p.is_file())
    html, text = candidates()
    rest = max(0, n_files - len(shared))
    picked_html = spread(html, round(rest * HTML_SHARE))
    picked = [("shared/" + p.name, p) for p in shared]
    picked += [(str(p.relative_to(DOC_ROOT)), p) for p in picked_html + spread(text, rest - len(picked_html))]
    shutil.rmtree(FOLDER, ignore_errors=True)
    files = []
    for rel, path in picked[:n_files]:
        data = path.read_bytes()
        (FOLDER / rel).parent.mkdir(parents=True, exist_ok=True)
        (FOLDER / rel).write_bytes(data)
        files.append((rel, data))
    return files


def kind_of(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1].lower()
    for suffix, kind in ((".pdf", "pdf"), (".docx", "docx"), (".md", "markdown")):
        if name.endswith(suffix):
            return kind
    return "html" if HTML_NAME.search(name) else "text"


def in_process(files: list[tuple[str, bytes]], chunk_tokens: int, overlap: int) -> dict:
    """The pipeline's work on each document in turn, timed: extract, chunk, embed (not stored)."""
    from chalicelib.embeddings import get_provider
    from chalicelib.ingestion.chunk import chunk_document
    from chalicelib.ingestion.errors import IngestionError
    from chalicelib.ingestion.extract import extract

    embedder = get_provider("local")
    embedder.embed_query("warm up")  # the model loaded outside the timing, as in a warm worker
    per_doc, steps, chunks, failed = [], collections.Counter(), 0, collections.Counter()
    cpu_before = time.process_time()
    started = time.perf_counter()
    for rel, data in files:
        t0 = time.perf_counter()
        try:
            extracted = extract(data, rel.rsplit("/", 1)[-1])
            t1 = time.perf_counter()
            pieces = chunk_document(extracted, chunk_tokens, overlap, {})
            t2 = time.perf_counter()
            if not pieces:
                raise IngestionError("NO_TEXT", "no text")
            embedder.embed_documents([c.content for c in pieces])
            t3 = time.perf_counter()
            steps.update({"extract": t1 - t0, "chunk": t2 - t1, "embed": t3 - t2})
            chunks += len(pieces)
        except IngestionError as err:
            failed[err.code] += 1
        per_doc.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - started
    return rates(len(files) - sum(failed.values()), chunks, elapsed, per_doc) | {
        "failed": dict(failed), "stepSeconds": {k: round(v, 2) for k, v in steps.items()},
        "cpuSeconds": {"this process": round(time.process_time() - cpu_before, 1)}}


def rates(done: int, chunks: int, elapsed: float, per_doc: list[float]) -> dict:
    return {"processed": done, "chunks": chunks, "seconds": round(elapsed, 2),
            "documentsPerMinute": done / elapsed * 60, "chunksPerMinute": chunks / elapsed * 60,
            "perDocumentP50": percentile(per_doc, 50), "perDocumentP95": percentile(per_doc, 95)}


def finished_rows(kb_id: str, count: int, deadline: float) -> list[dict]:
    """The knowledge base's document rows once `count` are PROCESSED or FAILED (or at the deadline),
    read from the database as its owner: the API's pages would only add requests to the run."""
    import psycopg
    from psycopg.rows import dict_row

    query = ("SELECT s3_key, status, error_code, chunk_count, step_durations,"
             " extract(epoch FROM coalesce(processed_at, updated_at) - created_at) AS seconds"
             " FROM documents WHERE kb_id = %s AND kind = 'file'")
    with psycopg.connect(local_env()["DATABASE_URL"], autocommit=True, row_factory=dict_row) as conn:
        while True:
            rows = conn.execute(query, (kb_id,)).fetchall()
            done = len(rows) == count and all(r["status"] in ("PROCESSED", "FAILED") for r in rows)
            if done or time.perf_counter() > deadline:
                return rows
            time.sleep(0.5)


def deployed(files: list[tuple[str, bytes]], api, headers, s3, bucket, kb) -> dict:
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    for rel, data in files:
        s3.put_object(Bucket=bucket, Key=f"kb/{kb['id']}/{rel}", Body=data)
    uploaded = time.perf_counter() - started
    rows = finished_rows(kb["id"], len(files), started + 3600)
    elapsed = time.perf_counter() - started
    cpu = cpu_used(cpu_before, cpu_seconds())
    done = [r for r in rows if r["status"] == "PROCESSED"]
    steps = collections.Counter()
    for r in rows:
        steps.update({k: v / 1000 for k, v in r["step_durations"].items()})
    failed = collections.Counter(r["error_code"] or r["status"] for r in rows if r["status"] != "PROCESSED")
    failed["UNFINISHED"] += len(files) - len(rows)
    work = [sum(r["step_durations"].values()) / 1000 for r in done]
    return rates(len(done), sum(r["chunk_count"] for r in done), elapsed, [float(r["seconds"]) for r in done]) | {
        "uploadSeconds": round(uploaded, 2), "cpuSeconds": cpu, "failed": {k: v for k, v in failed.items() if v},
        "stepSeconds": {k: round(v, 2) for k, v in steps.items()},
        "workP50": percentile(work, 50) if work else 0, "workP95": percentile(work, 95) if work else 0,
        "slowest": [{"path": r["s3_key"].split("/", 2)[2], "chunks": r["chunk_count"], "seconds": float(r["seconds"]),
                     "steps": r["step_durations"]}
                    for r in sorted(done, key=lambda r: -float(r["seconds"]))[:3]]}


def cpu_seconds() -> dict[int, tuple[str, float]]:
    """{pid: (group, CPU seconds so far)} of the local stack's processes: each Lambda worker by
    its function (the emulator runs every execution environment as a process), the emulator
    itself, PostgreSQL and Redis. Wall time on a shared machine says little; CPU time does."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        worker = re.search(r"ministack-lambda-kb-service-([a-z-]+?)-[^-/]+/_worker", cmd)
        group = (worker.group(1) if worker else "emulator" if "bin/ministack" in cmd
                 else "postgres" if cmd.startswith("postgres") or "/bin/postgres" in cmd
                 else "redis" if "redis-server" in cmd else None)
        if group:
            out[int(proc.name)] = (group, (int(fields[11]) + int(fields[12])) / tick)
    return out


def cpu_used(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds each group used between two snapshots (a process that ended in between is lost)."""
    used = collections.Counter()
    for pid, (group, seconds) in after.items():
        old = before.get(pid)
        used[group] += seconds - (old[1] if old and old[0] == group else 0)
    return {group: round(seconds, 1) for group, seconds in used.most_common() if seconds >= 0.05}


def threads_label(function: dict) -> str:
    return function.get("threads") if function.get("threads") not in (None, "", "0") else "all cores"


def pipeline_settings() -> dict:
    """The reserved concurrency and embedding threads the deployed functions run with."""
    lam = aws_client("lambda")
    out = {}
    for step in ("extract", "chunk", "embed", "store"):
        name = f"kb-service-pipeline-{step}"
        try:
            reserved = lam.get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions")
            variables = lam.get_function_configuration(FunctionName=name).get("Environment", {}).get("Variables", {})
        except Exception as exc:  # an older stack: the figures stand without it
            out[step] = {"error": type(exc).__name__}
            continue
        out[step] = {"reserved": reserved, "threads": variables.get("KB_EMBED_THREADS")}
    return out


def left_behind(api: str, headers: dict, kb_id: str) -> None:
    """The scratch knowledge base is deleted when its block ends, but a loaded stack may answer
    that request late: ask again with more patience rather than leave its chunks behind."""
    import requests

    for _ in range(3):
        got = requests.get(f"{api}/knowledge-bases/{kb_id}", headers=headers, timeout=120)
        if got.status_code == 404:
            return
        requests.delete(f"{api}/knowledge-bases/{kb_id}", headers=headers, timeout=300)
    print(f"could not delete the scratch knowledge base {kb_id}", file=sys.stderr)


def run(n_files: int, bracket: bool = True) -> dict:
    files = assemble(n_files)
    kinds = collections.Counter(kind_of(rel) for rel, _ in files)
    load_before = os.getloadavg()[0]
    with scratch_knowledge_base("bench-folder") as (api, headers, s3, bucket, kb):
        chunking = kb["chunking"]
        # The sizes the pipeline's Chunk step cuts to (the child's, held to the model's window).
        row = {"child_tokens": chunking.get("childTokens"),
               "chunk_tokens": chunking.get("chunkTokens") or chunking.get("parentTokens"),
               "chunk_overlap": chunking["chunkOverlap"], "embedding_provider": kb["embedding"]["provider"]}
        from chalicelib.ingestion.context import fitting_overlap, fitting_tokens
        sizes = (fitting_tokens(row), fitting_overlap(row))
        # In-process before and after the deployed run, the rate their mean: on a machine shared
        # with other work the load changes within minutes. The knowledge base is deleted last.
        local = [in_process(files, *sizes)]
        load_between = os.getloadavg()[0]
        remote = deployed(files, api, headers, s3, bucket, kb)
        if bracket:
            local.append(in_process(files, *sizes))
    left_behind(api, headers, kb["id"])
    local = {**local[0], "runs": local, **{key: statistics.mean(run[key] for run in local) for key in (
        "documentsPerMinute", "chunksPerMinute", "perDocumentP50", "perDocumentP95", "seconds")}}
    results = {"files": len(files), "bytes": sum(len(d) for _, d in files), "kinds": dict(kinds),
               "folder": str(FOLDER), "cpus": os.cpu_count(), "inProcess": local, "deployed": remote,
               "ratio": remote["documentsPerMinute"] / local["documentsPerMinute"],
               "chunksRatio": remote["chunksPerMinute"] / local["chunksPerMinute"],
               "loadAverage": [round(load_before, 2), round(load_between, 2), round(os.getloadavg()[0], 2)],
               "pipeline": pipeline_settings()}
    return results


def lines(r: dict) -> list[str]:
    """The figures as the benchmark prints them and the report quotes them."""
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["kinds"].items(), key=lambda kv: -kv[1]))
    out = [f"real folder  {r['files']} files ({kinds}), {r['bytes'] / 2**20:.1f} MB: /usr/share/doc and tests/data/docs"]
    for label, row in (("in-process", r["inProcess"]), ("deployed", r["deployed"])):
        failed = ", ".join(f"{k} {v}" for k, v in row["failed"].items()) or "none"
        steps = ", ".join(f"{k} {row['stepSeconds'][k]:.1f}" for k in STEPS if k in row["stepSeconds"])
        runs = (f"; mean of {len(row['runs'])} runs, before and after the deployed one: "
                + " and ".join(f"{x['documentsPerMinute']:.1f}" for x in row["runs"])) if len(row.get("runs", [])) > 1 else ""
        out.append(f"{label:12} {row['documentsPerMinute']:8.1f} documents/min  {row['chunksPerMinute']:8.1f} chunks/min  "
                   f"per document p50 {row['perDocumentP50']:.2f} s p95 {row['perDocumentP95']:.2f} s  "
                   f"({row['processed']} PROCESSED, {row['chunks']} chunks in {row['seconds']:.1f} s; failed: {failed}; "
                   f"step seconds summed: {steps}{runs})")
    d = r["deployed"]
    out.append(f"             deployed / in-process x{r['ratio']:.2f} documents/min, x{r['chunksRatio']:.2f} chunks/min "
               f"(deployed per document: in the pipeline p50 {d['perDocumentP50']:.2f} s p95 {d['perDocumentP95']:.2f} s "
               f"from upload to done, working p50 {d['workP50']:.2f} s p95 {d['workP95']:.2f} s; upload {d['uploadSeconds']:.1f} s)")
    for label, row in (("in-process", r["inProcess"]), ("deployed", d)):
        cpu = row["cpuSeconds"]
        out.append(f"             CPU seconds {label}: {sum(cpu.values()):.1f} "
                   f"({', '.join(f'{k} {v:.1f}' for k, v in cpu.items())})")
    out.append(f"             load average (1 min) {' / '.join(f'{x:.2f}' for x in r['loadAverage'])} "
               f"(start / between / end), {r['cpus']} cores; pipeline: "
               + ", ".join(f"{k} {v.get('reserved')} workers" + (f" x {threads_label(v)} threads"
                                                                    if k in ("chunk", "embed") else "")
                           for k, v in r["pipeline"].items() if "error" not in v))
    return out


def report(r: dict) -> str:
    """The section of docs/benchmarks.md (bench/report.py)."""
    kinds = ", ".join(f"{v} {k}" for k, v in sorted(r["kinds"].items(), key=lambda kv: -kv[1]))
    rows = ["| pipeline | documents/min | chunks/min | per document p50 s | per document p95 s | PROCESSED | not |",
            "|---|---|---|---|---|---|---|"]
    for label, row in (("in-process (extract, chunk, embed)", r["inProcess"]),
                       ("deployed (S3, SQS, Step Functions, Lambda, PostgreSQL)", r["deployed"])):
        failed = ", ".join(f"{k} {v}" for k, v in row["failed"].items()) or "-"
        rows.append(f"| {label} | {row['documentsPerMinute']:.1f} | {row['chunksPerMinute']:.1f} | "
                    f"{row['perDocumentP50']:.2f} | {row['perDocumentP95']:.2f} | {row['processed']} | {failed} |")
    d, local = r["deployed"], r["inProcess"]
    runs = " and ".join(f"{x['documentsPerMinute']:.1f}" for x in local.get("runs", [local]))
    cpu = lambda row: ", ".join(f"{k} {v:.1f}" for k, v in row["cpuSeconds"].items())  # noqa: E731
    threads = ", ".join(f"{k} {v.get('reserved')}" + (f" x {threads_label(v)} threads"
                                                      if k in ("chunk", "embed") else "")
                        for k, v in r["pipeline"].items() if "error" not in v)
    return "\n".join([
        f"A folder as a user has one: {r['files']} files ({kinds}; {r['bytes'] / 2**20:.1f} MB), HTML manuals and "
        "text files from `/usr/share/doc` and the shared PDFs and DOCX files, put into the bucket at once and "
        "ingested by the local stack, against the same extraction, chunking and embedding in one process one "
        "document after another (the model loaded once, a thread per core; nothing stored). In-process ran "
        f"before and after the deployed run, the mean of {runs} documents/min (`bench/real_folder.py`).", "",
        *rows, "",
        f"Deployed / in-process: **x{r['ratio']:.2f}** documents a minute, x{r['chunksRatio']:.2f} chunks a minute. "
        f"A deployed document spent p50 {d['perDocumentP50']:.1f} s (p95 {d['perDocumentP95']:.1f} s) from its "
        f"upload to PROCESSED, of which its steps worked p50 {d['workP50']:.2f} s (p95 {d['workP95']:.2f} s); the "
        "rest it queued behind the steps' reserved concurrency.", "",
        f"CPU seconds: in-process {sum(local['cpuSeconds'].values()):.1f}; the local stack during the deployed "
        f"run {sum(d['cpuSeconds'].values()):.1f} ({cpu(d)}; the stack is shared, so other work on it counts "
        "too). Steps' time summed over documents, s: "
        + ", ".join(f"{k} {d['stepSeconds'][k]:.0f}" for k in STEPS if k in d["stepSeconds"])
        + f". Pipeline workers (reserved concurrency): {threads}. Load average (1 min) at the start, between "
        f"and at the end: {' / '.join(f'{x:.2f}' for x in r['loadAverage'])} on {r['cpus']} cores.", ""])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="12 files: checks the harness runs")
    args = parser.parse_args()
    results = run(12 if args.quick else args.files, bracket=not args.quick)
    save_results("real-folder", args.quick, results)
    print("\n".join(lines(results)))


if __name__ == "__main__":
    main()
