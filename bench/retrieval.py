"""Retrieval benchmark: quality per strategy on SciFact, latency at growing sizes.

    .venv/bin/python bench/retrieval.py [--quick] [--sizes 10000,100000]

Needs the local stack (`make up`): it works in a database of its own (kb_bench)
on the stack's PostgreSQL and a Redis database of its own (14).

- quality: nDCG@10, recall@10, recall@100 and MRR@10 of semantic, keyword and
  hybrid search over the 2,101 SciFact abstracts with the 188 train queries
  (document-level: a document's best passage counts);
- latency: service-side p50/p95/p99 per strategy, cache miss and hit, at each
  size. Sizes above the real corpus are reached synthetically: extra chunks whose
  text is three sentences drawn from random abstracts and whose vector is a real
  abstract's vector plus Gaussian noise (sigma 0.05 per dimension, renormalised),
  so both the HNSW graph and the full-text index grow realistically;
- HNSW recall@10 against an exact scan at each size.
"""
import argparse
import random
import re
import statistics
import time

from common import (corpus, dedupe, embed_corpus, fresh_database, percentile, quality, queries_and_qrels,
                    save_results)

STRATEGIES = ("semantic", "keyword", "hybrid")


def setup(docs: list[dict]):
    from chalicelib.auth import issue_key
    from chalicelib.knowledge_bases import create_knowledge_base

    fresh_database()
    principal, _ = issue_key("bench", "bench")
    kb = create_knowledge_base(principal, name="SciFact", description="BEIR SciFact subset")
    flat, doc_to_corpus = load(kb, docs)
    return principal, kb, flat, doc_to_corpus


def load(kb: dict, docs: list[dict]) -> tuple[list[dict], dict]:
    """Chunk and embed the abstracts as the pipeline does and store them, one
    document each (the embeddings come from the on-disk cache after the first run)."""
    from chalicelib.ingestion.chunk import chunk_document
    from chalicelib.ingestion.extract import TEXT, Extracted, Section
    from chalicelib.storage import connection, queries

    chunked = [chunk_document(Extracted(TEXT, [Section(d["text"])]), kb["chunking"]["chunkTokens"],
                              kb["chunking"]["chunkOverlap"], {"corpusId": d["_id"]}) for d in docs]
    flat = [c for chunks in chunked for c in chunks]
    for chunk, vector in zip(flat, embed_corpus([c["content"] for c in flat])):
        chunk["embedding"] = vector
    doc_to_corpus = {}
    with connection() as conn:
        for doc, chunks in zip(docs, chunked):
            row = queries.upsert_pending_document(conn, kb_id=kb["id"], s3_key=f"kb/{kb['id']}/{doc['_id']}.txt",
                                                  filename=f"{doc['_id']}.txt", size_bytes=len(doc["text"]))
            queries.replace_document_chunks(conn, doc_id=row["id"], kb_id=kb["id"], dim=384, chunks=chunks,
                                            page_count=None)
            doc_to_corpus[row["id"]] = doc["_id"]
        conn.execute("ANALYZE chunks")
    return flat, doc_to_corpus


def run_queries(principal, kb, queries, doc_to_corpus, strategy: str, top_k: int = 100) -> dict[str, list[str]]:
    from chalicelib.retrieval import SearchRequest, search

    runs = {}
    for q in queries:
        answer = search(principal, SearchRequest(knowledge_base_ids=(kb["id"],), query=q["text"], top_k=top_k,
                                                 strategy=strategy, max_tokens=10**9))
        runs[q["_id"]] = dedupe([doc_to_corpus.get(r["documentId"], r["documentId"]) for r in answer["results"]])
    return runs


def grow_to(kb, flat: list[dict], target: int, rng: random.Random) -> None:
    """Add synthetic chunks until the knowledge base holds `target` of them."""
    import numpy as np

    from chalicelib.storage import connection, queries

    with connection() as conn:
        current = conn.execute("SELECT count(*) AS n FROM chunks WHERE kb_id = %s", (kb["id"],)).fetchone()["n"]
    sentences = [s for c in flat for s in re.split(r"(?<=[.!?])\s+", c["content"]) if len(s) > 20]
    base = np.asarray([c["embedding"] for c in flat], dtype="float32")
    missing, batch = target - current, 10_000
    while missing > 0:
        n = min(batch, missing)
        doc_id = f"doc_synth{rng.getrandbits(48):012x}"
        with connection() as conn, conn.transaction():
            conn.execute("INSERT INTO documents (id, kb_id, s3_key, filename, status) VALUES"
                         " (%s, %s, %s, 'synthetic.txt', 'PROCESSED')", (doc_id, kb["id"], f"synthetic/{doc_id}"))
            picks = base[[rng.randrange(len(base)) for _ in range(n)]]
            noisy = picks + np.random.default_rng(rng.getrandbits(32)).normal(0, 0.05, picks.shape).astype("float32")
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
            with conn.cursor() as cur, cur.copy(
                    "COPY chunks (document_id, kb_id, chunk_index, content, start_char, end_char, token_count,"
                    " embedding_dim, embedding) FROM STDIN") as copy:
                for i in range(n):
                    text = " ".join(rng.choice(sentences) for _ in range(3))
                    copy.write_row((doc_id, kb["id"], i, text, 0, len(text), len(text) // 4, 384,
                                    queries.vector_literal(noisy[i])))
        missing -= n
    with connection() as conn:
        conn.execute("ANALYZE chunks")


