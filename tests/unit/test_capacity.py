"""The capacity model's arithmetic (bench/capacity.py) on fixed costs: no measurement, no stack."""
from dataclasses import replace

import pytest

from bench import capacity
from bench.capacity import Costs, Pipeline, document_seconds, documents_per_hour, search_capacity

COSTS = Costs(extract_s_per_mb=0.5, chunk_s_per_1k_tokens=0.01, embed_s_per_1k_tokens=0.5, tokens_per_mb=250_000,
              chunk_tokens=200, chunks_per_mb=1250, store_s_per_chunk=0.004, store_db_cpu_s_per_chunk=0.002,
              db_bytes_per_chunk=4096, search_ms={"semantic": 10, "keyword": 8, "hybrid": 20},
              search_db_cpu_ms={"semantic": 3, "keyword": 2, "hybrid": 6}, query_embed_ms=5, measured_chunks=2000)


def test_doubling_the_width_halves_the_embedding_of_a_many_batch_document():
    pipe = Pipeline(width=1, step_overhead_s=0)
    one = document_seconds(COSTS, pipe, chunks=64 * 64)
    two = document_seconds(COSTS, replace(pipe, width=2), chunks=64 * 64)
    assert one["batches"] == 64
    assert two["embed"] == pytest.approx(one["embed"] / 2)
    assert one["embed"] == pytest.approx(64 * 64 * 200 / 1000 * 0.5)  # tokens x seconds per 1,000
    # what the width does not divide stays: the store by one writer, extract and chunk
    assert two["store"] == one["store"] == pytest.approx(64 * 64 * 0.004)
    assert two["total"] > one["total"] / 2


def test_the_width_stops_helping_at_the_batches_and_the_reserved_workers():
    pipe = Pipeline(width=8, step_overhead_s=0)
    assert document_seconds(COSTS, pipe, chunks=4 * 64)["embed"] == document_seconds(
        COSTS, replace(pipe, width=16), chunks=4 * 64)["embed"]  # four batches: four lanes at most
    capped = replace(pipe, width=16, embed_concurrency=4)
    assert document_seconds(COSTS, capped, chunks=64 * 64)["lanes"] == 4


def test_documents_an_hour_double_with_the_width_until_the_database_bounds_them():
    pipe = Pipeline(width=1, embed_concurrency=None, pipeline_concurrency=1000, max_acu=4)
    chunks = 640
    rates = {w: documents_per_hour(COSTS, replace(pipe, width=w), chunks) for w in (1, 2, 4, 64, 128)}
    assert rates[1]["bound"] == "embed"
    assert rates[2]["perHour"] == pytest.approx(2 * rates[1]["perHour"])
    assert rates[4]["perHour"] == pytest.approx(4 * rates[1]["perHour"])
    database = capacity.database_chunks_per_second(COSTS, 4) * 3600 / chunks
    assert rates[64]["bound"] == "database" and rates[64]["perHour"] == pytest.approx(database)
    assert rates[128]["perHour"] == rates[64]["perHour"]
    # a larger database lifts the bound
    assert documents_per_hour(COSTS, replace(pipe, width=64, max_acu=8), chunks)["perHour"] > rates[64]["perHour"]


