"""Shared pieces of the benchmarks: the SciFact data, a database of their own on
the local stack's PostgreSQL, cached corpus embeddings and ranking metrics."""
import hashlib
import json
import math
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "data"  # the real documents and SciFact, kept in the repository (its README.md)
SCIFACT = DATA / "scifact-subset"
CACHE = ROOT / ".kb" / "bench-cache"
BENCH_DB = "kb_bench"


def quiet_metrics() -> None:
    """The service prints EMF lines per search and cache lookup; keep them out of the tables."""
    from chalicelib import metrics

    metrics.count_lookup = lambda hit, provider: None
    metrics.record_search = lambda event: None


def local_env() -> dict:
    path = ROOT / ".kb" / "local.env"
    if not path.exists():
        raise SystemExit("the local stack is not up: run `make up` first")
    from kbcli.config import read_env_file

    return read_env_file(path)


def aws_client(service: str):
    """A boto3 client of the local stack's emulator."""
    import boto3

    env = local_env()
    return boto3.client(service, endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                        aws_access_key_id="test", aws_secret_access_key="test")


def corpus(limit: int | None = None) -> list[dict]:
    with open(SCIFACT / "corpus.jsonl") as fh:
        docs = [json.loads(line) for line in fh]
    return docs[:limit] if limit else docs


def queries_and_qrels(corpus_ids: set[str]) -> tuple[list[dict], dict[str, set[str]]]:
    qrels: dict[str, set[str]] = {}
    with open(SCIFACT / "qrels_train.tsv") as fh:
        next(fh)
        for line in fh:
            qid, doc_id, score = line.rstrip("\n").split("\t")
            if int(score) > 0 and doc_id in corpus_ids:
                qrels.setdefault(qid, set()).add(doc_id)
    with open(SCIFACT / "queries_train.jsonl") as fh:
        queries = [q for q in (json.loads(line) for line in fh) if q["_id"] in qrels]
    return queries, qrels


def embed_corpus(texts: list[str]) -> list[list[float]]:
    """Corpus embeddings with the local model, cached on disk by content hash
    (2,101 abstracts take about two minutes on two cores)."""
    import numpy as np

    from chalicelib.embeddings import get_provider

    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = CACHE / f"minilm-{digest}.npy"
    if path.exists():
        return np.load(path).tolist()
    CACHE.mkdir(parents=True, exist_ok=True)
    vectors = get_provider("local").embed_documents(texts)
    np.save(path, np.asarray(vectors, dtype="float32"))
    return vectors


def fresh_database() -> str:
    """(Re)create the benchmark database and point the service code at it."""
    import psycopg
    from urllib.parse import urlsplit, urlunsplit

    from chalicelib.storage.migrate import migrate

    drop_database()  # also drops the service's cached connection to the old database
    admin = local_env()["DATABASE_URL"]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    url = urlunsplit(urlsplit(admin)._replace(path="/" + BENCH_DB))
    migrate(url)
    quiet_metrics()
    os.environ["DATABASE_URL"] = url
    os.environ["REDIS_URL"] = local_env()["REDIS_URL"].rsplit("/", 1)[0] + "/14"
    return url


@contextmanager
def scratch_database(prefix: str):
    """A migrated database of its own for one run (`{prefix}_<hex>`), the service code pointed at it
    with the pipeline's timeouts, dropped at the end; yields its URL."""
    import secrets

    import psycopg

    from chalicelib.storage import db
    from chalicelib.storage.migrate import migrate

    admin = local_env()["DATABASE_URL"]
    name = f"{prefix}_{secrets.token_hex(3)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        migrate(admin.replace("/kb?", f"/{name}?"))
        yield use_database(name)
    finally:
        db.reset()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def use_database(name: str) -> str:
    """Points the service code at the local stack's database of that name, with the pipeline's
    timeouts; returns its URL."""
    url = local_env()["DATABASE_URL"].replace("/kb?", f"/{name}?")
    os.environ["DATABASE_URL"], os.environ["DATABASE_TIMEOUTS"] = url, "pipeline"
    return url


