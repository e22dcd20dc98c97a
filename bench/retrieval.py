"""Retrieval benchmark: quality per strategy on SciFact, latency at growing sizes.

    .venv/bin/python bench/retrieval.py [--quick] [--sizes 10000,100000,1000000]

Needs the local stack (`make up`): it works in a database of its own (kb_bench)
on the stack's PostgreSQL and a Redis database of its own (14).

- quality: nDCG@10, recall@10, recall@100 and MRR@10 of semantic, keyword and
  hybrid search over the 2,101 SciFact abstracts with the 188 train queries
  (document-level: a document's best passage counts);
- throughput through API Gateway with 1, 4 and 16 clients on the real corpus;
- cold bursts: 16 and 32 searches at once on freshly started API workers (errors, p50, p95);
- latency at the real corpus and each size: p50/p95/p99 per strategy, cache miss
  and hit, service-side (in process) and through API Gateway on the emulator.
  Sizes above the real corpus are reached synthetically: extra chunks whose text
  is three sentences drawn from random abstracts and whose vector is a real
  abstract's vector plus Gaussian noise (sigma 0.05 per dimension, renormalised),
  so both the HNSW graph and the full-text index grow realistically;
- HNSW recall@10 against an exact scan at each size;
- at each size, bench/peers_scale.py: pg_textsearch and pgvectorscale's StreamingDiskANN on a
  copy of the same chunks beside the service (the synthetic sizes), and every train question's
  quality per strategy beside exact BM25 and exact cosine over the same chunks.
"""
import argparse
import os
import random
import re
import statistics
import time

import peers_scale
from common import (as_the_functions, corpus, forget_answers, nothing_kept, two_logins, dedupe, drop_database, embed_corpus, fresh_database, percentile, quality,
                    queries_and_qrels, save_results)

STRATEGIES = ("semantic", "keyword", "hybrid")


def setup(docs: list[dict]):
    from chalicelib.auth import issue_key
    from chalicelib.knowledge_bases import create_knowledge_base

    fresh_database()
    # The API benchmarks measure the service, not the per-key rate limit (20/s by default).
    principal, key = issue_key("bench", "bench", rate_per_second=1_000_000)
    kb = create_knowledge_base(principal, name="SciFact", description="BEIR SciFact subset")
    flat, doc_to_corpus = load(kb, docs)
    return principal, key, kb, flat, doc_to_corpus


def load(kb: dict, docs: list[dict]) -> tuple[list[dict], dict]:
    """Chunk and embed the abstracts as the pipeline does and store them, one
    document each (the embeddings come from the on-disk cache after the first run)."""
    from chalicelib.ingestion.chunk import chunk_document
    from chalicelib.ingestion.context import embedded_text, fitting_overlap, fitting_tokens, with_context
    from chalicelib.ingestion.extract import TEXT, Extracted, Section
    from chalicelib.storage import chunks as chunk_rows
    from chalicelib.storage import connection, document_status

    chunked = [with_context(chunk_document(Extracted(TEXT, [Section(d["text"])]), fitting_tokens(kb),
                                           fitting_overlap(kb), {"corpusId": d["_id"]}), None, f"{d['_id']}.txt")
               for d in docs]
    flat = [c for chunks in chunked for c in chunks]
    for chunk, vector in zip(flat, embed_corpus([embedded_text(c) for c in flat])):
        chunk.embedding = vector
    doc_to_corpus = {}
    with connection() as conn:
        for doc, chunks in zip(docs, chunked):
            row = document_status.upsert_pending(conn, kb_id=kb["id"], s3_key=f"kb/{kb['id']}/{doc['_id']}.txt",
                                                 filename=f"{doc['_id']}.txt", size_bytes=len(doc["text"]))
            chunk_rows.replace_document_chunks(conn, doc_id=row["id"], kb_id=kb["id"], dim=384, chunks=chunks,
                                               page_count=None)
            doc_to_corpus[row["id"]] = doc["_id"]
        conn.execute("ANALYZE chunks")
    return flat, doc_to_corpus


def run_queries(principal, kb, queries, doc_to_corpus, strategy: str, top_k: int = 100,
                **options) -> dict[str, list[str]]:
    from chalicelib.retrieval import SearchRequest, search

    runs = {}
    for q in queries:
        answer = search(principal, SearchRequest(knowledge_base_ids=(kb["id"],), query=q["text"], top_k=top_k,
                                                 strategy=strategy, max_tokens=10**9, **options))
        runs[q["_id"]] = dedupe([doc_to_corpus.get(p.document_id, p.document_id) for p in answer.passages])
    return runs


