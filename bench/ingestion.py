"""Ingestion benchmark: prints figures, asserts nothing.

    .venv/bin/python bench/ingestion.py [--quick]

- extraction: pages per second over the shared PDFs (median and p95 of the runs);
- embedding: chunks per second with the local model, batched (64) against a
  one-at-a-time baseline run in the same process;
- end to end: documents per minute through S3 -> Lambda -> Step Functions on the
  running local stack (`make up` first), against the same work done in-process.
"""
import argparse
import json
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("KB_SHARED_DATA", ROOT.parent / "shared" / "data"))


def p95(values):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def bench_extraction(runs: int) -> dict:
    from chalicelib.ingestion.extract import extract

    pdfs = [(p.name, p.read_bytes()) for p in sorted((SHARED / "docs").glob("*.pdf"))]
    rates = []
    for _ in range(runs):
        started, pages = time.perf_counter(), 0
        for name, data in pdfs:
            pages += extract(data, name).page_count
        rates.append(pages / (time.perf_counter() - started))
    return {"pages": pages, "runs": runs, "median": statistics.median(rates), "p95": p95(rates),
            "spread": (min(rates), max(rates))}


def scifact_texts(n: int) -> list[str]:
    with open(SHARED / "scifact-subset" / "corpus.jsonl") as fh:
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
    return {"chunks": n, "runs": runs, "median": statistics.median(batched), "p95": p95(batched),
            "spread": (min(batched), max(batched)), "baseline_median": statistics.median(single)}


def bench_end_to_end(n_docs: int) -> dict:
    import boto3
    import requests

    env = dict(line.split("=", 1) for line in (ROOT / ".kb" / "local.env").read_text().splitlines() if "=" in line)
    api, key = env["KB_API_URL"], env["KB_API_KEY"]
    headers = {"Authorization": f"Bearer {key}"}
    kb = requests.post(f"{api}/knowledge-bases", json={"name": f"bench-{secrets.token_hex(3)}"},
                       headers=headers, timeout=60).json()["data"]
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                      aws_access_key_id="test", aws_secret_access_key="test")
    texts = scifact_texts(n_docs)
    started = time.perf_counter()
    for i, text in enumerate(texts):
        s3.put_object(Bucket=env["KB_BUCKET"], Key=f"kb/{kb['id']}/abstract-{i:04d}.txt", Body=text.encode())
    statuses = {}
    while time.perf_counter() - started < 600:
        items = requests.get(f"{api}/knowledge-bases/{kb['id']}/documents", headers=headers,
                             timeout=60).json()["data"]["items"]
        statuses = {d["filename"]: d["status"] for d in items}
        if len(statuses) == n_docs and all(s in ("PROCESSED", "FAILED") for s in statuses.values()):
            break
        time.sleep(0.5)
    elapsed = time.perf_counter() - started
    done = sum(s == "PROCESSED" for s in statuses.values())

    # Baseline: the same extract + chunk + embed work in this process, no orchestration.
    from chalicelib.embeddings import get_provider
    from chalicelib.ingestion.chunk import chunk_document
    from chalicelib.ingestion.extract import extract

    embedder = get_provider("local")
    embedder.embed_query("warm up")
    base_started = time.perf_counter()
    for i, text in enumerate(texts):
        chunks = chunk_document(extract(text.encode(), f"a{i}.txt"), 500, 50, {})
        embedder.embed_documents([c["content"] for c in chunks])
    base_elapsed = time.perf_counter() - base_started
    return {"documents": n_docs, "processed": done, "seconds": elapsed,
            "per_minute": done / elapsed * 60, "baseline_per_minute": n_docs / base_elapsed * 60}


def fifty_mb_pdf() -> bytes:
    """The 19-page GeoBase data model with 50 MB of incompressible data embedded in
    it, as scanned images would be: a big file with a modest amount of text."""
    import io
    import os

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(SHARED / "docs" / "GeoBase_NHNC1_Data_Model_UML_EN.pdf"))
    writer.add_attachment("scans.bin", os.urandom(50 * 1024 * 1024))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def bench_big_pdf() -> dict:
    import boto3
    import requests

    env = dict(line.split("=", 1) for line in (ROOT / ".kb" / "local.env").read_text().splitlines() if "=" in line)
    api, headers = env["KB_API_URL"], {"Authorization": f"Bearer {env['KB_API_KEY']}"}
    kb = requests.post(f"{api}/knowledge-bases", json={"name": f"bench-big-{secrets.token_hex(3)}"},
                       headers=headers, timeout=60).json()["data"]
    data = fifty_mb_pdf()
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                      aws_access_key_id="test", aws_secret_access_key="test")
    started = time.perf_counter()
    s3.put_object(Bucket=env["KB_BUCKET"], Key=f"kb/{kb['id']}/big.pdf", Body=data)
    doc = {}
    while time.perf_counter() - started < 900:
        items = requests.get(f"{api}/knowledge-bases/{kb['id']}/documents", headers=headers, timeout=60).json()["data"]["items"]
        doc = items[0] if items else {}
        if doc.get("status") in ("PROCESSED", "FAILED"):
            break
        time.sleep(1)
    return {"megabytes": len(data) / 2**20, "seconds": time.perf_counter() - started, "status": doc.get("status"),
            "pages": doc.get("pages"), "chunks": doc.get("chunks"), "steps": doc.get("stepDurationsMs")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the harness runs")
    parser.add_argument("--no-e2e", action="store_true", help="skip the run through the local stack")
    args = parser.parse_args()
    runs, n_chunks, n_docs = (1, 16, 3) if args.quick else (5, 256, 40)

    ex = bench_extraction(runs)
    print(f"extraction   {ex['median']:8.1f} pages/s median  p95 {ex['p95']:.1f}  "
          f"spread {ex['spread'][0]:.1f}-{ex['spread'][1]:.1f}  ({ex['pages']} PDF pages x {ex['runs']} runs)")
    em = bench_embedding(n_chunks, max(1, runs // 2 + 1))
    print(f"embedding    {em['median']:8.1f} chunks/s median  p95 {em['p95']:.1f}  "
          f"spread {em['spread'][0]:.1f}-{em['spread'][1]:.1f}  ({em['chunks']} SciFact abstracts, batch 64)")
    print(f"             baseline one at a time {em['baseline_median']:.1f} chunks/s: "
          f"batching x{em['median'] / em['baseline_median']:.2f}")
    if not args.no_e2e:
        e2e = bench_end_to_end(n_docs)
        print(f"end to end   {e2e['per_minute']:8.1f} documents/min through S3 -> Step Functions "
              f"({e2e['processed']}/{e2e['documents']} abstracts in {e2e['seconds']:.1f}s)")
        print(f"             baseline in-process {e2e['baseline_per_minute']:.1f} documents/min: "
              f"orchestration keeps x{e2e['per_minute'] / e2e['baseline_per_minute']:.2f} of it")
        if not args.quick:
            big = bench_big_pdf()
            print(f"one big PDF  {big['megabytes']:.1f} MB end to end in {big['seconds']:.1f}s: {big['status']}, "
                  f"{big['pages']} pages, {big['chunks']} chunks, steps (ms) {big['steps']}")


if __name__ == "__main__":
    main()
