"""How long each committed batch of a large document's store takes (issue 33; the sizes in
chalicelib/limits.py: STORE_BATCH_CHUNKS, DELETE_BATCH_CHUNKS). A document of N chunks
with random 384-dimension vectors (the local model's, into the live HNSW graph of m 24 and
BM25's postings) goes through storage/chunk_versions.replace in a scratch database of its
own; then a 10-chunk version replaces it, and the old rows are deleted in batches.

    .venv/bin/python bench/store_batches.py [N]     (make up first; N defaults to 5,000)

Measured on the local stack (two cores): N 5,000: 10 batches of 500, p50 1.88 s, max 2.63 s
(the graph growing from 0 to 5,000); the 5,000 old rows deleted in 0.2 s. N 3,000 at a load
average of 38: p50 2.53 s, max 3.99 s. At a load average of 18, batches at 18,000-20,500
rows took 10-20 s. Either way far inside the Store step's 300 s and the pipeline's 120 s statement timeout."""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import scratch_database  # noqa: E402
from chalicelib import limits  # noqa: E402
from chalicelib.ingestion.model import Chunk  # noqa: E402
from chalicelib.storage import chunk_versions, connection, document_status, knowledge_bases  # noqa: E402

WORDS = ["lighthouse", "keeper", "harbour", "storm", "lamp", "tide", "rock", "gull", "ship", "fog"]


def main(n: int) -> None:
    with scratch_database("kb_store_batches"):
        _run(n)


def _run(n: int) -> None:
    from chalicelib.auth import issue_key

    principal, _ = issue_key("org-bench", "alice")
    with connection() as conn:
        kb_id = knowledge_bases.insert_knowledge_base(
            conn, principal, name="Big", description="", visibility="private", provider="local",
            model="all-MiniLM-L6-v2", dim=384, chunk_tokens=500, chunk_overlap=50)
        doc = document_status.upsert_pending(conn, kb_id=kb_id, s3_key=f"kb/{kb_id}/big.md", filename="big.md",
                                             size_bytes=1, run_id="r1")
        vectors = np.random.default_rng(1).standard_normal((n, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        chunks = [Chunk(chunk_index=i, content=f"Section {i}: the {WORDS[i % 10]} and the {WORDS[i * 7 % 10]}"
                                               f" of part {i % 313}.", start_char=i, end_char=i + 1,
                        token_count=12, embedding=vectors[i]) for i in range(n)]
        real_stage, seconds = chunk_versions.stage, []

        def timed_stage(*args, **kwargs):
            started = time.perf_counter()
            answer = real_stage(*args, **kwargs)
            seconds.append(time.perf_counter() - started)
            print(f"  batch {len(seconds)}: {len(seconds) * limits.STORE_BATCH_CHUNKS:,} rows, {seconds[-1]:.2f} s",
                  flush=True)
            return answer

        chunk_versions.stage = timed_stage
        started = time.perf_counter()
        assert chunk_versions.replace(conn, doc_id=doc["id"], kb_id=kb_id, dim=384, chunks=chunks, page_count=None,
                                      run_id="r1")
        total, s = time.perf_counter() - started, np.array(seconds)
        print(f"store {n:,} chunks: {total:.1f} s, {len(s)} batches of {limits.STORE_BATCH_CHUNKS}: p50 {np.median(s):.2f} s,"
              f" p95 {np.percentile(s, 95):.2f} s, max {s.max():.2f} s")
        conn.execute("UPDATE documents SET current_run_id = 'r2' WHERE id = %s", (doc["id"],))
        started = time.perf_counter()
        assert chunk_versions.replace(conn, doc_id=doc["id"], kb_id=kb_id, dim=384, chunks=chunks[:10],
                                      page_count=None, run_id="r2")
        print(f"replaced by 10 chunks, {n:,} old rows deleted in batches of {limits.DELETE_BATCH_CHUNKS}:"
              f" {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000)
