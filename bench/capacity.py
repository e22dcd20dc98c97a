"""A capacity model you can rerun: what the service needs on AWS for a given load, from the
per-step costs measured here and AWS's published limits and prices.

    .venv/bin/python bench/capacity.py [--quick] [--validate] [--docs]
                                       [--width W] [--users N] [--per-minute M] [--chunks C]

It answers:
  - documents an hour at embedding width W (the template's EmbedWidth; EmbedConcurrency
    follows it as `make deploy-aws` sets it unless given), for documents of a given size;
  - the time one 50 MB text file takes from upload to searchable;
  - Lambda concurrency, Aurora capacity units, RDS Proxy connections and the monthly cost
    for N users at M searches a minute over a corpus of C chunks.

The per-step costs are measured in this process on the local stack's PostgreSQL and saved in
.kb/bench-results/capacity[-quick].json: extraction and chunking of prose (SciFact's abstracts
as one text file), the local model's embedding with one thread (seconds per 1,000 tokens),
the Store step's write of a document's chunks (seconds and PostgreSQL CPU per chunk, into a
live HNSW graph), and searches by strategy (the function's time and PostgreSQL's CPU per
search). Searches at other corpus sizes are scaled by docs/benchmarks.json's latency table.

--validate predicts a run of the local stack from the same costs (one document of several
embedding batches at the deployed width: KB_EMBED_WIDTH=1 or 2 make up), runs it, and prints
predicted against measured. The model's arithmetic is in plain functions (tested in
tests/unit/test_capacity.py); the measured costs are their inputs.
"""
import argparse
import json
import math
import os
import re
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

HEADING = "## Capacity planning"

# --- AWS's limits and prices --------------------------------------------------------------------
# us-east-1 list prices, as the pricing pages gave them when read on PRICES_READ (check your
# region's page; a Savings Plan or the free tier lowers them).
PRICES_READ = "2026-11-28"
LAMBDA_GB_SECOND_USD = 0.0000166667  # x86, first 6 billion GB-s a month: https://aws.amazon.com/lambda/pricing/
LAMBDA_REQUEST_USD = 0.20 / 1e6  # https://aws.amazon.com/lambda/pricing/
API_GATEWAY_REST_REQUEST_USD = 3.50 / 1e6  # REST API, first 333 million a month: https://aws.amazon.com/api-gateway/pricing/
STEP_FUNCTIONS_TRANSITION_USD = 0.025 / 1000  # Standard workflows: https://aws.amazon.com/step-functions/pricing/
AURORA_ACU_HOUR_USD = 0.12  # Aurora Serverless v2, Aurora Standard: https://aws.amazon.com/rds/aurora/pricing/
AURORA_STORAGE_GB_MONTH_USD = 0.10  # Aurora Standard storage: https://aws.amazon.com/rds/aurora/pricing/
RDS_PROXY_ACU_HOUR_USD = 0.015  # RDS Proxy on Aurora Serverless v2: https://aws.amazon.com/rds/proxy/pricing/
RDS_PROXY_MIN_ACU = 8  # the proxy bills at least 8 ACUs: https://aws.amazon.com/rds/proxy/pricing/
VALKEY_GB_HOUR_USD = 0.084  # ElastiCache Serverless for Valkey: https://aws.amazon.com/elasticache/pricing/
VALKEY_MILLION_ECPU_USD = 0.0023  # https://aws.amazon.com/elasticache/pricing/
VALKEY_MIN_GB = 0.1  # Valkey serverless meters at least 100 MB: https://aws.amazon.com/elasticache/pricing/
HOURS_A_MONTH = 730

# Limits (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html,
# https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html,
# https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/aurora-serverless-v2.how-it-works.html).
LAMBDA_ACCOUNT_CONCURRENCY = 1000  # a region's default, shared by every function
LAMBDA_MB_PER_VCPU = 1769  # "at 1,769 MB, a function has the equivalent of one vCPU"; proportional below and above
LAMBDA_MAX_VCPU = 6  # at 10,240 MB
INLINE_MAP_MAX_CONCURRENCY = 40  # an inline Map's iterations at once; a distributed Map runs up to 10,000 children
ACU_GIB = 2  # one ACU is about 2 GiB of memory with its share of CPU and network
AURORA_MAX_ACU = 256
# Assumptions, said aloud:
VCPU_PER_ACU = 0.25  # db.r6g.large (2 vCPU, 16 GiB) is 8 ACUs' memory: a quarter vCPU an ACU
DB_CPU_TARGET = 0.7  # keep the database under 70% CPU: Aurora scales on CPU before it is full
BUFFER_SHARE = 0.75  # the share of an ACU's memory that holds pages (shared buffers and the OS cache)
# A Lambda vCPU computes as fast as one core of the machine the costs were measured on (x86
# both; Lambda's are of a similar generation). The local model's throughput with n threads on
# n cores is n x 0.93 of one (docs/benchmarks.md: one thread ran at x0.54 of two).
THREAD_EFFICIENCY = 0.93
AWS_STEP_OVERHEAD_S = 0.1  # a Step Functions task's scheduling and a warm Lambda invoke, a state
CONNECTIONS_PER_WORKER = 2  # an API worker holds its main connection, and a second once it served a hybrid search
ECPU_PER_SEARCH = 10  # a search's Redis work (rate limit, embedding, answer) in 1 KB units, rounded up
CONNECTION_MEMORY_BYTES = 9_531_392  # Aurora PostgreSQL's max_connections = memory / this (at most 5,000)

# The template's parameters and their defaults (infra/template.yaml); the functions' memory
# is read from .chalice/config.json.
TEMPLATE_DEFAULTS = {"EmbedWidth": 8, "PipelineConcurrency": 20, "EmbedThreads": 0, "AuroraMinCapacity": 0.5,
                     "AuroraMaxCapacity": 4, "HighAvailability": True, "CacheMaxDataGB": 1}
EMBED_BATCH = 64  # chunks an embedding batch holds (chalicelib/ingestion/steps.py)
FIFTY_MB = 50 * 2**20


def function_settings() -> dict[str, dict]:
    """Each function's lambda_memory_size and lambda_timeout (.chalice/config.json)."""
    return json.loads((ROOT / ".chalice" / "config.json").read_text())["stages"]["api"]["lambda_functions"]


def function_memory_mb() -> dict[str, int]:
    return {name: f["lambda_memory_size"] for name, f in function_settings().items()}


def store_timeout_s() -> int:
    """How long one attempt of the Store step may run."""
    return function_settings()["pipeline_store"]["lambda_timeout"]


def embed_workers_per_width() -> int:
    """make deploy-aws reserves this many embedding workers a unit of width (infra/deploy.py)."""
    try:
        sys.path.insert(0, str(ROOT / "infra"))
        from deploy import EMBED_WORKERS_PER_WIDTH

        return EMBED_WORKERS_PER_WIDTH
    except Exception:  # noqa: BLE001 - the packager's imports missing: its documented value
        return 2


# --- the measured costs -------------------------------------------------------------------------

