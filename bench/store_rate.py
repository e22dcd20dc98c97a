"""Chunks stored per second into a large table, by store batch size and by how many documents
are stored at once: what chalicelib/limits.py's STORE_BATCH_CHUNKS and STORE_CONCURRENCY are
chosen from.

    .venv/bin/python bench/store_rate.py [--base 50000] [--chunks 2000] [--sizes 250,500,1000,2000]
                                         [--writers 1,2] [--spread]      (make up first)
    .venv/bin/python bench/store_rate.py --into kb_bench ...   (the cases only, into the largest
                                         knowledge base of a database that holds one already)

A scratch database of its own (migrated) is first filled with --base chunks of random
384-dimension vectors (the local model's, into the live HNSW graph and BM25's postings) in one
knowledge base. Then, for each batch size and number of writers, each writer stores a new
document of --chunks chunks through storage/chunk_versions.replace (the Store step's path: a
transaction a batch, then the switch), each on a connection of its own, all at once; by default
into that same knowledge base (an archive imported into one knowledge base, whose BM25
statistics rows its writers share), with --spread each into a knowledge base of its own.
Reported per case: chunks stored per second (all writers' chunks over the wall time), and the
median seconds of one batch's transaction. The table grows as the cases run (each case's
documents stay), so the cases alternate small and large batches. The last line is the results
as JSON.

Filling through the Store path runs at the store rate itself (a million chunks would take hours
here); --into instead stores the cases into the largest knowledge base of an existing database,
such as the one bench/retrieval.py grows to a million chunks by bulk load and index builds."""
import argparse
import json
import os
import secrets
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import scratch_database, use_database  # noqa: E402
from chalicelib import limits  # noqa: E402
from chalicelib.ingestion.model import Chunk  # noqa: E402
from chalicelib.storage import chunk_versions, connection, db, document_status, knowledge_bases  # noqa: E402

WORDS = ["lighthouse", "keeper", "harbour", "storm", "lamp", "tide", "rock", "gull", "ship", "fog",
         "ledger", "cargo", "sail", "anchor", "mast", "reef", "beacon", "rope", "bell", "chart"]
DIM = 384
RUN = secrets.token_hex(3)


def chunks(n: int, seed: int) -> list[Chunk]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    words = rng.integers(0, len(WORDS), (n, 40))
    return [Chunk(chunk_index=i, content=" ".join(WORDS[w] for w in words[i]) + f" part {seed}-{i}.",
                  start_char=i, end_char=i + 1, token_count=48, embedding=vectors[i]) for i in range(n)]


class Timed:
    """chunk_versions.stage with each call's seconds kept (stage is one batch's transaction)."""

    def __init__(self):
        self.real, self.seconds, self.lock = chunk_versions.stage, [], threading.Lock()

    def __call__(self, *args, **kwargs):
        started = time.perf_counter()
        answer = self.real(*args, **kwargs)
        with self.lock:
            self.seconds.append(time.perf_counter() - started)
        return answer


def new_document(kb_id: str, name: str) -> str:
    with connection() as conn:
        return document_status.upsert_pending(conn, kb_id=kb_id, s3_key=f"kb/{kb_id}/{name}", filename=name,
                                              size_bytes=1, run_id="r1")["id"]


def new_kb(principal, name: str) -> str:
    with connection() as conn:
        return knowledge_bases.insert_knowledge_base(
            conn, principal, name=name, description="", visibility="private", provider="local",
            model="all-MiniLM-L6-v2", dim=DIM, chunk_tokens=500, chunk_overlap=50)


def store(kb_id: str, doc_id: str, batch: list[Chunk], errors: list) -> None:
    try:
        with db.open_connection(os.environ["DATABASE_URL"], "pipeline") as conn:
            assert chunk_versions.replace(conn, doc_id=doc_id, kb_id=kb_id, dim=DIM, chunks=batch, page_count=None,
                                          run_id="r1")
    except Exception as exc:  # reported, not hidden in a thread
        errors.append(exc)


