"""Ingestion benchmark: prints figures, asserts nothing.

    .venv/bin/python bench/ingestion.py [--quick]

- extraction: pages per second over the shared PDFs (median and p95 of the runs);
- embedding: chunks per second with the local model, batched (64) against a
  one-at-a-time baseline run in the same process;
- end to end: a burst of 100 one-page files dropped into the bucket at once, documents
  per minute through S3 -> Lambda -> Step Functions on the running local stack (`make up`
  first) against the same work done in-process just before, all of them PROCESSED or
  not; the first burst meets cold trigger workers, the next ones warm. And one 50 MB
  PDF. Each in a knowledge base of its own, deleted afterwards.
"""
import argparse
import contextlib
import json
import secrets
import statistics
import time
from typing import Optional

from common import DATA, SCIFACT, aws_client, local_env, percentile, save_results


@contextlib.contextmanager
def scratch_knowledge_base(prefix: str, chunking: Optional[dict] = None, embedding: Optional[dict] = None):
    """(API URL, headers, S3 client, knowledge base) of the demo tenant, with the service's default
    chunking unless `chunking` says; the knowledge base and its documents are deleted when the block ends."""
    import requests

    env = local_env()
    api, headers = env["KB_API_URL"], {"Authorization": f"Bearer {env['KB_API_KEY']}"}
    kb = requests.post(f"{api}/knowledge-bases", json={"name": f"{prefix}-{secrets.token_hex(3)}",
                                                         **({"chunking": chunking} if chunking else {}),
                                                         **({"embedding": embedding} if embedding else {})},
                       headers=headers, timeout=60).json()["data"]
    s3 = aws_client("s3")
    try:
        yield api, headers, s3, env["KB_BUCKET"], kb
    finally:
        requests.delete(f"{api}/knowledge-bases/{kb['id']}", headers=headers, timeout=60)


def bench_extraction(runs: int) -> dict:
    from chalicelib.ingestion.extract import extract

    pdfs = [(p.name, p.read_bytes()) for p in sorted((DATA / "docs").glob("*.pdf"))]
    rates = []
    for _ in range(runs):
        started, pages = time.perf_counter(), 0
        for name, data in pdfs:
            pages += extract(data, name).page_count
        rates.append(pages / (time.perf_counter() - started))
    return {"pages": pages, "runs": runs, "median": statistics.median(rates), "p95": percentile(rates, 95),
            "spread": (min(rates), max(rates))}


def scifact_texts(n: int) -> list[str]:
    with open(SCIFACT / "corpus.jsonl") as fh:
        return [json.loads(line)["text"] for _, line in zip(range(n), fh)]