@dataclass
class Costs:
    """Per-step costs on one core of the measuring machine (one thread)."""
    extract_s_per_mb: float  # a text file
    chunk_s_per_1k_tokens: float
    embed_s_per_1k_tokens: float  # the local model, one thread, batches of 64 chunks
    tokens_per_mb: float  # tokens of prose a MB of text holds
    chunk_tokens: float  # mean tokens a chunk of the default size holds (as embedded)
    chunks_per_mb: float
    store_s_per_chunk: float  # one writer, wall time
    store_db_cpu_s_per_chunk: float  # PostgreSQL's CPU for it
    db_bytes_per_chunk: float  # the database's size a chunk (rows, HNSW, BM25 postings)
    search_ms: dict  # strategy -> the function's time a search (warm, query embedding cached)
    search_db_cpu_ms: dict  # strategy -> PostgreSQL's CPU a search
    query_embed_ms: float  # one question embedded (a query-embedding cache miss)
    measured_chunks: int  # the corpus size the searches were measured at
    latency_by_size: dict = field(default_factory=dict)  # strategy -> {chunks: p50 ms} (docs/benchmarks.json)
    load_average: float = 0.0
    measured: str = ""
    hnsw_bytes_per_chunk: float = 0.0  # the HNSW index alone: what a semantic search reads at random

    @classmethod
    def from_json(cls, data: dict) -> "Costs":
        data = dict(data)
        data["latency_by_size"] = {s: {int(k): v for k, v in rows.items()} for s, rows in
                                   data.get("latency_by_size", {}).items()}
        return cls(**data)


def lambda_vcpu(memory_mb: int) -> float:
    return min(LAMBDA_MAX_VCPU, memory_mb / LAMBDA_MB_PER_VCPU)


def compute_share(vcpu: float, threads: int) -> float:
    """How many of the measuring machine's cores a worker's model computes as (one thread = 1)."""
    usable = min(vcpu, threads)
    return usable if usable <= 1 else 1 + (usable - 1) * THREAD_EFFICIENCY


def embed_threads(memory_mb: int, configured: int = 0) -> int:
    """EmbedThreads: 0 is one per CPU the environment shows (two up to 3,538 MB)."""
    return configured if configured > 0 else max(1, math.ceil(lambda_vcpu(memory_mb)))


def batch_seconds(costs: Costs, share: float, chunks: int = EMBED_BATCH) -> float:
    return chunks * costs.chunk_tokens / 1000 * costs.embed_s_per_1k_tokens / share


# --- ingestion ----------------------------------------------------------------------------------

@dataclass
class Pipeline:
    """Where the pipeline runs: AWS at the template's parameters, or the local stack."""
    width: int = TEMPLATE_DEFAULTS["EmbedWidth"]
    embed_concurrency: int | None = None  # None: embed_workers_per_width() x width
    pipeline_concurrency: int = TEMPLATE_DEFAULTS["PipelineConcurrency"]
    embed_share: float = 1.0  # cores' worth an embedding worker computes as
    step_share: float = 1.0  # the same for extract and chunk
    store_share: float = 1.0  # the same for the Store step's writer and the database
    step_overhead_s: float = AWS_STEP_OVERHEAD_S
    max_acu: float = TEMPLATE_DEFAULTS["AuroraMaxCapacity"]

    @property
    def embed_workers(self) -> int:
        workers = self.embed_concurrency or embed_workers_per_width() * self.width
        return min(workers, LAMBDA_ACCOUNT_CONCURRENCY)


def aws_pipeline(width: int = TEMPLATE_DEFAULTS["EmbedWidth"], embed_concurrency: int | None = None,
                 max_acu: float = TEMPLATE_DEFAULTS["AuroraMaxCapacity"], embed_threads_param: int = 0) -> Pipeline:
    memory = function_memory_mb()
    vcpu = lambda_vcpu(memory["pipeline_embed"])
    return Pipeline(width=width, embed_concurrency=embed_concurrency, max_acu=max_acu,
                    embed_share=compute_share(vcpu, embed_threads(memory["pipeline_embed"], embed_threads_param)),
                    step_share=min(1.0, lambda_vcpu(memory["pipeline_extract"])))


def document_seconds(costs: Costs, pipe: Pipeline, megabytes: float | None = None, chunks: int | None = None) -> dict:
    """One document alone, from upload to searchable: each step's time and the total. Give its
    size in MB of text or its chunk count."""
    if chunks is None:
        chunks = max(1, round(megabytes * costs.chunks_per_mb))
    megabytes = megabytes if megabytes is not None else chunks / costs.chunks_per_mb
    tokens = chunks * costs.chunk_tokens
    batches = math.ceil(chunks / EMBED_BATCH)
    extract = megabytes * costs.extract_s_per_mb / pipe.step_share
    chunk = tokens / 1000 * costs.chunk_s_per_1k_tokens / pipe.step_share
    lanes = max(1, min(pipe.width, pipe.embed_workers, batches))
    embed = math.ceil(batches / lanes) * batch_seconds(costs, pipe.embed_share, min(chunks, EMBED_BATCH))
    store = chunks * costs.store_s_per_chunk / pipe.store_share
    # Extract, Chunk, (the Map's rounds, Store, Finalize when there is more than one batch)
    tasks = 2 if batches == 1 else 4 + math.ceil(batches / lanes)
    overhead = tasks * pipe.step_overhead_s
    total = extract + chunk + embed + store + overhead
    return {"megabytes": megabytes, "chunks": chunks, "batches": batches, "lanes": lanes, "extract": extract,
            "chunk": chunk, "embed": embed, "store": store, "overhead": overhead, "total": total,
            "overChunkLimit": chunks > _chunk_limit(), "storeOverStepTimeout": store > store_timeout_s()}


def _chunk_limit() -> int:
    from chalicelib import limits

    return limits.MAX_CHUNKS_PER_DOCUMENT


def database_chunks_per_second(costs: Costs, max_acu: float) -> float:
    """Chunks a second the database takes at AuroraMaxCapacity, kept under DB_CPU_TARGET."""
    return max_acu * VCPU_PER_ACU * DB_CPU_TARGET / costs.store_db_cpu_s_per_chunk


def documents_per_hour(costs: Costs, pipe: Pipeline, chunks: int) -> dict:
    """A steady stream of documents of `chunks` chunks each: what each stage could do an hour,
    and the least of them (the bound)."""
    one = document_seconds(costs, replace(pipe, width=1), chunks=chunks)
    workers = pipe.pipeline_concurrency
    embed_cpu = one["batches"] * batch_seconds(costs, pipe.embed_share, min(chunks, EMBED_BATCH))
    # A document of one batch is embedded by its Chunk task (PipelineConcurrency workers).
    embed_workers = workers if one["batches"] == 1 else pipe.embed_workers
    busy = pipe.step_overhead_s  # a worker is held while its task is handed to it, too
    stages = {"extract": workers * 3600 / (one["extract"] + busy),
              "chunk": workers * 3600 / (one["chunk"] + busy + (embed_cpu if one["batches"] == 1 else 0)),
              "embed": embed_workers * 3600 / (embed_cpu + one["batches"] * busy),
              "store": workers * 3600 / (one["store"] + busy),
              "database": database_chunks_per_second(costs, pipe.max_acu) * 3600 / chunks}
    bound = min(stages, key=stages.get)
    return {"chunks": chunks, "stages": stages, "bound": bound, "perHour": stages[bound],
            "embedWorkers": embed_workers, "transitions": state_transitions(one["batches"])}