@contextmanager
def as_the_functions(principal):
    """Searches as the deployed functions run them: logged in as kb_app, with row-level
    security limiting every statement to the caller's organisation (migration 0008)."""
    from chalicelib import process
    from chalicelib.storage import acting_for, db

    process.keep_freed_memory()  # as app.py does when a function starts
    owner = os.environ["DATABASE_URL"]
    os.environ["DATABASE_URL"] = db.functions_login(owner)
    db.reset()
    try:
        with acting_for(principal.org_id, principal.user_id):
            yield
    finally:
        os.environ["DATABASE_URL"] = owner
        db.reset()


def forget_answers(client) -> None:
    """The results cache's answers gone from Redis, nothing else (query embeddings, shared BM25 blocks)."""
    client.delete(*client.keys("kb:answer:*") or ["kb:answer:none"])


@contextmanager
def nothing_kept():
    """The service as a worker's first searches find it: no BM25 blocks kept from earlier ones
    (chalicelib/storage/postings_cache.py's CACHE swapped for an empty one that keeps nothing)."""
    from chalicelib.storage import postings_cache

    kept, postings_cache.CACHE = postings_cache.CACHE, postings_cache.PostingsCache(0)
    try:
        yield
    finally:
        postings_cache.CACHE = kept


@contextmanager
def two_logins(principal):
    """(switch, names): searches in-process on either of two open connections, the owner's
    (which row-level security does not limit) and kb_app's (which it does), both acting for
    the principal's organisation; switch(name) makes the service use that one next."""
    from chalicelib.storage import acting_for, db

    owner_url = os.environ["DATABASE_URL"]
    urls = {"owner": owner_url, "kb_app": db.functions_login(owner_url)}
    # each login's pair: the main connection, and the side one hybrid search reads beside it
    conns = {name: {slot: db.open_connection(url) for slot in (db.MAIN, db.SIDE)} for name, url in urls.items()}

    def switch(name: str) -> None:  # the service's cached connections, swapped (not closed)
        db._conns.update(conns[name])
        db._last_used.update(dict.fromkeys(conns[name], time.monotonic()))

    try:
        with acting_for(principal.org_id, principal.user_id):
            yield switch
    finally:
        db._conns.clear()
        for pair in conns.values():
            for conn in pair.values():
                conn.close()


def drop_database() -> None:
    """Give the disk back (at 1M chunks the benchmark database holds several GB)."""
    import psycopg

    from chalicelib.storage import db

    db.reset()
    with psycopg.connect(local_env()["DATABASE_URL"], autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")


def ndcg_at(ranked: list[str], relevant: set[str], k: int) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal if ideal else 0.0


def recall_at(ranked: list[str], relevant: set[str], k: int) -> float:
    return len(set(ranked[:k]) & relevant) / len(relevant)


def mrr_at(ranked: list[str], relevant: set[str], k: int) -> float:
    return next((1 / (i + 1) for i, d in enumerate(ranked[:k]) if d in relevant), 0.0)


def quality(runs: dict[str, list[str]], qrels: dict[str, set[str]]) -> dict:
    rows = [(ranked, qrels[qid]) for qid, ranked in runs.items()]
    return {
        "nDCG@10": statistics.mean(ndcg_at(r, rel, 10) for r, rel in rows),
        "recall@10": statistics.mean(recall_at(r, rel, 10) for r, rel in rows),
        "recall@100": statistics.mean(recall_at(r, rel, 100) for r, rel in rows),
        "MRR@10": statistics.mean(mrr_at(r, rel, 10) for r, rel in rows),
        # Seed 004's "> 80% relevant chunks in the top 3", counted two ways: the share of
        # questions with a relevant abstract in their top 3, and the share of top-3 passages
        # that are relevant (SciFact has 1.1 relevant abstracts a question, so at most ~0.37).
        "hit@3": statistics.mean(1.0 if set(r[:3]) & rel else 0.0 for r, rel in rows),
        "precision@3": statistics.mean(len(set(r[:3]) & rel) / 3 for r, rel in rows),
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def save_results(name: str, quick: bool, results: dict) -> None:
    """.kb/bench-results/<name>.json (or <name>-quick.json), read by report.py."""
    out = ROOT / ".kb" / "bench-results"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}{'-quick' if quick else ''}.json").write_text(json.dumps(results, indent=2))


def dedupe(doc_ids: list[str]) -> list[str]:
    return list(dict.fromkeys(doc_ids))