def latency(principal, kb, queries, strategy: str, cached: bool) -> list[float]:
    import redis

    from chalicelib.retrieval import SearchRequest, search
    from chalicelib.retrieval.cache import _redis

    client: redis.Redis = _redis()
    times = []
    for q in queries:
        request = SearchRequest(knowledge_base_ids=(kb["id"],), query=q["text"], top_k=10, strategy=strategy)
        if cached:
            search(principal, request)  # warm the cache for this query
        else:
            client.flushdb()
        started = time.perf_counter()
        search(principal, request)
        times.append((time.perf_counter() - started) * 1000)
    return times


def hnsw_recall(kb, vectors: list[list[float]], ef_search: int) -> float:
    """Share of the exact top 10 that the HNSW index returns, with the ef_search the
    service uses for topK 10 and with pgvector's default 40."""
    from chalicelib.storage import connection, queries

    overlaps = []
    with connection() as conn:
        for vector in vectors:
            q = queries.vector_literal(vector)
            order = "embedding::vector(384) <=> %(q)s::vector(384)"
            sql = ("SELECT id FROM chunks WHERE kb_id = %(kb)s AND embedding_dim = 384 ORDER BY {o} LIMIT 10")
            with conn.transaction():
                conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
                approx = {r["id"] for r in conn.execute(sql.format(o=order), {"q": q, "kb": kb["id"]})}
                exact = {r["id"] for r in conn.execute(sql.format(o=f"({order}) + 0"), {"q": q, "kb": kb["id"]})}
            overlaps.append(len(approx & exact) / max(1, len(exact)))
    return statistics.mean(overlaps)


def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small corpus and sizes: checks the harness runs")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=3, help="latency runs per size (medians and spread)")
    args = parser.parse_args()
    rng = random.Random(7)
    docs = corpus(200 if args.quick else None)
    queries, qrels = queries_and_qrels({d["_id"] for d in docs})
    principal, kb, flat, doc_to_corpus = setup(docs)
    print(f"corpus: {len(docs)} SciFact abstracts, {len(flat)} chunks; {len(queries)} train queries")

    results = {"corpus": len(docs), "chunks": len(flat), "queries": len(queries), "quality": {}, "latency": {}}
    print(f"\n{'strategy':10} {'nDCG@10':>8} {'R@10':>7} {'R@100':>7} {'MRR@10':>7}")
    for strategy in STRATEGIES:
        scores = quality(run_queries(principal, kb, queries, doc_to_corpus, strategy), qrels)
        results["quality"][strategy] = scores
        print(f"{strategy:10} {scores['nDCG@10']:8.4f} {scores['recall@10']:7.4f} "
              f"{scores['recall@100']:7.4f} {scores['MRR@10']:7.4f}")

    sizes = [1000, 3000] if args.quick else [int(s) for s in args.sizes.split(",")]
    sample = queries[: (10 if args.quick else 50)]
    from chalicelib.embeddings import get_provider

    probe_vectors = get_provider("local").embed_documents([q["text"] for q in sample[:20]])
    print(f"\n{'chunks':>8} {'strategy':10} {'cache':6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for size in sizes:
        grow_to(kb, flat, size, rng)
        from chalicelib.storage.queries import ef_search_for

        row = results["latency"].setdefault(str(size), {
            "hnswRecall@10": hnsw_recall(kb, probe_vectors, ef_search_for(10)),
            "hnswRecall@10 (ef_search 40)": hnsw_recall(kb, probe_vectors, 40)})
        for strategy in STRATEGIES:
            for cached in ((False,) if strategy == "keyword" else (False, True)):
                runs = [latency(principal, kb, sample, strategy, cached) for _ in range(1 if args.quick else args.runs)]
                label = "hit" if cached else "miss"
                stats = {p: [percentile(times, int(p[1:])) for times in runs] for p in ("p50", "p95", "p99")}
                row[f"{strategy}/{label}"] = {**{p: statistics.median(v) for p, v in stats.items()},
                                              "p50Spread": (min(stats["p50"]), max(stats["p50"]))}
                r = row[f"{strategy}/{label}"]
                print(f"{size:8d} {strategy:10} {label:6} {r['p50']:8.1f} {r['p95']:8.1f} {r['p99']:8.1f}"
                      f"   (p50 over {len(runs)} runs: {r['p50Spread'][0]:.1f}-{r['p50Spread'][1]:.1f})")
        miss, hit = row["semantic/miss"]["p50"], row["semantic/hit"]["p50"]
        print(f"{size:8d} HNSW recall@10 vs exact scan {row['hnswRecall@10']:.3f} "
              f"(pgvector's default ef_search 40: {row['hnswRecall@10 (ef_search 40)']:.3f}); "
              f"semantic cache hit p50 is x{miss / hit:.1f} faster than a miss")
    save_results("retrieval", args.quick, results)
    return results


if __name__ == "__main__":
    main()