def state_transitions(batches: int) -> int:
    """States entered by one run (infra/ingestion.asl.json), retries not counted: Extract,
    AfterExtract, Chunk, AfterChunk and Done for one batch; else Embed, one EmbedBatch an
    iteration, Store and Finalize instead of Done."""
    return 5 if batches == 1 else 4 + 1 + batches + 2


def ingestion_cost_per_1000(costs: Costs, pipe: Pipeline, chunks: int) -> dict:
    """What 1,000 documents of `chunks` chunks cost on AWS: Lambda GB-s and requests, state
    transitions, and the ACU-seconds the store takes of the database."""
    memory = function_memory_mb()
    one = document_seconds(costs, replace(pipe, width=1), chunks=chunks)
    gb_s = (one["extract"] * memory["pipeline_extract"] + one["chunk"] * memory["pipeline_chunk"]
            + one["embed"] * memory["pipeline_embed"] + one["store"] * memory["pipeline_store"]) / 1024
    requests = 2 if one["batches"] == 1 else 4 + one["batches"]
    db_acu_s = chunks * costs.store_db_cpu_s_per_chunk / VCPU_PER_ACU / DB_CPU_TARGET
    usd = 1000 * (gb_s * LAMBDA_GB_SECOND_USD + requests * LAMBDA_REQUEST_USD
                  + state_transitions(one["batches"]) * STEP_FUNCTIONS_TRANSITION_USD
                  + db_acu_s / 3600 * AURORA_ACU_HOUR_USD)
    return {"lambdaGbSeconds": 1000 * gb_s, "transitions": 1000 * state_transitions(one["batches"]),
            "dbAcuHours": 1000 * db_acu_s / 3600, "usd": usd}


# --- search -------------------------------------------------------------------------------------

MIX = {"semantic": 0.8, "keyword": 0.1, "hybrid": 0.1}  # bench/load.py's mix


def search_cost(costs: Costs, strategy: str, chunks: int) -> tuple[float, float]:
    """(the function's ms, PostgreSQL's CPU ms) of one search at a corpus of `chunks`: the
    measured figures scaled by the latency table's p50 at that size against the measured size."""
    ms, db_ms = costs.search_ms[strategy], costs.search_db_cpu_ms[strategy]
    table = costs.latency_by_size.get(strategy) or {}
    if table:
        sizes = sorted(table)
        near = lambda n: min(sizes, key=lambda s: abs(math.log(s) - math.log(n)))  # noqa: E731
        scale = table[near(chunks)] / table[near(costs.measured_chunks)]
        ms, db_ms = ms * scale, db_ms * scale
    return ms, db_ms


def search_capacity(costs: Costs, users: int, per_minute: float, chunks: int, mix: dict = MIX,
                    embedding_hit: float = 0.0, answer_hit: float = 0.0, high_availability: bool = True,
                    min_acu: float = TEMPLATE_DEFAULTS["AuroraMinCapacity"],
                    max_acu: float = TEMPLATE_DEFAULTS["AuroraMaxCapacity"],
                    cache_gb: float = TEMPLATE_DEFAULTS["CacheMaxDataGB"]) -> dict:
    """N users at M searches a minute each over `chunks` chunks, steady: what it takes on AWS
    and what a month of it costs. embedding_hit: the share of questions whose embedding is
    cached (0: every question new); answer_hit: the share the results cache answers."""
    memory_gb = function_memory_mb()["kb_search"] / 1024
    rate = users * per_minute / 60
    searched = 1 - answer_hit
    fn_ms = db_ms = 0.0
    for strategy, share in mix.items():
        ms, cpu = search_cost(costs, strategy, chunks)
        embeds = strategy != "keyword"
        fn_ms += share * (ms + (1 - embedding_hit) * costs.query_embed_ms * embeds)
        db_ms += share * cpu
    fn_ms = searched * fn_ms + answer_hit * 1.0  # a cached answer: ~1 ms in the function
    db_ms *= searched
    concurrency = rate * fn_ms / 1000
    db_vcpu = rate * db_ms / 1000
    cpu_acu = db_vcpu / DB_CPU_TARGET / VCPU_PER_ACU
    hot = costs.hnsw_bytes_per_chunk or costs.db_bytes_per_chunk  # what must stay in memory
    memory_acu = chunks * hot / 2**30 / (ACU_GIB * BUFFER_SHARE)
    acu = max(min_acu, math.ceil(max(cpu_acu, memory_acu) * 2) / 2)
    instances = 2 if high_availability else 1
    connections = math.ceil(concurrency) * CONNECTIONS_PER_WORKER
    max_connections = min(5000, int(max(acu, max_acu) * ACU_GIB * 2**30 / CONNECTION_MEMORY_BYTES))
    seconds = HOURS_A_MONTH * 3600
    month = {
        "lambda": rate * seconds * (fn_ms / 1000 * memory_gb * LAMBDA_GB_SECOND_USD + LAMBDA_REQUEST_USD),
        "apiGateway": rate * seconds * API_GATEWAY_REST_REQUEST_USD,
        "aurora": acu * instances * HOURS_A_MONTH * AURORA_ACU_HOUR_USD,
        "storage": chunks * costs.db_bytes_per_chunk / 1e9 * AURORA_STORAGE_GB_MONTH_USD,
        "rdsProxy": max(RDS_PROXY_MIN_ACU, acu * instances) * HOURS_A_MONTH * RDS_PROXY_ACU_HOUR_USD,
        "elastiCache": (max(VALKEY_MIN_GB, cache_gb) * HOURS_A_MONTH * VALKEY_GB_HOUR_USD
                        + rate * seconds * ECPU_PER_SEARCH / 1e6 * VALKEY_MILLION_ECPU_USD),
    }
    return {"users": users, "perMinute": per_minute, "chunks": chunks, "perSecond": rate, "functionMs": fn_ms,
            "lambdaConcurrency": concurrency, "dbVcpu": db_vcpu, "acu": acu, "acuBy": "memory" if memory_acu > cpu_acu
            else "cpu", "instances": instances, "proxyConnections": connections,
            "maxConnections": max_connections, "overMaxAcu": acu > max_acu,
            "overAccountConcurrency": concurrency > LAMBDA_ACCOUNT_CONCURRENCY,
            "monthUsd": month, "monthTotalUsd": sum(month.values())}


# --- measuring the costs (in process) -----------------------------------------------------------

def _postgres_cpu() -> float:
    import load as load_bench

    return load_bench.cpu_seconds({"p": load_bench.processes()["postgres"]})["p"]


def prose(megabytes: float) -> str:
    from common import corpus

    texts, size = [], 0
    for doc in corpus():
        texts.append(doc["text"])
        size += len(texts[-1]) + 2
        if size >= megabytes * 2**20:
            break
    return "\n\n".join(texts)


