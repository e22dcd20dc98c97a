"""What users would pick instead, on the same data and the same embedding model:
Chroma (a local vector database) and BM25 (rank_bm25), run in this process.

    .venv/bin/python bench/peers.py [--quick]
"""
import argparse
import re
import time

from common import corpus, embed_corpus, percentile, quality, queries_and_qrels, save_results

TOKEN = re.compile(r"[a-z0-9]+")
STOPWORDS = set("a an and are as at be by for from has have in is it its of on or that the to was were "
                "which with this these those not no".split())


def tokenize(text: str) -> list[str]:
    return [t for t in TOKEN.findall(text.lower()) if t not in STOPWORDS]


def bm25_run(docs, queries) -> tuple[dict, list[float]]:
    from rank_bm25 import BM25Okapi

    index = BM25Okapi([tokenize(d["text"]) for d in docs])
    ids = [d["_id"] for d in docs]
    runs, times = {}, []
    for q in queries:
        started = time.perf_counter()
        scores = index.get_scores(tokenize(q["text"]))
        top = sorted(range(len(ids)), key=lambda i: scores[i], reverse=True)[:100]
        times.append((time.perf_counter() - started) * 1000)
        runs[q["_id"]] = [ids[i] for i in top]
    return runs, times


def chroma_run(docs, queries, doc_vectors, query_vectors) -> tuple[dict, list[float], float]:
    import chromadb

    client = chromadb.EphemeralClient(settings=chromadb.Settings(anonymized_telemetry=False))
    name = f"scifact-{time.time_ns()}"
    collection = client.create_collection(name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
    started = time.perf_counter()
    for start in range(0, len(docs), 500):
        batch = docs[start:start + 500]
        collection.add(ids=[d["_id"] for d in batch], documents=[d["text"] for d in batch],
                       embeddings=doc_vectors[start:start + 500])
    ingest_seconds = time.perf_counter() - started
    runs, times = {}, []
    for q, vector in zip(queries, query_vectors):
        started = time.perf_counter()
        found = collection.query(query_embeddings=[vector], n_results=min(100, len(docs)))
        times.append((time.perf_counter() - started) * 1000)
        runs[q["_id"]] = found["ids"][0]
    client.delete_collection(name)
    return runs, times, ingest_seconds


def main(quick: bool = False) -> dict:
    from chalicelib.embeddings import get_provider

    docs = corpus(200 if quick else None)
    queries, qrels = queries_and_qrels({d["_id"] for d in docs})
    # Chroma stores one vector per abstract, embedded whole (like our chunks, which are
    # whole abstracts for all but a few).
    doc_vectors = embed_corpus([d["text"] for d in docs])
    query_vectors = get_provider("local").embed_documents([q["text"] for q in queries])
    results = {}
    runs, times = bm25_run(docs, queries)
    results["BM25 (rank_bm25)"] = {**quality(runs, qrels), "p50": percentile(times, 50), "p95": percentile(times, 95)}
    runs, times, ingest = chroma_run(docs, queries, doc_vectors, query_vectors)
    results["Chroma (HNSW, same model)"] = {**quality(runs, qrels), "p50": percentile(times, 50),
                                            "p95": percentile(times, 95), "ingestSeconds": ingest}
    print(f"{'peer':28} {'nDCG@10':>8} {'R@10':>7} {'R@100':>7} {'MRR@10':>7} {'p50 ms':>7} {'p95 ms':>7}")
    for name, r in results.items():
        print(f"{name:28} {r['nDCG@10']:8.4f} {r['recall@10']:7.4f} {r['recall@100']:7.4f} {r['MRR@10']:7.4f} "
              f"{r['p50']:7.2f} {r['p95']:7.2f}")
    print(f"Chroma ingested {len(docs)} pre-computed vectors in {results['Chroma (HNSW, same model)']['ingestSeconds']:.2f}s")
    save_results("peers", quick, results)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    main(parser.parse_args().quick)