MIN_SCORE_SWEEP = (0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.7)


def min_score_sweep(docs: list[dict], queries: list[dict], qrels: dict) -> list[dict]:
    """What a minScore (the cosine similarity of passage and question) keeps: the share of
    the relevant (query, abstract) pairs and of random pairs (20 abstracts per query, fixed
    seed) at or above each threshold."""
    import numpy as np

    from chalicelib.embeddings import get_provider

    vectors = np.asarray(embed_corpus([d["text"] for d in docs]), dtype="float32")
    index = {d["_id"]: i for i, d in enumerate(docs)}
    provider, rng = get_provider("local"), np.random.default_rng(7)
    relevant, unrelated = [], []
    for q in queries:
        scores = vectors @ np.asarray(provider.embed_query(q["text"]), dtype="float32")
        relevant += [float(scores[index[d]]) for d in qrels[q["_id"]] if d in index]
        unrelated += [float(s) for s in scores[rng.integers(0, len(docs), 20)]]
    rows = [{"minScore": th, "relevantKept": float(np.mean(np.asarray(relevant) >= th)),
             "randomKept": float(np.mean(np.asarray(unrelated) >= th))} for th in MIN_SCORE_SWEEP]
    print(f"\n{'minScore':>8} {'relevant kept':>14} {'random kept':>12}   ({len(relevant)} relevant pairs)")
    for row in rows:
        print(f"{row['minScore']:8.2f} {row['relevantKept']:14.3f} {row['randomKept']:12.3f}")
    return rows


def fusion_sweep(principal, kb, queries, qrels, doc_to_corpus, quick: bool = False) -> list[dict]:
    """Hybrid quality by fusion method and semantic weight (keyword = 1 - it), in the
    service: by score (min-max normalised, the default) and by rank (RRF, k 60). quick: the
    ends, the service's weight and one by rank (the harness check's; make bench sweeps all)."""
    from chalicelib import limits

    rows = []
    print(f"\n{'fusion':6} {'semantic weight':>15} {'nDCG@10':>8} {'R@10':>7}")
    grid = ((("score", sorted({0.0, limits.HYBRID_WEIGHTS[0], 1.0})), ("rank", [0.5])) if quick
            else (("score", [i / 10 for i in range(11)]), ("rank", [0.3, 0.5, 0.7])))
    for method, weights in grid:
        for w in weights:
            pair = (w, round(1 - w, 6))  # 1 - 0.7 is 0.30000000000000004
            scores = quality(run_queries(principal, kb, queries, doc_to_corpus, "hybrid",
                                         hybrid_weights=pair, fusion=method), qrels)
            service = method == "score" and pair == limits.HYBRID_WEIGHTS
            rows.append({"method": method, "semanticWeight": w, "ndcgAt10": scores["nDCG@10"],
                         "recallAt10": scores["recall@10"], "service": service})
            print(f"{method:6} {w:15.1f} {scores['nDCG@10']:8.4f} {scores['recall@10']:7.4f}"
                  f"{'  <- the service' if service else ''}")
    return rows