def measure(quick: bool) -> Costs:
    """The costs as CPU seconds (this process's, and PostgreSQL's where it works): they hold on
    a machine that other work shares, where wall times do not; wall times are printed beside."""
    from chalicelib.embeddings import get_provider
    from chalicelib.ingestion.chunk import chunk_document
    from chalicelib.ingestion.context import embedded_text, fitting_overlap, fitting_tokens, with_context
    from chalicelib.ingestion.extract import extract

    load_average = os.getloadavg()[0]
    text = prose(0.25 if quick else 1.0).encode()
    mb = len(text) / 2**20
    with timed() as t_extract:
        extracted = extract(text, "corpus.txt")
    kb = {"chunk_tokens": 500, "chunk_overlap": 50, "embedding_provider": "local"}
    with timed() as t_chunk:
        chunks = with_context(chunk_document(extracted, fitting_tokens(kb), fitting_overlap(kb), {}), None,
                              "corpus.txt")
    tokens = sum(c.token_count for c in chunks)
    embedder = get_provider("local")
    embedder.embed_documents(["warm up"])
    sample = [embedded_text(c) for c in chunks[:32 if quick else 192]]
    with timed() as t_embed:
        vectors = embedder.embed_documents(sample)
    sample_tokens = sum(c.token_count for c in chunks[:len(sample)])
    one = []
    for text_ in sample[:20]:
        with timed() as t_one:
            embedder.embed_query(text_[:200])
        one.append(t_one["cpu"] * 1000)
    print(f"prose {mb:.2f} MB, {len(chunks):,} chunks of {tokens / len(chunks):.0f} tokens; CPU s (wall s): extract "
          f"{t_extract['cpu']:.2f} ({t_extract['wall']:.2f}), chunk {t_chunk['cpu']:.2f} ({t_chunk['wall']:.2f}), "
          f"embed {len(sample)} chunks {t_embed['cpu']:.1f} ({t_embed['wall']:.1f}), one thread", flush=True)
    store = measure_store(chunks, vectors, quick)
    search = measure_search(quick)
    return Costs(extract_s_per_mb=t_extract["cpu"] / mb, chunk_s_per_1k_tokens=t_chunk["cpu"] / tokens * 1000,
                 embed_s_per_1k_tokens=t_embed["cpu"] / sample_tokens * 1000, tokens_per_mb=tokens / mb,
                 chunk_tokens=tokens / len(chunks), chunks_per_mb=len(chunks) / mb,
                 query_embed_ms=statistics.median(one), latency_by_size=latency_table(), load_average=load_average,
                 measured=time.strftime("%Y-%m-%d %H:%M"), **store, **search)


@contextmanager
def timed():
    """{"cpu": this process's CPU seconds, "wall": seconds} of the block, filled when it ends."""
    times: dict = {}
    cpu, wall = time.process_time(), time.perf_counter()
    yield times
    times.update(cpu=time.process_time() - cpu, wall=time.perf_counter() - wall)


def measure_store(chunks, vectors, quick: bool) -> dict:
    """The Store step's writes (chunk_versions.replace, batches of STORE_BATCH_CHUNKS) into a
    knowledge base that already holds some chunks, so the HNSW graph is not empty."""
    import numpy as np
    import psycopg

    from common import drop_database, fresh_database
    from chalicelib.auth import issue_key
    from chalicelib.storage import chunk_versions, connection, document_status, knowledge_bases

    fresh_database()
    try:
        principal, _ = issue_key("org-capacity", "bench")
        n = 300 if quick else 2000
        rng = np.random.default_rng(0)
        base = np.asarray(vectors, dtype=np.float32)
        with connection() as conn:
            kb_id = knowledge_bases.insert_knowledge_base(
                conn, principal, name="Capacity", description="", visibility="private", provider="local",
                model="all-MiniLM-L6-v2", dim=384, chunk_tokens=500, chunk_overlap=50)
            rows, wall, client, cpu = 0, 0.0, 0.0, 0.0
            for run in range(3):
                picked = [chunks[i % len(chunks)] for i in range(n)]
                noisy = base[np.arange(n) % len(base)] + rng.normal(0, 0.02, (n, 384)).astype(np.float32)
                noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
                batch = [replace(c, chunk_index=i, embedding=v.tolist()) for i, (c, v) in enumerate(zip(picked, noisy))]
                doc = document_status.upsert_pending(conn, kb_id=kb_id, s3_key=f"kb/{kb_id}/d{run}.txt",
                                                     filename=f"d{run}.txt", size_bytes=1, run_id=f"r{run}")
                cpu_before = _postgres_cpu()
                with timed() as t:
                    assert chunk_versions.replace(conn, doc_id=doc["id"], kb_id=kb_id, dim=384, chunks=batch,
                                                  page_count=None, run_id=f"r{run}")
                if not run:
                    first_size = _database_bytes()
                if run:  # the first fills the graph
                    wall += t["wall"]
                    client += t["cpu"]
                    cpu += _postgres_cpu() - cpu_before
                    rows += n
        size = _database_bytes()
        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as admin:
            hnsw = admin.execute("SELECT coalesce(sum(pg_relation_size(i.indexrelid)), 0)::bigint FROM pg_index i"
                                 " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
                                 " WHERE a.amname = 'hnsw'").fetchone()[0]
        print(f"store: {rows:,} chunks in {wall:.1f} s, CPU {client:.1f} s here and {cpu:.1f} s in PostgreSQL",
              flush=True)
        # the writer and the database take turns: a chunk's time is both their CPU
        return {"store_s_per_chunk": (client + cpu) / rows, "store_db_cpu_s_per_chunk": max(cpu, 1e-3) / rows,
                "db_bytes_per_chunk": (size - first_size) / rows, "hnsw_bytes_per_chunk": hnsw / (3 * n)}
    finally:
        drop_database()


def _database_bytes() -> int:
    import psycopg

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as admin:
        admin.execute("VACUUM ANALYZE")
        return admin.execute("SELECT pg_database_size(current_database())").fetchone()[0]


def measure_search(quick: bool) -> dict:
    """Searches in process as the functions run them (kb_app, row-level security), query
    embeddings cached: the time a search takes and PostgreSQL's CPU for it, by strategy."""
    import redis

    from common import as_the_functions, corpus, drop_database, fresh_database, queries_and_qrels
    from chalicelib.auth import issue_key
    from chalicelib.knowledge_bases import create_knowledge_base
    from chalicelib.retrieval import SearchRequest, search
    from retrieval import load as store

    docs = corpus(200)  # its embeddings cached on disk after the first run (one thread: minutes under load)
    queries, _ = queries_and_qrels({d["_id"] for d in docs})
    fresh_database()
    try:
        principal, _ = issue_key("bench-capacity", "bench")
        kb = create_knowledge_base(principal, name="SciFact", description="")
        flat, _ = store(kb, docs)
        questions = [q["text"] for q in queries[:10 if quick else 20]]
        ms, db_ms = {}, {}
        with as_the_functions(principal):
            for strategy in MIX:
                for q in questions:  # embeddings cached, blocks read
                    search(principal, SearchRequest(knowledge_base_ids=(kb["id"],), query=q, top_k=10, strategy=strategy))
                count, cpu_before = 0, _postgres_cpu()
                with timed() as t:
                    for i in range(1 if quick else 4):
                        for q in questions:
                            search(principal, SearchRequest(knowledge_base_ids=(kb["id"],), query=q, top_k=10,
                                                            strategy=strategy, max_tokens=50_000 + i))
                            count += 1
                db_ms[strategy] = (_postgres_cpu() - cpu_before) * 1000 / count
                # the function waits while PostgreSQL works: its time is both CPUs
                ms[strategy] = t["cpu"] * 1000 / count + db_ms[strategy]
                print(f"search {strategy}: {ms[strategy]:.1f} ms CPU ({t['wall'] * 1000 / count:.1f} ms wall), of which "
                      f"PostgreSQL {db_ms[strategy]:.1f} ms", flush=True)
        return {"search_ms": ms, "search_db_cpu_ms": db_ms, "measured_chunks": len(flat)}
    finally:
        drop_database()
        redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()