def bench_embedding(n: int, runs: int) -> dict:
    from chalicelib.embeddings import get_provider

    embedder = get_provider("local")
    texts = scifact_texts(n)
    embedder.embed_documents(texts[:8])  # load the model outside the timing
    batched, single = [], []
    for _ in range(runs):
        started = time.perf_counter()
        embedder.embed_documents(texts)
        batched.append(n / (time.perf_counter() - started))
        started = time.perf_counter()
        for text in texts[: max(8, n // 4)]:
            embedder.embed_query(text)
        single.append(max(8, n // 4) / (time.perf_counter() - started))
    return {"chunks": n, "runs": runs, "median": statistics.median(batched), "p95": percentile(batched, 95),
            "spread": (min(batched), max(batched)), "baseline_median": statistics.median(single)}


def bench_end_to_end(n_docs: int) -> dict:
    texts = scifact_texts(n_docs)
    # Baseline first, while the stack is idle (afterwards it is still deleting the burst):
    # the same extract + chunk + embed work in this process, no orchestration.
    from chalicelib.embeddings import get_provider
    from chalicelib.ingestion.chunk import chunk_document
    from chalicelib.ingestion.extract import extract

    embedder = get_provider("local")
    embedder.embed_query("warm up")
    base_started = time.perf_counter()
    for i, text in enumerate(texts):
        chunks = chunk_document(extract(text.encode(), f"a{i}.txt"), 500, 50, {})
        embedder.embed_documents([c.content for c in chunks])
    base_elapsed = time.perf_counter() - base_started

    with scratch_knowledge_base("bench") as (api, headers, s3, bucket, kb):
        started = time.perf_counter()
        for i, text in enumerate(texts):
            s3.put_object(Bucket=bucket, Key=f"kb/{kb['id']}/abstract-{i:04d}.txt", Body=text.encode())
        statuses = wait_for_documents(api, headers, kb["id"], n_docs, started + 600)
        elapsed = time.perf_counter() - started
    done = sum(d["status"] == "PROCESSED" for d in statuses.values())
    time.sleep(min(20, n_docs / 5))  # the deletions' events drain before the next run
    return {"documents": n_docs, "processed": done, "seconds": elapsed,
            "per_minute": done / elapsed * 60, "baseline_per_minute": n_docs / base_elapsed * 60}


def wait_for_documents(api: str, headers: dict, kb_id: str, count: int, deadline: float) -> dict:
    """{filename: status} once `count` documents have finished (or at the deadline)."""
    import requests

    statuses = {}
    while time.perf_counter() < deadline:
        items = requests.get(f"{api}/knowledge-bases/{kb_id}/documents", headers=headers,
                             timeout=60).json()["data"]["items"]
        statuses = {d["filename"]: d for d in items}
        if len(statuses) == count and all(d["status"] in ("PROCESSED", "FAILED") for d in statuses.values()):
            break
        time.sleep(0.5)
    return statuses


def fifty_mb_pdf() -> bytes:
    """The 19-page GeoBase data model with 50 MB of incompressible data embedded in
    it, as scanned images would be: a big file with a modest amount of text."""
    import io
    import os

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(DATA / "docs" / "GeoBase_NHNC1_Data_Model_UML_EN.pdf"))
    writer.add_attachment("scans.bin", os.urandom(50 * 1024 * 1024))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def bench_big_pdf(data: bytes) -> dict:
    with scratch_knowledge_base("bench-big") as (api, headers, s3, bucket, kb):
        started = time.perf_counter()
        s3.put_object(Bucket=bucket, Key=f"kb/{kb['id']}/big.pdf", Body=data)
        doc = wait_for_documents(api, headers, kb["id"], 1, started + 900).get("big.pdf", {})
        seconds = time.perf_counter() - started
    return {"megabytes": len(data) / 2**20, "seconds": seconds, "status": doc.get("status"),
            "pages": doc.get("pages"), "chunks": doc.get("chunks"), "steps": doc.get("stepDurationsMs")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the harness runs")
    parser.add_argument("--no-e2e", action="store_true", help="skip the run through the local stack")
    args = parser.parse_args()
    runs, n_chunks, n_docs = (1, 16, 3) if args.quick else (5, 256, 100)

    ex = bench_extraction(runs)
    print(f"extraction   {ex['median']:8.1f} pages/s median  p95 {ex['p95']:.1f}  "
          f"spread {ex['spread'][0]:.1f}-{ex['spread'][1]:.1f}  ({ex['pages']} PDF pages x {ex['runs']} runs)")
    em = bench_embedding(n_chunks, max(1, runs // 2 + 1))
    print(f"embedding    {em['median']:8.1f} chunks/s median  p95 {em['p95']:.1f}  "
          f"spread {em['spread'][0]:.1f}-{em['spread'][1]:.1f}  ({em['chunks']} SciFact abstracts, batch 64)")
    print(f"             baseline one at a time {em['baseline_median']:.1f} chunks/s: "
          f"batching x{em['median'] / em['baseline_median']:.2f}")
    results = {"extraction": ex, "embedding": em, "endToEnd": [], "bigPdf": []}
    if not args.no_e2e:
        results["endToEnd"] = [bench_end_to_end(n_docs) for _ in range(1 if args.quick else 3)]
        print_end_to_end(results["endToEnd"])
        if not args.quick:
            data = fifty_mb_pdf()
            results["bigPdf"] = [bench_big_pdf(data) for _ in range(3)]
            print_big_pdf(results["bigPdf"])
    save_results("ingestion", args.quick, results)  # report.py's seed targets read it


def print_end_to_end(runs: list[dict]) -> None:
    rates = [r["per_minute"] for r in runs]
    baseline = statistics.median(r["baseline_per_minute"] for r in runs)
    each = "; ".join(f"{r['processed']}/{r['documents']} PROCESSED in {r['seconds']:.1f}s "
                     f"(x{r['per_minute'] / r['baseline_per_minute']:.2f})" for r in runs)
    print(f"end to end   {statistics.median(rates):8.1f} documents/min median  spread {min(rates):.1f}-{max(rates):.1f}"
          f"  through S3 -> Step Functions ({each})")
    print(f"             baseline in-process {baseline:.1f} documents/min: "
          f"orchestration keeps x{statistics.median(rates) / baseline:.2f} of it")


def print_big_pdf(runs: list[dict]) -> None:
    seconds, last = [r["seconds"] for r in runs], runs[-1]
    print(f"one big PDF  {last['megabytes']:.1f} MB end to end in {statistics.median(seconds):.1f}s median "
          f"(spread {min(seconds):.1f}-{max(seconds):.1f}, {len(runs)} runs): {last['status']}, "
          f"{last['pages']} pages, {last['chunks']} chunks, steps of the last run (ms) {last['steps']}")


if __name__ == "__main__":
    main()