def grow_to(kb, flat: list[dict], target: int, rng: random.Random) -> float:
    """Add synthetic chunks until the knowledge base holds `target` of them; returns
    the seconds spent rebuilding the indexes. The rows go in by binary COPY with the
    HNSW and full-text indexes dropped, then both are built over the whole table
    (inserting into a live HNSW graph row by row costs about 10 minutes per 100k
    chunks here; a bulk build is what a large import would do too)."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    from chalicelib.storage import knowledge_bases

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        register_vector(conn)
        current = conn.execute("SELECT count(*) FROM chunks WHERE kb_id = %s", (kb["id"],)).fetchone()[0]
        missing = target - current
        if missing <= 0:
            return 0.0
        # The indexes as the migrations made them, rebuilt below; BM25's postings too.
        bulk_built = [r[0] for r in conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname IN ('chunks_tsv_idx', 'chunk_terms_tail')")]
        conn.execute("DROP INDEX IF EXISTS chunks_embedding_384_hnsw")
        conn.execute("DROP INDEX IF EXISTS chunks_tsv_idx")
        conn.execute("DROP INDEX IF EXISTS chunk_terms_tail")
        conn.execute("ALTER TABLE chunks DISABLE TRIGGER kb_bm25_added")
        sentences = [s for c in flat for s in re.split(r"(?<=[.!?])\s+", c.content) if len(s) > 20]
        vectors = np.asarray(embed_corpus(sentences), dtype="float32")
        while missing > 0:
            n = min(10_000, missing)
            picks = [[rng.randrange(len(sentences)) for _ in range(3)] for _ in range(n)]
            _copy_synthetic_document(conn, kb["id"], f"doc_synth{rng.getrandbits(48):012x}", picks, sentences,
                                     vectors)
            missing -= n
        conn.execute("ALTER TABLE chunks ENABLE TRIGGER kb_bm25_added")
        started = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '8GB'")  # the whole graph in memory: no slow on-disk build
        conn.execute("SET max_parallel_maintenance_workers = 1")  # two cores: leader + one worker
        knowledge_bases.ensure_vector_index(conn, 384)
        conn.execute("SELECT kb_bm25_rebuild(%s)", (kb["id"],))
        for indexdef in bulk_built:
            conn.execute(indexdef)
        conn.execute("VACUUM ANALYZE chunks")
        conn.execute("VACUUM ANALYZE term_blocks")
        return time.perf_counter() - started


def _copy_synthetic_document(conn, kb_id: str, doc_id: str, picks, sentences: list[str], vectors) -> None:
    """One synthetic document: each chunk is three of the corpus's sentences (picks: their
    indexes), and its vector is the mean of theirs, renormalised.

    Why this vector: the mean of three sentences' MiniLM embeddings is close to the
    embedding of the three as one text (cosine median 0.90, 5th percentile 0.80, over 300
    of them), and the model is too slow to embed a million texts here. Two cheaper
    vectors tried before measured something else. A real chunk's vector plus Gaussian
    noise (sigma 0.05 a dimension, the earlier reports' generator) gives every real chunk
    ~440 copies nearer to it than to each other: HNSW links them as a star around it and
    recall@10 at a million measured that star (0.885 at ef_search 400). Draws from a
    Gaussian with the real vectors' mean and covariance fill all 384 dimensions as real
    text does not (0.802 at 400)."""
    import numpy as np

    mean = vectors[np.asarray(picks)].mean(axis=1)
    mean /= np.linalg.norm(mean, axis=1, keepdims=True)
    with conn.transaction():
        conn.execute("INSERT INTO documents (id, kb_id, s3_key, filename, status) VALUES"
                     " (%s, %s, %s, 'synthetic.txt', 'PROCESSED')", (doc_id, kb_id, f"synthetic/{doc_id}"))
        with conn.cursor() as cur, cur.copy(
                "COPY chunks (document_id, kb_id, chunk_index, content, start_char, end_char, token_count,"
                " embedding_dim, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["text", "text", "int4", "text", "int4", "int4", "int4", "int4", "vector"])
            for i, (pick, vector) in enumerate(zip(picks, mean)):
                text = " ".join(sentences[j] for j in pick)
                copy.write_row((doc_id, kb_id, i, text, 0, len(text), len(text) // 4, 384, vector))


def latency(principal, kb, queries, strategy: str, cached: bool, shared: bool = False) -> list[float]:
    """shared: each question asked once untimed first, so that Redis holds the BM25 blocks the
    service shares between workers (storage/postings_cache.py, SharedBlocks), then only the answers
    cleared: a worker that has kept nothing (common.nothing_kept) then times what it reads
    from there."""
    import redis

    from chalicelib.retrieval import SearchRequest, search
    from chalicelib.kv import redis_client

    client: redis.Redis = redis_client()
    times = []
    for q in queries:
        request = SearchRequest(knowledge_base_ids=(kb["id"],), query=q["text"], top_k=10, strategy=strategy)
        if shared:
            search(principal, request)
            forget_answers(client)
        elif cached:  # a semantic search caches the query's embedding, cheaply at any size
            search(principal, SearchRequest(knowledge_base_ids=(kb["id"],), query=q["text"], top_k=1,
                                            strategy="semantic"))
            # but not the answer: the runs after the first would time the results cache's
            # (0.7 ms at every size in the reports of 2026-11-26), not a search
            forget_answers(client)
        else:
            client.flushdb()
        started = time.perf_counter()
        search(principal, request)
        times.append((time.perf_counter() - started) * 1000)
    return times


EF_SEARCH_SWEEP = (40, 100, 200, 400, 800)


def hnsw_sweep(kb, vectors: list[list[float]]) -> dict:
    """For each ef_search: the share of the exact top 10 that the HNSW index returns
    (recall@10) and the median time of the index scan alone, in ms."""
    from chalicelib.storage import connection
    from chalicelib.storage.chunks import as_vector

    order = "embedding::vector(384) <=> %(q)b::vector(384)"
    sql = "SELECT id FROM chunks WHERE kb_id = %(kb)s AND embedding_dim = 384 ORDER BY {o} LIMIT 10"
    out = {}
    with connection() as conn:
        params = [{"q": as_vector(v), "kb": kb["id"]} for v in vectors]
        exact = [{r["id"] for r in conn.execute(sql.format(o=f"({order}) + 0"), p)} for p in params]

        def through_graph(p: dict, ef: int) -> tuple[set, float]:
            """The top 10 from the graph, as the service reads it, and the scan's ms."""
            with conn.transaction():
                conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                conn.execute("SET LOCAL enable_sort = off")
                started = time.perf_counter()
                found = {r["id"] for r in conn.execute(sql.format(o=order), p)}
                return found, (time.perf_counter() - started) * 1000

        # The exact scans pushed the graph out of shared buffers: one untimed pass at the
        # largest ef_search reads it back (at a million chunks the first, cold sweep fell
        # from 156 ms at ef_search 40 to 62 ms at 800 as it warmed).
        for p in params:
            through_graph(p, EF_SEARCH_SWEEP[-1])
        for ef in EF_SEARCH_SWEEP:
            runs = [through_graph(p, ef) for p in params]
            overlaps = [len(found & truth) / max(1, len(truth)) for (found, _), truth in zip(runs, exact)]
            out[str(ef)] = {"recall@10": statistics.mean(overlaps), "p50": statistics.median(ms for _, ms in runs)}
    return out


def bm25_agreement(principal, kb, sample) -> dict:
    """The service's keyword top 10 against exact BM25 (every chunk holding a query term
    scored: in SQL from its tsv, or above SQL_REFERENCE_MAX every posting summed): the share of the exact
    top 10 it returns (a chunk tied with its 10th counts as found), the postings each search
    read (bm25.top's count) and the keyword search's service-side p95 over the sample."""
    from chalicelib.retrieval import SearchRequest, bm25, search
    from chalicelib.storage import acting_for, snapshot, terms

    shares, reads, times = [], [], []
    real = bm25.top

    def counted(*args):
        ranked = real(*args)
        reads.append(ranked.postings_read)
        return ranked

    bm25.top = counted
    try:
        for q in sample:
            with acting_for(principal.org_id, principal.user_id), snapshot() as conn:
                words = terms.query_terms(conn, q["text"])
                stats = terms.statistics(conn, [kb["id"]], words)
                query = bm25.query(stats, words)
                if not query.terms:
                    exact = []
                elif stats.chunks <= SQL_REFERENCE_MAX:
                    exact = _exact_bm25(conn, kb["id"], query)
                else:
                    exact = _summed_bm25(conn, kb["id"], query)
            started = time.perf_counter()
            answer = search(principal, SearchRequest(knowledge_base_ids=(kb["id"],), query=q["text"], top_k=10,
                                                     strategy="keyword", max_tokens=10**9))
            times.append((time.perf_counter() - started) * 1000)
            # A passage stands for the chunks of its parent (retrieval/parents.py) and for the repeats
            # it names (alsoIn: retrieval/dedupe.py), so each of those chunks counts as returned.
            ours = {(p.document_id, i) for p in answer.passages
                    for i in range((p.span or (p.chunk_index,) * 2)[0], (p.span or (p.chunk_index,) * 2)[1] + 1)}
            repeats = {a.chunk_id for p in answer.passages for a in p.also_in}
            last = min((p.scores.keyword for p in answer.passages), default=0.0) * query.best
            if exact:
                # passages' scores are rounded to 6 places: a tie is equal within that
                shares.append(sum((r["document_id"], r["chunk_index"]) in ours or r.get("chunk_id") in repeats
                                  or abs(r["score"] - last) < 1e-5 * query.best for r in exact) / len(exact))
    finally:
        bm25.top = real
    return {"recallOfExactTop10": statistics.mean(shares) if shares else 1.0,
            "minimum": min(shares, default=1.0), "queries": len(shares),
            "postingsRead": statistics.median(reads) if reads else 0, "postingsReadMax": max(reads, default=0),
            "p95Ms": percentile(times, 95) if times else None}


# Up to this size the reference is computed in SQL from the chunks' tsv (through the GIN
# index); at a million chunks that took minutes a question, so above it the reference sums
# every posting of every term from the blocks (bm25.exact_reference: no pruning, the part
# that could be wrong; tests/integration/test_bm25.py checks the blocks against the chunks).
SQL_REFERENCE_MAX = 200_000


def _summed_bm25(conn, kb_id: str, q) -> list[dict]:
    from chalicelib.retrieval import bm25
    from chalicelib.storage import term_blocks

    ranked = bm25.exact_reference(q, term_blocks.BlockPostings(conn, [kb_id]), 10)
    rows = conn.execute("SELECT id, document_id, chunk_index FROM chunks WHERE id = ANY(%s)",
                        (ranked.ids.tolist(),)).fetchall()
    where = {r["id"]: r for r in rows}
    return [{"chunk_id": i, "document_id": where[i]["document_id"], "chunk_index": where[i]["chunk_index"], "score": s}
            for i, s in zip(ranked.ids.tolist(), ranked.scores.tolist())]


def _exact_bm25(conn, kb_id: str, q) -> list[dict]:
    """The top 10 by BM25 over every chunk of the knowledge base that holds a query term
    (found through the GIN index, scored from its tsv): the reference, not the service's path."""
    return conn.execute(
        """WITH q(term, idf) AS (SELECT * FROM unnest(%(terms)s::text[], %(idfs)s::float8[]))
           SELECT c.id AS chunk_id, c.document_id, c.chunk_index, s.score
             FROM chunks c,
                  LATERAL (SELECT sum(t.tf) AS dl FROM kb_bm25_terms(c.tsv) t) l,
                  LATERAL (SELECT sum(q.idf * t.tf * (%(k1)s + 1)
                                      / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * l.dl / %(avgdl)s))) AS score
                             FROM kb_bm25_terms(c.tsv) t JOIN q ON q.term = t.term) s
            WHERE c.kb_id = %(kb)s
              AND c.tsv @@ (SELECT string_agg(quote_literal(term), ' | ') FROM q)::tsquery
            ORDER BY s.score DESC, c.id LIMIT 10""",
        {**q.sql_params(), "kb": kb_id}).fetchall()


def service_latency(principal, kb, sample, runs: int) -> dict:
    """Per strategy and cache state: the median over runs of p50/p95/p99, and the p50 spread;
    as the functions' role, so row-level security's cost is in the figures."""
    out = {}
    for strategy in STRATEGIES:
        for cached in ((False,) if strategy == "keyword" else (False, True)):
            with as_the_functions(principal):
                out[f"{strategy}/{'hit' if cached else 'miss'}"] = _over_runs(
                    [latency(principal, kb, sample, strategy, cached) for _ in range(runs)])
    # The rows above are a warm worker's, which keeps the BM25 blocks it has read (the runs and
    # the quality passes before them read every question's terms). By a worker that has kept
    # none, as its first searches are: "shared", reading the common terms' blocks other workers
    # shared through Redis; "cold", with Redis emptied too (a term's first search after a
    # compaction), which also pays for sharing them.
    with as_the_functions(principal), nothing_kept():
        out["keyword/shared"] = _over_runs([latency(principal, kb, sample, "keyword", False, shared=True)
                                            for _ in range(runs)])
        out["keyword/cold"] = _over_runs([latency(principal, kb, sample, "keyword", False) for _ in range(runs)])
    return out


def _over_runs(times: list[list[float]]) -> dict:
    stats = {p: [percentile(t, int(p[1:])) for t in times] for p in ("p50", "p95", "p99")}
    return {**{p: statistics.median(v) for p, v in stats.items()}, "p50Spread": (min(stats["p50"]), max(stats["p50"]))}


def isolation_cost(principal, kb, sample) -> dict:
    """What row-level security costs a search: keyword and semantic (cache misses), each
    query as the owner (not limited by the policies) and as kb_app (limited, as the deployed
    functions are), the pair's order alternating query by query so load hits both alike.
    {strategy: {owner: {p50, p95}, kbApp: {p50, p95}, ratioP50}}."""
    from chalicelib.kv import redis_client
    from chalicelib.retrieval import SearchRequest, search

    client, out = redis_client(), {}
    with two_logins(principal) as switch:
        for strategy in ("semantic", "keyword"):
            times = {"owner": [], "kb_app": []}
            for i, q in enumerate([sample[0]] + list(sample)):  # the first pair warms both up
                request = SearchRequest(knowledge_base_ids=(kb["id"],), query=q["text"], top_k=10, strategy=strategy)
                for login in (("owner", "kb_app") if i % 2 else ("kb_app", "owner")):
                    switch(login)
                    client.flushdb()
                    started = time.perf_counter()
                    search(principal, request)
                    if i:
                        times[login].append((time.perf_counter() - started) * 1000)
            owner, app = ({"p50": percentile(times[k], 50), "p95": percentile(times[k], 95)} for k in ("owner", "kb_app"))
            out[strategy] = {"owner": owner, "kbApp": app, "ratioP50": app["p50"] / owner["p50"]}
    return out


def api_latency(kb, key: str, sample) -> dict:
    import api

    with api.api_pointed_at(os.environ["DATABASE_URL"], os.environ["REDIS_URL"]):
        return api.latency(kb["id"], key, sample, os.environ["REDIS_URL"])


# Concurrent clients of the throughput table. Each client warms a worker of its own, and a
# worker's start imports the app and loads the model: 16 of them took a minute of the quick
# harness check (make test's) on two cores, so --quick stops at 4.
THROUGHPUT_CLIENTS, QUICK_THROUGHPUT_CLIENTS = (1, 4, 16), (1, 2, 4)


def api_throughput(kb, key: str, sample, seconds: float, levels=THROUGHPUT_CLIENTS) -> list[dict]:
    """The service's own throughput: its stage's throttle lifted (api.stage_unthrottled)."""
    import api

    with api.api_pointed_at(os.environ["DATABASE_URL"], os.environ["REDIS_URL"]), api.stage_unthrottled() as own:
        lifted = own != (None, None)
        return [{**api.throughput(kb["id"], key, sample, clients, seconds), "stageThrottleLifted": lifted}
                for clients in levels]


def api_cold_bursts(kb, key: str, sample, sizes: tuple[int, ...]) -> list[dict]:
    import api

    with api.api_pointed_at(os.environ["DATABASE_URL"], os.environ["REDIS_URL"]):
        return [api.cold_burst(kb["id"], key, sample, clients) for clients in sizes]


def print_size(size: int, row: dict) -> None:
    for label, r in row["service"].items():
        strategy, cache = label.split("/")
        api = row["api"].get(label)  # no API row for a worker's first searches (cold)
        print(f"{size:8d} {strategy:10} {cache:6} {r['p50']:8.1f} {r['p95']:8.1f} {r['p99']:8.1f}"
              f"   (p50 spread {r['p50Spread'][0]:.1f}-{r['p50Spread'][1]:.1f}) "
              + (f"{api['p50']:10.1f}" if api else f"{'-':>10}"))
    miss, hit = row["service"]["semantic/miss"]["p50"], row["service"]["semantic/hit"]["p50"]
    sweep = ", ".join(f"{ef}: {r['recall@10']:.3f} ({r['p50']:.1f} ms)" for ef, r in row["hnsw"].items())
    print(f"{size:8d} HNSW recall@10 vs exact scan by ef_search: {sweep}")
    print(f"{size:8d} semantic cache hit p50 is x{miss / hit:.1f} faster than a miss; "
          f"indexes built in {row['indexBuildSeconds']:.1f} s")
    if "bm25" in row:
        b = row["bm25"]
        print(f"{size:8d} keyword top 10 against exact BM25: {b['recallOfExactTop10']:.3f} of it found "
              f"(lowest {b['minimum']:.1f}); postings read: median {b['postingsRead']:,.0f}, most "
              f"{b['postingsReadMax']:,}; keyword p95 {b['p95Ms']:.1f} ms")
    for strategy, r in row.get("isolation", {}).items():
        print(f"{size:8d} {strategy} as kb_app (row-level security) against the owner: p50 {r['kbApp']['p50']:.1f}"
              f" vs {r['owner']['p50']:.1f} ms, x{r['ratioP50']:.2f}")


def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small corpus and sizes: checks the harness runs")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="chunk counts beyond the real corpus")
    parser.add_argument("--runs", type=int, default=3, help="service-side latency runs per size")
    parser.add_argument("--queries", type=int, default=30, help="queries per latency run")
    args = parser.parse_args()
    rng = random.Random(7)
    docs = corpus(100 if args.quick else None)
    queries, qrels = queries_and_qrels({d["_id"] for d in docs})
    principal, key, kb, flat, doc_to_corpus = setup(docs)
    print(f"corpus: {len(docs)} SciFact abstracts, {len(flat)} chunks; {len(queries)} train queries")

    results = {"corpus": len(docs), "chunks": len(flat), "queries": len(queries), "quality": {}, "latency": {}}
    print(f"\n{'strategy':10} {'nDCG@10':>8} {'R@10':>7} {'R@100':>7} {'MRR@10':>7}")
    for strategy in STRATEGIES:
        started = time.perf_counter()
        scores = quality(run_queries(principal, kb, queries, doc_to_corpus, strategy), qrels)
        results["quality"][strategy] = scores | {"seconds": time.perf_counter() - started}
        print(f"{strategy:10} {scores['nDCG@10']:8.4f} {scores['recall@10']:7.4f} "
              f"{scores['recall@100']:7.4f} {scores['MRR@10']:7.4f}")

    results["fusion"] = fusion_sweep(principal, kb, queries, qrels, doc_to_corpus, args.quick)
    results["minScore"] = min_score_sweep(docs, queries, qrels)

    sample = queries[: (10 if args.quick else args.queries)]
    results["latencyQueries"] = len(sample)
    results["throughputSeconds"] = 1 if args.quick else 15
    results["throughput"] = api_throughput(kb, key, sample[:20], results["throughputSeconds"],
                                           QUICK_THROUGHPUT_CLIENTS if args.quick else THROUGHPUT_CLIENTS)
    print(f"\nthrough API Gateway, {len(flat)} chunks, cached query embeddings:")
    print(f"{'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8}")
    for row in results["throughput"]:
        print(f"{row['clients']:7d} {row['perSecond']:8.1f} {row['p50']:8.1f} {row['p95']:8.1f}")
    # --quick leaves the bursts to cold.py's (8 clients): a burst here recycled every API worker
    # and took 20-30 s of make test's harness check to say what cold.py says.
    results["coldBursts"] = api_cold_bursts(kb, key, sample, (16, 32)) if not args.quick else []
    print("\ncold bursts (every API worker recycled first; new queries, embeddings computed):")
    print(f"{'clients':>7} {'errors':>7} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for row in results["coldBursts"]:
        print(f"{row['clients']:7d} {row['errors']:7d} {row['p50']:8.0f} {row['p95']:8.0f} {row['max']:8.0f}")

    from chalicelib.embeddings import get_provider
    from chalicelib.retrieval.policy import ef_search_for
    from chalicelib.storage import chunks

    probe_vectors = get_provider("local").embed_documents([q["text"] for q in sample[:20]])
    # --quick: the real corpus and one synthetic size, enough to run every step once
    sizes = [len(flat)] + ([1000] if args.quick else [int(s) for s in args.sizes.split(",") if s])
    print(f"\n{'chunks':>8} {'strategy':10} {'cache':6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}"
          f"   {'(service-side)':24} {'API p50 ms':>10}")
    scale = peers_scale.AtScale(kb)  # the peers and quality at each size (bench/peers_scale.py)
    for size in sorted(set(sizes)):
        row = results["latency"][str(size)] = {"indexBuildSeconds": grow_to(kb, flat, size, rng)}
        chunks._INDEX_ROWS.clear()  # the service reads the index's size every few minutes
        row["serviceEfSearch"] = ef_search_for(10, size)
        row["hnsw"] = hnsw_sweep(kb, probe_vectors)
        row["service"] = service_latency(principal, kb, sample, 1 if args.quick else args.runs)
        row["isolation"] = isolation_cost(principal, kb, sample)
        row["bm25"] = bm25_agreement(principal, kb, sample[:20])
        row["api"] = api_latency(kb, key, sample)
        print_size(size, row)
        # on the real corpus alone the strategies' quality is the one measured above (the same searches)
        row |= scale.measure(size, principal, kb, queries, qrels, doc_to_corpus, sample[:peers_scale.PEER_QUERIES],
                             row["serviceEfSearch"], peers=size > len(flat),
                             known=results["quality"] if size == len(flat) else None)
    scale.close()
    save_results("retrieval", args.quick, results)
    drop_database()
    return results


if __name__ == "__main__":
    main()