def latency_table() -> dict:
    """docs/benchmarks.json's service-side p50 by strategy and size (the query embedding cached
    for semantic and hybrid), what search_cost scales by."""
    rows = json.loads((ROOT / "docs" / "benchmarks.json").read_text()).get("search", [])
    table: dict = {}
    for r in rows:
        if r["cache"] == ("miss" if r["strategy"] == "keyword" else "hit"):
            table.setdefault(r["strategy"], {})[r["chunks"]] = r["p50Ms"]
    return table


# --- validation against the local stack ---------------------------------------------------------

def local_pipeline(width: int, other: float, step_overhead_s: float) -> Pipeline:
    """The local stack (localstack/stack.py): one thread an embedding worker (EmbedThreads 1),
    EmbedConcurrency = the width, every worker a process on this machine's cores beside other
    work, counted as `other` runnable threads when the run starts (runnable_now). A busy
    thread gets its fair share of the cores: one step alone 1 / (other + 1) of them, each of
    the W embedding workers 1 / (other + W)."""
    cores = os.cpu_count() or 1
    alone = min(1.0, cores / (other + 1))
    return Pipeline(width=width, embed_concurrency=width, pipeline_concurrency=min(8, 4 * cores),
                    embed_share=min(1.0, cores / (other + width)), step_share=alone, store_share=alone,
                    step_overhead_s=step_overhead_s)


def runnable_now(seconds: float = 2.0, interval: float = 0.05) -> float:
    """Other threads runnable on this machine now: /proc/loadavg's count of runnable threads,
    less this reader, averaged over a couple of seconds. The load average lags by a minute: right
    after other work (the costs' measurement, a benchmark before) it counted threads that had
    ended, and predicted the embedding workers 0.57 of a core where they got 0.97."""
    counts, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        counts.append(int(Path("/proc/loadavg").read_text().split()[3].split("/")[0]) - 1)
        time.sleep(interval)
    return max(0.0, statistics.mean(counts))


def share_now(samples: list[str]) -> float:
    """The share of a core one thread gets now: CPU over wall seconds of embedding the samples."""
    from chalicelib.embeddings import get_provider

    with timed() as t:
        get_provider("local").embed_documents(samples)
    return min(1.0, t["cpu"] / t["wall"])


def _stack():
    import boto3

    from common import local_env

    env = local_env()
    kwargs = dict(endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                  aws_access_key_id="test", aws_secret_access_key="test")
    return env, boto3.client("s3", **kwargs), boto3.client("stepfunctions", **kwargs)


def deployed_width(env: dict, sfn) -> int:
    machine = next(m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"]
                   if m["name"] == f"{env['KB_STACK']}-ingestion")
    return int(json.loads(sfn.describe_state_machine(stateMachineArn=machine)["definition"])["States"]["Embed"]
               ["MaxConcurrency"])


_WORKER = re.compile(r"ministack-lambda-[a-z0-9-]+?-(pipeline-[a-z-]+?)-[a-z0-9_]{8}/")


def stack_cpu() -> dict[int, tuple[str, float]]:
    """{pid: (pipeline-<step> or postgres, CPU seconds)} of the local stack's processes."""
    import load as load_bench

    state = ROOT / ".kb"
    emulator, postmaster = load_bench._pid(state / "ministack.pid"), load_bench._pid(state / "pgdata" / "postmaster.pid")
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        stat = load_bench._stat(pid)
        if stat is None:
            continue
        if pid == postmaster or stat[0] == postmaster:
            found[pid] = ("postgres", stat[1])
        elif stat[0] == emulator and (m := _WORKER.search(load_bench._cmdline(pid))):
            found[pid] = (m.group(1), stat[1])
    return found


def cpu_by_step(before: dict, last: dict) -> dict[str, float]:
    """CPU seconds each step's workers (and PostgreSQL) spent between two samples; a worker that
    went away meanwhile counts up to the last sample that saw it."""
    spent: dict[str, float] = {}
    for pid, (name, cpu) in last.items():
        spent[name] = spent.get(name, 0.0) + cpu - before.get(pid, (name, 0.0))[1]
    return spent


def ingest_one(env: dict, s3, body: bytes, name: str) -> dict:
    """A text file into a knowledge base of its own (default chunking), timed from the upload to
    PROCESSED, with the CPU the stack's processes spent on it; the knowledge base is deleted
    afterwards."""
    import requests

    api, headers = env["KB_API_URL"], {"Authorization": f"Bearer {env['KB_API_KEY']}"}
    kb = requests.post(f"{api}/knowledge-bases", json={"name": f"capacity {name}"}, headers=headers,
                       timeout=60).json()["data"]
    try:
        before = stack_cpu()
        last = dict(before)
        started = time.monotonic()
        s3.put_object(Bucket=env["KB_BUCKET"], Key=f"kb/{kb['id']}/{name}", Body=body)
        while time.monotonic() - started < 900:
            last |= stack_cpu()
            items = requests.get(f"{api}/knowledge-bases/{kb['id']}/documents", headers=headers,
                                 timeout=60).json()["data"]["items"]
            if items and items[0]["status"] in ("PROCESSED", "FAILED"):
                seconds = time.monotonic() - started
                doc = requests.get(f"{api}/knowledge-bases/{kb['id']}/documents/{items[0]['id']}", headers=headers,
                                   timeout=60).json()["data"]
                return {"seconds": seconds, "status": doc["status"], "chunks": doc.get("chunks"),
                        "cpu": cpu_by_step(before, last | stack_cpu()),
                        "steps": {k: v / 1000 for k, v in (doc.get("stepDurationsMs") or {}).items()}}
            time.sleep(0.5)
        raise SystemExit(f"{name} did not finish in 900 s")
    finally:
        requests.delete(f"{api}/knowledge-bases/{kb['id']}", headers=headers, timeout=60)