def test_a_fifty_megabyte_file_is_its_size_in_chunks():
    r = document_seconds(COSTS, Pipeline(width=8), megabytes=50)
    assert r["chunks"] == 50 * 1250 and r["batches"] == -(-50 * 1250 // 64)
    assert not r["overChunkLimit"]  # 62,500 chunks: within the limit a document
    assert r["extract"] == pytest.approx(25)
    assert document_seconds(COSTS, Pipeline(width=8), megabytes=100)["overChunkLimit"]  # 125,000 chunks


def test_cost_and_capacity_grow_with_the_searches():
    light = search_capacity(COSTS, 1000, 6, 2000)
    heavy = search_capacity(COSTS, 1000, 60, 2000)
    assert heavy["perSecond"] == pytest.approx(10 * light["perSecond"]) == pytest.approx(1000)
    assert heavy["lambdaConcurrency"] == pytest.approx(10 * light["lambdaConcurrency"])
    # mean function time: 0.8 x (10 + 5) + 0.1 x 8 + 0.1 x (20 + 5) ms
    assert light["functionMs"] == pytest.approx(15.3)
    assert heavy["lambdaConcurrency"] == pytest.approx(1000 * 15.3 / 1000)
    assert heavy["dbVcpu"] == pytest.approx(1000 * (0.8 * 3 + 0.1 * 2 + 0.1 * 6) / 1000)
    assert heavy["acu"] == 18.5  # 3.2 vCPU / 0.7 / 0.25 = 18.3, up to the next half ACU
    assert light["acu"] == 2.0  # 0.32 / 0.7 / 0.25 = 1.83
    assert heavy["monthUsd"]["lambda"] == pytest.approx(10 * light["monthUsd"]["lambda"])
    # a month of 100 searches a second through API Gateway's REST API at $3.50 a million
    assert light["monthUsd"]["apiGateway"] == pytest.approx(100 * 730 * 3600 * 3.5e-6)
    assert light["monthUsd"]["lambda"] == pytest.approx(
        100 * 730 * 3600 * (15.3e-3 * 2048 / 1024 * 0.0000166667 + 0.2e-6))
    assert heavy["monthUsd"]["aurora"] == pytest.approx(18.5 * 2 * 730 * 0.12)  # writer and reader
    assert heavy["monthTotalUsd"] > light["monthTotalUsd"]
    assert heavy["proxyConnections"] == 16 * 2  # ceil(15.3) environments, two connections each


def test_the_reader_doubles_the_database_and_an_idle_cluster_costs_its_minimum():
    ha = search_capacity(COSTS, 1000, 6, 2000)
    alone = search_capacity(COSTS, 1000, 6, 2000, high_availability=False)
    assert ha["monthUsd"]["aurora"] == pytest.approx(2 * alone["monthUsd"]["aurora"])
    idle = search_capacity(COSTS, 0, 6, 2000, high_availability=False)
    assert idle["acu"] == 0.5 and idle["monthUsd"]["aurora"] == pytest.approx(0.5 * 730 * 0.12)
    assert idle["monthUsd"]["rdsProxy"] == pytest.approx(8 * 730 * 0.015)  # the proxy's minimum


def test_a_corpus_that_outgrows_memory_needs_more_acus():
    small = search_capacity(COSTS, 10, 6, 2000)
    big = search_capacity(COSTS, 10, 6, 10_000_000)
    assert big["acuBy"] == "memory" and big["acu"] > small["acu"]
    assert big["acu"] == pytest.approx(-(-10_000_000 * 4096 / 2**30 / 1.5 * 2 // 1) / 2)


def test_lambda_cpu_is_proportional_to_memory():
    assert capacity.lambda_vcpu(1769) == 1
    assert capacity.lambda_vcpu(10240) == pytest.approx(5.79, abs=0.01)  # AWS: up to 6 vCPUs at 10,240 MB
    assert capacity.lambda_vcpu(20000) == 6
    assert capacity.compute_share(2048 / 1769, 2) == pytest.approx(1 + (2048 / 1769 - 1) * 0.93)
    assert capacity.compute_share(2048 / 1769, 1) == 1


def test_the_report_renders_its_tables_and_the_validation():
    run = {"loadAverage": 3.0, "otherRunnable": 1.2, "shareOfACore": 0.5, "embedShare": 0.4, "ratio": 1.1,
           "predicted": document_seconds(COSTS, Pipeline(width=2), chunks=256),
           "measured": {"seconds": 30.0, "chunks": 256, "steps": {"embed": 20.0}, "cpu": {}},
           "cpu": {"embed": {"predicted": 10.0, "measured": 11.0, "ratio": 1.1},
                   "store": {"predicted": 1.0, "measured": 2.0, "ratio": 2.0}}}
    text = capacity.report(COSTS, {"2": {"runs": [run]}})
    assert "**Documents an hour**" in text and "**One 50 MB text file** (62,500 chunks" in text
    assert "| 2 | 4 | 1.2, 3.0 (0.50) | 10.0 / 11.0 (x1.10) | 1.0 / 2.0 (x2.00) |" in text
    assert "embedding CPU 1 of 1 runs" in text and "time 1 of 1" in text
    assert capacity.figures(COSTS, {"2": {"runs": [run]}})["validation"][0]["ratio"] == 1.1


def test_other_work_is_the_threads_runnable_now_less_the_reader(monkeypatch):
    import itertools

    readings = itertools.cycle(["2.90 1.5 1.0 3/412 77\n", "2.90 1.5 1.0 1/412 77\n"])

    class ProcFile:
        def __init__(self, path):
            assert str(path) == "/proc/loadavg"

        def read_text(self):
            return next(readings)

    monkeypatch.setattr(capacity, "Path", ProcFile)
    # the load average (2.9) lags; what runs now is 2 and 0 others, 1 on average
    assert capacity.runnable_now(seconds=0.05, interval=0.0) == pytest.approx(1.0, abs=0.01)
