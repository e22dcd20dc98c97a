"""`make bench QUICK=1`'s harness runs end to end and writes its report; its figures are not judged here."""
import json
import re
import subprocess
import sys
import time

import pytest

from chalicelib import limits
from tests.conftest import ROOT

RESULTS = ROOT / ".kb" / "bench-results"


# The benchmarks point the deployed API at their own database while they time it (bench/api.py's
# api_pointed_at): no other test may call the API meanwhile.
@pytest.mark.serial
def test_quick_benchmarks_print_their_figures_and_write_the_report():
    started = time.time()
    out = subprocess.run([sys.executable, "-u", str(ROOT / "bench" / "report.py"), "--quick"],
                         capture_output=True, text=True, timeout=900, cwd=ROOT / "bench")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for label in ("pages/s", "chunks/s", "documents/min"):
        assert re.search(r"\d+\.\d+ " + re.escape(label), out.stdout), out.stdout
    assert "3/3 PROCESSED in" in out.stdout
    assert re.search(r"first query of a fresh process, onnx +: \d+\.\d\d s", out.stdout), out.stdout
    assert re.search(r"deployed / in-process x\d+\.\d\d documents/min", out.stdout), out.stdout

    report = (RESULTS / "benchmarks.md").read_text()
    assert (RESULTS / "benchmarks.md").stat().st_mtime >= started
    for method in ("ours: semantic", "ours: keyword", "ours: hybrid", "BM25 (rank_bm25)", "Chroma (HNSW, same model)"):
        assert re.search(rf"\| {re.escape(method)} \| [01]\.\d{{4}} \|", report), method
    corpus_chunks = json.loads((RESULTS / "retrieval-quick.json").read_text())["chunks"]
    for size in (f"{corpus_chunks:,}", "1,000"):  # the real quick corpus, then a synthetic size
        for strategy in ("semantic | miss", "semantic | hit", "keyword | miss", "hybrid | miss", "hybrid | hit"):
            assert re.search(rf"\| {size} \| {re.escape(strategy)} \|( \d+\.\d \|){{3}} [\d.]+-[\d.]+ \|( \d+\.\d \|){{3}}",
                             report), (size, strategy)
    # throughput per client count (the quick levels: a worker each)
    assert re.findall(r"^\| (\d+) \| \d+\.\d \| \d+\.\d \| \d+\.\d \|$", report, re.M) == ["1", "2", "4"]
    assert "## Local embedding model: ONNX against PyTorch" in report
    # a real text file through the Extract and Chunk steps, with each step's peak memory
    assert "## A large text file through Extract and Chunk" in report
    assert re.search(r"^\| chunk \| \d+\.\d \| \d+\.\d \| [\d.-]+ \| [\d,]+ \| 2,048 \| 900 \|$", report, re.M)
    # the server's pgvector against the wheel's and a -march=native build, each as a ratio to it
    assert re.search(r"^\| portable \| (\d+\.\d\d / \d+\.\d\d \(×1\.00\) \| ){3}\d+\.\d \(×1\.00\) \|$", report, re.M)
    assert re.search(r"^\| native \| (\d+\.\d\d / \d+\.\d\d \(×\d\.\d\d\) \| ){3}", report, re.M)
    for texts in ("SciFact abstracts", "SciFact train queries", "half abstracts, half queries"):
        assert re.search(rf"^\| {texts}[^|]*, \d+ \| \d+\.\d \|", report, re.M), texts  # ONNX texts/s
    service_weight = f"{limits.HYBRID_WEIGHTS[0]:.1f}".replace(".", r"\.")
    assert re.search(rf"^\| score \| {service_weight} \| [01]\.\d{{4}} \| [01]\.\d{{4}} \| the service", report, re.M)  # fusion
    # the keyword top 10 against exact BM25, at each size
    assert len(re.findall(r"^\| [\d,]+ \| [01]\.\d{3} \| [01]\.\d \| [\d,]+ / [\d,]+ \| \d+\.\d \|$", report, re.M)) == 2
    assert re.search(r"^\| 0\.30 \| [01]\.\d{3} \| [01]\.\d{3} \|", report, re.M)  # what a minScore keeps
    for strategy in ("semantic", "keyword"):  # row-level security's cost, at each size
        assert len(re.findall(rf"^\| [\d,]+ \| {strategy} \|( \d+\.\d \|){{4}} \d+\.\d\d \|$", report, re.M)) == 2
    # the float16 model's vectors against the float32 model's (issue 30), and each file's size
    assert "## Local model: float16 weights" in report
    assert re.search(r"^\| SciFact abstracts[^|]* \| 16 \| (0\.\d{7}|1\.0000000) \|", report, re.M)
    assert re.search(r"^\| model\.onnx, MiB \| \d+\.\d \| \d+\.\d \|$", report, re.M)
    # a real folder through the deployed pipeline and in-process, each with its rates
    assert "## Ingesting a real folder" in report
    assert len(re.findall(r"^\| (in-process|deployed) \([^)]*\) \| \d+\.\d \| \d+\.\d \| \d+\.\d\d \| \d+\.\d\d \| \d+ \|",
                          report, re.M)) == 2
    # pages of documents: each sort's first page at limit 100, and every page of each sort walked by nextToken
    for sort in ("path", "updatedAt", "status"):
        assert re.search(rf"^\| {sort}, first page \| 100 \| 100 \| \d+\.\d \| \d+\.\d( \*\*over\*\*)? \|", report, re.M), sort
        assert re.search(rf"^\| {sort} \| 10 \| 10,000, yes \|", report, re.M), sort
    # seed 004's targets beside the run's figures (the quick ingestion has no 50 MB file)
    assert "## Targets" in report
    for target in ("queries under 2 s", "> 80% relevant chunks in the top 3", "1000+ concurrent users"):
        assert re.search(rf"^\| {re.escape(target)} \| [^|]+ \| (yes|no|not measured) \|", report, re.M), target
    figures = json.loads((RESULTS / "benchmarks.json").read_text())
    # the one run both files come from: its date, commit and load average
    run = figures["run"]
    assert run["wholeRun"] and run["date"] == run["startedAt"][:10] and run["endedAt"] >= run["startedAt"], run
    assert run["commit"] and run["loadAverage"]["start"] >= 0 and run["loadAverage"]["end"] >= 0, run
    assert f"at commit {run['commit']}" in report and f"on {run['date']}" in report
    assert figures["ingestion"]["embeddingChunksPerSecond"] > 0 and figures["ingestion"]["endToEndDocumentsPerMinute"] > 0
    folder = figures["realFolder"]
    assert folder["files"] == 12 and {"html", "text", "pdf", "docx"} <= set(folder["kinds"])
    # the stack ingests every document the extractor can read: none lost to throttling or a worker's fault
    assert folder["deployed"]["processed"] == folder["inProcess"]["processed"] > 0, folder
    assert {"chunks", "strategy", "cache", "p50Ms", "p95Ms", "p99Ms", "apiP50Ms", "apiP95Ms"} <= set(figures["search"][0])
    assert sum(row["service"] for row in figures["hnswRecall"]) == 2  # the service's ef_search, at each size
    assert [row["agreementAt10"] for row in figures["bm25Agreement"]] == [1.0, 1.0]  # exact at each size
    assert {"ours: hybrid", "BM25 (rank_bm25)"} <= {row["method"] for row in figures["quality"]}
    assert {row["limit"] for row in figures["documentsList"]} == {100, 1000}
    precision = figures["modelPrecision"]
    assert precision["abstracts"] == 16 and set(precision["loadMs"]) == {"float16", "float32"}, precision
    # pg_textsearch and DiskANN beside the service at the synthetic size, and quality there against exact
    assert {(r["task"], r["chunks"]) for r in figures["peers"]} == {("keyword", 1000), ("semantic", 1000)}
    assert len(figures["peers"]) == 6 and all(0 <= r["recallAt10"] <= 1 for r in figures["peers"])
    # keyword search by a worker that has kept no BM25 blocks, beside a warm one
    assert {"ours: keyword, nothing kept", "ours: keyword, new worker, blocks shared"} <= {r["system"] for r in figures["peers"]}
    for cache in ("cold", "shared"):  # Redis emptied too, or holding what other workers shared
        assert {r["chunks"] for r in figures["search"] if (r["strategy"], r["cache"]) == ("keyword", cache)} == \
            {r["chunks"] for r in figures["search"]}
    assert {r["strategy"] for r in figures["qualityAtScale"]} == {"semantic", "keyword", "hybrid", "exact-bm25",
                                                                 "exact-cosine"}
    assert "## At scale: peers and quality" in report
    assert {(r["strategy"], r["ratioP50"] > 0) for r in figures["isolation"]} == {("semantic", True), ("keyword", True)}
    # the capacity model's tables from its quick costs: documents an hour by size and width, searches by load
    assert "## Capacity planning" in report and "**One 50 MB text file**" in report
    capacity = figures["capacity"]
    assert len(capacity["documentsPerHour"]) == 20 and all(r["perHour"] > 0 for r in capacity["documentsPerHour"])
    assert [r["perSecond"] for r in capacity["search"]][:4] == [10, 100, 1000, 5000]
    for image in ("latency-by-size.png", "quality-by-method.png"):
        assert (RESULTS / image).stat().st_mtime >= started
        assert (RESULTS / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