def validate(costs: Costs, batches: int, runs: int) -> dict:
    """Predicts one document of `batches` embedding batches at the deployed width, runs it
    `runs` times, and returns both. The local stack's overhead a task (the emulator's Lambda
    invoke and Step Functions' scheduling) is calibrated on a one-chunk document first."""
    env, s3, sfn = _stack()
    width = deployed_width(env, sfn)
    text = prose(3.0)
    megabytes = batches * EMBED_BATCH / costs.chunks_per_mb
    size = int(megabytes * 2**20)
    ingest_one(env, s3, text[-size:].encode(), "warm.txt")  # warm workers of every step, the Map's too
    tiny_mb = 2000 / 2**20
    samples = [text[i * 1200:(i + 1) * 1200] for i in range(24)]
    share = share_now(samples)
    tiny = [ingest_one(env, s3, text[i * 4000:i * 4000 + 2000].encode(), f"tiny-{i}.txt") for i in range(3)]
    tiny_steps = document_seconds(costs, local_pipeline(width, runnable_now(), 0), megabytes=tiny_mb)
    overhead = max(0.0, statistics.median(t["seconds"] for t in tiny) - tiny_steps["total"]) / 2
    rows = []
    for run in range(runs):
        share = share_now(samples)  # what one thread got just before, shown beside
        load_average, other = os.getloadavg()[0], runnable_now()
        pipe = local_pipeline(width, other, overhead)
        predicted = document_seconds(costs, pipe, megabytes=megabytes)
        start = (run + 1) * size % max(1, len(text) - size)
        measured = ingest_one(env, s3, text[start:start + size].encode(), f"doc-{run}.txt")
        chunks = measured["chunks"] or predicted["chunks"]
        cpu = {"embed": (chunks * costs.chunk_tokens / 1000 * costs.embed_s_per_1k_tokens,
                         measured["cpu"].get("pipeline-embed", 0.0)),
               "store": (chunks * costs.store_s_per_chunk,
                         measured["cpu"].get("pipeline-store", 0.0) + measured["cpu"].get("postgres", 0.0))}
        rows.append({"width": width, "loadAverage": load_average, "otherRunnable": other, "shareOfACore": share,
                     "embedShare": pipe.embed_share,
                     "predicted": predicted, "measured": measured, "ratio": measured["seconds"] / predicted["total"],
                     "cpu": {k: {"predicted": p, "measured": m, "ratio": m / p} for k, (p, m) in cpu.items()}})
        print(f"width {width}, run {run + 1}: predicted {predicted['total']:.1f} s, measured "
              f"{measured['seconds']:.1f} s (x{rows[-1]['ratio']:.2f}); a thread had {share:.2f} of a core, "
              f"load {load_average:.1f}; predicted {predicted}; measured steps {measured['steps']}; CPU "
              + ", ".join(f"{k} predicted {v['predicted']:.1f} s, measured {v['measured']:.1f} s"
                          for k, v in rows[-1]["cpu"].items()), flush=True)
    return {"width": width, "batches": batches, "megabytes": megabytes, "stepOverheadS": overhead,
            "tinySeconds": [t["seconds"] for t in tiny], "runs": rows}


# --- the tables -----------------------------------------------------------------------------------

SIZES_CHUNKS = (10, 200, 2_000, 20_000)  # a page, a report, a manual, the limit a document
WIDTHS = (1, 2, 8, 16, 40)
SEARCH_LOADS = ((100, 6), (1_000, 6), (1_000, 60), (10_000, 30))
CORPUS_CHUNKS = 1_000_000


def tables(costs: Costs, validation: dict | None = None) -> dict:
    one_mb = document_seconds(costs, aws_pipeline(), megabytes=1)
    return {
        "documentsPerHour": [documents_per_hour(costs, aws_pipeline(width=w), n) | {"width": w}
                             for n in SIZES_CHUNKS for w in WIDTHS],
        "fiftyMb": [document_seconds(costs, aws_pipeline(width=w), megabytes=FIFTY_MB / 2**20) | {"width": w}
                    for w in WIDTHS],
        "oneMb": one_mb,
        "ingestionCost": [ingestion_cost_per_1000(costs, aws_pipeline(), n) | {"chunks": n} for n in SIZES_CHUNKS],
        "search": [search_capacity(costs, u, m, CORPUS_CHUNKS) for u, m in SEARCH_LOADS]
                  + [search_capacity(costs, 1_000, 6, CORPUS_CHUNKS, high_availability=False)],
    }


def prices_month() -> str:
    """The month the prices were read, as a reader says it (the docs carry no run dates)."""
    import datetime
    return datetime.date.fromisoformat(PRICES_READ).strftime("%B %Y")