def case(kb_ids: list[str], size: int, n: int, seed: int) -> dict:
    limits.STORE_BATCH_CHUNKS = size
    timed = chunk_versions.stage = Timed()
    # Names of this run alone: under --into an earlier run's document of the same name is stored
    # already, and Store resumes it (storing nothing) instead of writing it again.
    work = [(kb_id, new_document(kb_id, f"w{RUN}-{seed}-{i}.md"), chunks(n, seed + i))
            for i, kb_id in enumerate(kb_ids)]
    errors: list = []
    threads = [threading.Thread(target=store, args=(*w, errors)) for w in work]
    failed = None
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    chunk_versions.stage = timed.real
    if errors:  # a batch over the pipeline's statement or lock timeout: a size that does not fit
        failed = f"{type(errors[0]).__name__}: {errors[0]}"[:300]
    return {"batch": size, "writers": len(kb_ids), "chunks": n * len(kb_ids), "failed": failed, "seconds": round(wall, 2),
            "chunksPerSecond": round(n * len(kb_ids) / wall, 1),
            "batchSecondsMedian": round(statistics.median(timed.seconds), 3) if timed.seconds else None}


def table_rows() -> int:
    with connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM chunks").fetchone()["n"]


def largest_kb() -> str:
    with connection() as conn:
        return conn.execute("SELECT kb_id FROM chunks GROUP BY kb_id ORDER BY count(*) DESC LIMIT 1").fetchone()["kb_id"]


def run(args) -> list[dict]:
    from chalicelib.auth import issue_key

    principal, _ = issue_key("org-bench", "alice")
    base_kb = largest_kb() if args.into else new_kb(principal, "Archive")
    started, filled = time.perf_counter(), args.base if args.into else 0  # --into: the table as it is
    limits.STORE_BATCH_CHUNKS = 2000
    while filled < args.base:  # documents of 10,000 chunks, as an archive's large files would be
        n, errors = min(10_000, args.base - filled), []
        store(base_kb, new_document(base_kb, f"base-{filled}.md"), chunks(n, 10_000 + filled), errors)
        if errors:
            raise errors[0]
        filled += n
        print(f"  base: {filled:,} chunks, {filled / (time.perf_counter() - started):.0f}/s", flush=True)
    results, rows = [], table_rows()
    sizes = args.sizes
    order = [s for pair in zip(sizes, reversed(sizes)) for s in pair][:len(sizes)]  # small and large alternate
    for writers in args.writers:
        for size in order:
            kbs = ([new_kb(principal, f"Spread {writers}-{size}-{i}") for i in range(writers)] if args.spread
                   else [base_kb] * writers)
            result = {**case(kbs, size, args.chunks, seed=len(results) * 100), "tableRows": table_rows()}
            if result["tableRows"] - rows != result["chunks"] and not result["failed"]:  # a rate of nothing stored
                result["failed"] = f"stored {result['tableRows'] - rows:,} of {result['chunks']:,} chunks"
            rows = result["tableRows"]
            print(f"batch {size:>5}, writers {writers}: {result['chunksPerSecond']:>7.1f} chunks/s,"
                  + (f" FAILED ({result['failed']})," if result["failed"] else "") +
                  f" batch p50 {result['batchSecondsMedian']} s, table {result['tableRows']:,} rows", flush=True)
            results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=int, default=50_000)
    parser.add_argument("--chunks", type=int, default=2000, help="chunks of each writer's document")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[250, 500, 1000, 2000])
    parser.add_argument("--writers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    parser.add_argument("--spread", action="store_true", help="each writer into a knowledge base of its own")
    parser.add_argument("--into", metavar="DATABASE", help="an existing database's largest knowledge base (its "
                        "documents stay), not a scratch database filled to --base")
    args = parser.parse_args()
    if args.into:
        use_database(args.into)
        args.base = table_rows()
        results = run(args)
    else:
        with scratch_database("kb_store_rate"):
            results = run(args)
    print(json.dumps({"base": args.base, "spread": args.spread, "into": args.into, "cases": results}))


if __name__ == "__main__":
    main()