def report(costs: Costs, validation: dict | None = None) -> str:
    """The section of docs/benchmarks.md and docs/aws.md (without its heading)."""
    t = tables(costs)
    memory = function_memory_mb()
    pipe = aws_pipeline()
    c = costs
    lines = [
        f"From per-step costs measured on this machine (load average {c.load_average:.1f}) and AWS's "
        f"published limits and us-east-1 list prices (as of {prices_month()}; the constants and their pages are at the "
        "top of `bench/capacity.py`). Rerun with `.venv/bin/python bench/capacity.py` (the stack up); "
        "`--width`, `--users`, `--per-minute` and `--chunks` answer for other figures.", "",
        "| measured cost | value |", "|---|---|",
        f"| extract a text file | {c.extract_s_per_mb * 1000:.0f} ms a MB |",
        f"| chunk (default 500 tokens, cut to the model's window: {c.chunk_tokens:.0f} tokens a chunk, "
        f"{c.chunks_per_mb:,.0f} chunks a MB of prose) | {c.chunk_s_per_1k_tokens * 1000:.1f} ms per 1,000 tokens |",
        f"| embed, local model, one thread | {c.embed_s_per_1k_tokens:.2f} s per 1,000 tokens "
        f"({batch_seconds(c, 1.0):.1f} s a batch of {EMBED_BATCH}) |",
        f"| store, one writer into a live HNSW graph | {c.store_s_per_chunk * 1000:.1f} ms a chunk, of which "
        f"PostgreSQL CPU {c.store_db_cpu_s_per_chunk * 1000:.1f} ms |",
        f"| database size | {c.db_bytes_per_chunk / 1024:.1f} KiB a chunk (rows, HNSW, BM25 postings), of which the "
        f"HNSW index {c.hnsw_bytes_per_chunk / 1024:.1f} KiB |",
        "| search at {0:,} chunks, query embedding cached: function ms / PostgreSQL CPU ms | ".format(c.measured_chunks)
        + ", ".join(f"{s} {c.search_ms[s]:.1f} / {c.search_db_cpu_ms[s]:.1f}" for s in MIX) + " |",
        f"| a question embedded (embedding cache miss) | {c.query_embed_ms:.1f} ms |", "",
        f"Assumptions: a Lambda function has {LAMBDA_MB_PER_VCPU:,} MB a vCPU (proportional CPU; the pipeline's "
        f"embedding function at {memory['pipeline_embed']:,} MB computes as {pipe.embed_share:.2f} of this "
        f"machine's cores, a Lambda vCPU taken as fast as one of them); {VCPU_PER_ACU} vCPU an ACU and the database "
        f"kept under {DB_CPU_TARGET:.0%} CPU; {AWS_STEP_OVERHEAD_S} s of orchestration a task; searches at other "
        "sizes scaled by the search latency table of docs/benchmarks.md; an API worker holds "
        f"{CONNECTIONS_PER_WORKER} connections, pinned by RDS Proxy (the functions set the organisation for the "
        "session). Template parameters: `EmbedWidth` W (the Embed Map's MaxConcurrency), `EmbedConcurrency` "
        f"({embed_workers_per_width()} x W unless given), `PipelineConcurrency` {pipe.pipeline_concurrency}, "
        f"`AuroraMaxCapacity` {pipe.max_acu:g}, `HighAvailability` (a reader at the writer's capacity).", "",
        "**Documents an hour** at width W, a steady stream of documents of one size (each stage's capacity, the "
        "least of them bounds; the database at `AuroraMaxCapacity`):", "",
        "| chunks a document | " + " | ".join(f"W {w}" for w in WIDTHS) + " | bound at the widest |",
        "|---|" + "---|" * (len(WIDTHS) + 1)]
    for n in SIZES_CHUNKS:
        row = [r for r in t["documentsPerHour"] if r["chunks"] == n]
        lines.append(f"| {n:,} | " + " | ".join(f"{r['perHour']:,.0f}" for r in row) + f" | {row[-1]['bound']} |")
    fifty = t["fiftyMb"]
    lines += ["", f"**One 50 MB text file** ({fifty[0]['chunks']:,} chunks, {fifty[0]['batches']:,} batches"
                  + (f"; over the {_chunk_limit():,}-chunk limit a document, so today it fails TOO_MANY_CHUNKS: the "
                     "times are what it would take were the limit raised" if fifty[0]["overChunkLimit"] else "")
                  + "), from upload to searchable:", "",
              "| W | extract s | chunk s | embed s | store s | orchestration s | total |", "|---|---|---|---|---|---|---|"]
    for r in fifty:
        lines.append(f"| {r['width']} | {r['extract']:.0f} | {r['chunk']:.0f} | {r['embed']:,.0f} | {r['store']:,.0f} | "
                     f"{r['overhead']:.0f} | {r['total'] / 60:,.1f} min |")
    store_note = (f" The Store step alone, one writer at {c.store_s_per_chunk * 1000:.1f} ms a chunk, takes "
                  f"{fifty[0]['store']:,.0f} s: past the step's {store_timeout_s()} s, so it is retried and resumes after "
                  "its committed batches." if fifty[0]["storeOverStepTimeout"] else "")
    lines += ["", "Width shortens the embedding until the other steps dominate: the store of every chunk by one "
                  "writer and the extract and chunk of the whole file in one function are not divided by it."
              + store_note + " Under 30 s needs a remote embedding provider and a store divided among writers.", "",
              "**Ingestion cost** a thousand documents (Lambda GB-s and requests, state transitions, the ACU-hours "
              "the store takes):", "", "| chunks a document | Lambda GB-s | transitions | ACU-hours | USD |",
              "|---|---|---|---|---|"]
    for r in t["ingestionCost"]:
        lines.append(f"| {r['chunks']:,} | {r['lambdaGbSeconds']:,.0f} | {r['transitions']:,} | {r['dbAcuHours']:.2f} | "
                     f"{r['usd']:,.2f} |")
    lines += ["", f"**Searching**, steady, over {CORPUS_CHUNKS:,} chunks, every question new (its embedding "
                  "computed), no answer from the results cache, the mix 8 semantic, 1 keyword, 1 hybrid in 10:", "",
              "| users | searches a minute each | searches/s | Lambda concurrency | database vCPU | ACUs (by) | "
              "instances | RDS Proxy connections (of max) | Lambda $/month | API Gateway $/month | Aurora + storage $/month | "
              "RDS Proxy $/month | ElastiCache $/month | total $/month |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in t["search"]:
        m = r["monthUsd"]
        lines.append(f"| {r['users']:,} | {r['perMinute']:g} | {r['perSecond']:,.0f} | {r['lambdaConcurrency']:.1f} | "
                     f"{r['dbVcpu']:.2f} | {r['acu']:g} ({r['acuBy']}) | {r['instances']} | {r['proxyConnections']} "
                     f"({r['maxConnections']:,}) | {m['lambda']:,.0f} | {m['apiGateway']:,.0f} | {m['aurora'] + m['storage']:,.0f} | "
                     f"{m['rdsProxy']:,.0f} | {m['elastiCache']:,.0f} | {r['monthTotalUsd']:,.0f} |")
    over = [r for r in t["search"] if r["overMaxAcu"]]
    lines += ["", "ACUs come from the database's CPU or from keeping the corpus's HNSW index in memory (at "
                  f"{BUFFER_SHARE:.0%} of an ACU's {ACU_GIB} GiB), whichever is more; "
                  + (f"{len(over)} row(s) above need more than `AuroraMaxCapacity` {TEMPLATE_DEFAULTS['AuroraMaxCapacity']}"
                     ": raise it. " if over else "")
              + "Not counted: Aurora I/O (Aurora Standard bills it a million requests; with the corpus in memory "
                "searches read little from storage), S3, CloudWatch logs and data transfer.", ""]
    if validation:
        lines += validation_lines(validation)
    return "\n".join(lines)


def validation_lines(validation: dict) -> list[str]:
    lines = ["**Checked against the local stack**: the same costs predict one text document of several embedding "
             "batches through the local pipeline (S3, the trigger, Step Functions, the functions, PostgreSQL) at the "
             "deployed width, run right after (`bench/capacity.py --validate`, at `KB_EMBED_WIDTH=1` and `=2 make up`). "
             "Two predictions: the CPU each step's workers and PostgreSQL spend (from /proc), which other work on "
             "the machine does not change, and the time from upload to PROCESSED. For the time, the workers share "
             "this machine's two cores with each other and with other work, counted as the threads runnable when the "
             "run starts (R, read from /proc/loadavg over two seconds): a step alone gets 2 / (R + 1) of a core, each "
             "of the W embedding workers 2 / (R + W); the emulator's overhead a task is calibrated on one-chunk documents. The share one "
             "thread measured just before (CPU over wall seconds of embedding a few texts) is shown beside. "
             "Target: within 25%.", "",
             "| width | batches | runnable R, load average (a thread's measured share of a core) | embed CPU s predicted / "
             "measured | store + "
             "database CPU s predicted / measured | time s predicted (extract / chunk / embed / store / "
             "orchestration) | time s measured (steps' own: extract / chunk / embed summed / store) | time measured / "
             "predicted |", "|---|---|---|---|---|---|---|---|"]
    for width in sorted(validation, key=int):
        for r in validation[width]["runs"]:
            p, m, cpu = r["predicted"], r["measured"], r["cpu"]
            steps = " / ".join(f"{m['steps'].get(k, 0):.1f}" for k in ("extract", "chunk", "embed", "store"))
            other = f"{r['otherRunnable']:.1f}, " if "otherRunnable" in r else "-, "
            lines.append(f"| {width} | {p['batches']} | {other}{r['loadAverage']:.1f} ({r['shareOfACore']:.2f}) | "
                         f"{cpu['embed']['predicted']:.1f} / {cpu['embed']['measured']:.1f} (x{cpu['embed']['ratio']:.2f}) | "
                         f"{cpu['store']['predicted']:.1f} / {cpu['store']['measured']:.1f} (x{cpu['store']['ratio']:.2f}) | "
                         f"**{p['total']:.1f}** ({p['extract']:.1f} / {p['chunk']:.1f} / {p['embed']:.1f} / {p['store']:.1f} / "
                         f"{p['overhead']:.1f}) | **{m['seconds']:.1f}** ({steps}) | x{r['ratio']:.2f} |")
    runs = [r for v in validation.values() for r in v["runs"]]
    within = lambda xs: sum(0.75 <= x <= 1.25 for x in xs)  # noqa: E731
    embed, times = [r["cpu"]["embed"]["ratio"] for r in runs], [r["ratio"] for r in runs]
    got = [r["cpu"]["embed"]["measured"] / r["measured"]["steps"]["embed"] for r in runs
           if r["measured"]["steps"].get("embed")]
    expected = [r["embedShare"] for r in runs]
    lines += ["", f"Within 25%: embedding CPU {within(embed)} of {len(runs)} runs (x{min(embed):.2f} to x{max(embed):.2f}), "
                  f"time {within(times)} of {len(runs)} (x{min(times):.2f} to x{max(times):.2f}). The embedding's CPU is "
                  "what the AWS figures rest on (each Lambda worker has CPU of its own). The time on this machine "
                  "depends on how much of the two cores other work leaves, and that changes within a run: the "
                  + (f"embedding workers got {min(got):.2f} to {max(got):.2f} of a core each (their CPU over their "
                     f"steps' time) where the model gave them {min(expected):.2f} to {max(expected):.2f}. "
                     if got else "")
                  + "The Store's CPU is measured into a graph that already holds chunks, the validation's into an "
                    "empty knowledge base, and PostgreSQL's CPU in a run counts the status reads of the wait too.", ""]
    return lines


def figures(costs: Costs, validation: dict | None) -> dict:
    """benchmarks.json's capacity."""
    t = tables(costs)
    return {"costs": asdict(costs), "pricesRead": PRICES_READ,
            "documentsPerHour": [{"chunks": r["chunks"], "width": r["width"], "perHour": round(r["perHour"]),
                                  "bound": r["bound"]} for r in t["documentsPerHour"]],
            "fiftyMbSeconds": [{"width": r["width"], "seconds": round(r["total"], 1), "chunks": r["chunks"]}
                               for r in t["fiftyMb"]],
            "search": [{k: r[k] for k in ("users", "perMinute", "chunks", "perSecond", "lambdaConcurrency", "acu",
                                          "instances", "proxyConnections", "monthTotalUsd")} for r in t["search"]],
            "validation": [{"width": int(w), "predictedS": r["predicted"]["total"], "measuredS": r["measured"]["seconds"],
                            "ratio": r["ratio"]} for w, v in (validation or {}).items() for r in v["runs"]]}


# --- the command ------------------------------------------------------------------------------------

RESULTS = ROOT / ".kb" / "bench-results"


def load_saved(quick: bool) -> tuple[Costs | None, dict]:
    suffix = "-quick" if quick else ""
    costs_file, validation_file = RESULTS / f"capacity{suffix}.json", RESULTS / f"capacity-validation{suffix}.json"
    costs = Costs.from_json(json.loads(costs_file.read_text())) if costs_file.exists() else None
    validation = json.loads(validation_file.read_text()) if validation_file.exists() else {}
    return costs, validation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small measurements (checks the harness)")
    parser.add_argument("--report-only", action="store_true", help="the tables from the last measured costs")
    parser.add_argument("--validate", action="store_true", help="predict and run a document on the local stack")
    parser.add_argument("--batches", type=int, default=6, help="the validation document's embedding batches")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--width", type=int, help="answer for this EmbedWidth")
    parser.add_argument("--users", type=int)
    parser.add_argument("--per-minute", type=float, default=6)
    parser.add_argument("--chunks", type=int, default=CORPUS_CHUNKS, help="the corpus searched")
    parser.add_argument("--docs", action="store_true", help="write the section into docs/aws.md")
    args = parser.parse_args()
    os.environ["KB_EMBED_THREADS"] = "1"  # the costs are one thread's (one core's)
    suffix = "-quick" if args.quick else ""
    costs, validation = load_saved(args.quick)
    if not args.report_only or costs is None:
        costs = measure(args.quick)
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"capacity{suffix}.json").write_text(json.dumps(asdict(costs), indent=1))
    if args.validate:
        run = validate(costs, 2 if args.quick else args.batches, 1 if args.quick else args.runs)
        validation[str(run["width"])] = run
        (RESULTS / f"capacity-validation{suffix}.json").write_text(json.dumps(validation, indent=1))
    print(report(costs, validation))
    if args.width:
        one = document_seconds(costs, aws_pipeline(width=args.width), megabytes=FIFTY_MB / 2**20)
        print(f"\nEmbedWidth {args.width}: a 50 MB text file {one['total']:,.0f} s; documents an hour: "
              + ", ".join(f"{n:,} chunks {documents_per_hour(costs, aws_pipeline(width=args.width), n)['perHour']:,.0f}"
                          for n in SIZES_CHUNKS))
    if args.users:
        r = search_capacity(costs, args.users, args.per_minute, args.chunks)
        print(f"\n{args.users:,} users at {args.per_minute:g} a minute over {args.chunks:,} chunks: "
              f"{r['perSecond']:,.1f} searches/s, Lambda concurrency {r['lambdaConcurrency']:.1f}, {r['acu']:g} ACUs "
              f"x {r['instances']}, RDS Proxy connections {r['proxyConnections']}, ${r['monthTotalUsd']:,.0f} a month")
    if args.docs and not args.quick:  # the benchmark report takes its section from a whole `make bench`
        write_aws_guide(costs, validation)


AWS_GUIDE_INTRO = """What a deployment needs for a given load, and what it costs, comes from a model you can rerun:
`bench/capacity.py` measures the cost of each step on your machine (extracting and chunking a text
file, embedding with the local model, storing chunks into the HNSW graph, searching by strategy),
takes AWS's published limits and prices (named constants at the top of the file, each with its
pricing page and the date it was read), and answers for the template's parameters (`EmbedWidth`,
`EmbedConcurrency`, `PipelineConcurrency`, `AuroraMaxCapacity`, `HighAvailability`) and the
functions' memory in `.chalice/config.json`. It needs the local stack (`make up`) for PostgreSQL.

<!-- example: skip: needs the local stack up and measures for a minute or two -->
```bash
.venv/bin/python bench/capacity.py                      # measure the costs, print the tables
.venv/bin/python bench/capacity.py --report-only --width 16 --users 5000 --per-minute 10 --chunks 2000000
.venv/bin/python bench/capacity.py --validate           # predict a local run, run it, compare
.venv/bin/python bench/capacity.py --docs               # refresh this section
```

`--report-only` reuses the last measured costs (`.kb/bench-results/capacity.json`); prices change,
so check the constants against your region's pricing pages before you budget from them. The
figures below are from the last `--docs` run."""


def write_aws_guide(costs: Costs, validation: dict) -> None:
    """docs/aws.md's Capacity planning section: replaced where it is, else added at the end."""
    guide = ROOT / "docs" / "aws.md"
    text = guide.read_text()
    section = f"{HEADING}\n\n{AWS_GUIDE_INTRO}\n\n{report(costs, validation).rstrip()}\n"
    if HEADING in text:
        before, rest = text.split(HEADING, 1)
        after = rest.split("\n## ", 1)[1] if "\n## " in rest else ""
        text = before + section + ("\n## " + after if after else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    guide.write_text(text)
    print(f"wrote {HEADING.lstrip('# ')} into {guide}")


if __name__ == "__main__":
    main()
