"""Chunking strategies on SciFact: fixed against semantic at the same chunk size.

    .venv/bin/python bench/chunking.py [--quick] [--sizes 64,200,500]

In process, without the stack: the 2,101 abstracts are chunked by each strategy as the
Chunk step does (chalicelib/ingestion), the chunks embedded with the local model, and
the 188 train queries ranked by exact cosine (document-level: an abstract's best chunk
counts, as in retrieval.py). Both strategies get the same chunkTokens and no overlap, so
the cut points are the only difference. The abstracts are short (median about 300
tokens), so at the default 500 tokens most are one fixed chunk; 64 and 200 are where
both strategies have to cut. Every embedding (sentences, chunks, queries) is cached on
disk by content (.kb/bench-cache): the first full run took about 30 minutes on 2 cores
(beside other work), a run with the caches filled 46 s.
--quick: 60 abstracts and one size, to check the harness. Results go to
.kb/bench-results/chunking.json; docs/benchmarks.* come from a whole `make bench` (report.py).
"""
import argparse
import statistics
import time

from common import corpus, dedupe, embed_corpus, ndcg_at, quality, queries_and_qrels, save_results

STRATEGIES = ("fixed", "semantic")
_sentence_vectors: dict[str, list[float]] = {}  # across sizes: only sentences cut differently are new


def chunked(docs: list[dict], strategy: str, chunk_tokens: int) -> tuple[list[list], int]:
    """Each abstract's chunks, and how many sentences the semantic strategy embedded."""
    from chalicelib.ingestion.chunk import chunk_document
    from chalicelib.ingestion.extract import TEXT, Extracted, Section
    from chalicelib.ingestion.semantic_chunk import semantic_chunks

    extracted = [Extracted(TEXT, [Section(d["text"])]) for d in docs]
    if strategy == "fixed":
        return [chunk_document(e, chunk_tokens, 0, {}) for e in extracted], 0
    # Two passes so that the sentences are embedded in one cached batch: the first records
    # what the chunker asks for (answering with placeholder vectors), the second answers it.
    import numpy as np

    asked: list[str] = []

    def record(texts: list[str]) -> list[list[float]]:
        asked.extend(texts)
        return np.ones((len(texts), 1)).tolist()

    for e in extracted:
        semantic_chunks(e, chunk_tokens, 0, {}, record)
    missing = [t for t in asked if t not in _sentence_vectors]
    _sentence_vectors.update(zip(missing, embed_corpus(missing)))
    return [semantic_chunks(e, chunk_tokens, 0, {}, lambda texts: [_sentence_vectors[t] for t in texts])
            for e in extracted], len(asked)


def evaluate(docs: list[dict], queries: list[dict], qrels: dict, query_vectors, strategy: str,
             chunk_tokens: int) -> dict:
    import numpy as np

    started = time.monotonic()
    per_doc, sentences = chunked(docs, strategy, chunk_tokens)
    chunk_seconds = time.monotonic() - started
    flat = [(d["_id"], c) for d, chunks in zip(docs, per_doc) for c in chunks]
    vectors = np.asarray(embed_corpus([c.content for _, c in flat]), dtype="float32")
    owners = [doc_id for doc_id, _ in flat]
    runs = {}
    for q, qv in zip(queries, query_vectors):
        order = np.argsort(-(vectors @ qv))
        runs[q["_id"]] = dedupe([owners[i] for i in order[:1000]])[:100]
    scores = quality(runs, qrels)
    tokens = [c.token_count for _, c in flat]
    return {"strategy": strategy, "chunkTokens": chunk_tokens, "chunks": len(flat),
            "meanTokens": statistics.mean(tokens), "sentencesEmbedded": sentences,
            "chunkSeconds": chunk_seconds, **scores,
            "perQuery": [ndcg_at(runs[q["_id"]], qrels[q["_id"]], 10) for q in queries]}


def paired(semantic: list[float], fixed: list[float]) -> dict:
    """Semantic against fixed query by query: wins, ties, losses in nDCG@10 and a 95%
    bootstrap interval of the mean difference (10,000 resamples of the queries, seed 0)."""
    import numpy as np

    diff = np.asarray(semantic) - np.asarray(fixed)
    means = diff[np.random.default_rng(0).integers(0, len(diff), (10_000, len(diff)))].mean(axis=1)
    return {"wins": int((diff > 1e-9).sum()), "ties": int((abs(diff) <= 1e-9).sum()),
            "losses": int((diff < -1e-9).sum()), "meanDifference": float(diff.mean()),
            "interval": [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]}


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="60 abstracts, one size: checks the harness runs")
    parser.add_argument("--sizes", default="64,200,500", help="chunkTokens to compare at")
    args = parser.parse_args()
    docs = corpus(60 if args.quick else None)
    queries, qrels = queries_and_qrels({d["_id"] for d in docs})
    query_vectors = np.asarray(embed_corpus([q["text"] for q in queries]), dtype="float32")
    sizes = [64] if args.quick else [int(s) for s in args.sizes.split(",")]
    print(f"{len(docs)} abstracts, {len(queries)} queries; exact cosine, document-level, no overlap\n")
    print(f"{'chunkTokens':>11} {'strategy':9} {'chunks':>7} {'mean tok':>8} {'nDCG@10':>8} {'R@10':>7}"
          f" {'R@100':>7} {'MRR@10':>7}")
    rows = []
    for size in sizes:
        for strategy in STRATEGIES:
            row = evaluate(docs, queries, qrels, query_vectors, strategy, size)
            rows.append(row)
            print(f"{size:11d} {strategy:9} {row['chunks']:7d} {row['meanTokens']:8.1f} {row['nDCG@10']:8.4f}"
                  f" {row['recall@10']:7.4f} {row['recall@100']:7.4f} {row['MRR@10']:7.4f}", flush=True)
        row["paired"] = paired(rows[-1].pop("perQuery"), rows[-2].pop("perQuery"))
        p = row["paired"]
        print(f"{'':11} semantic - fixed, nDCG@10 query by query: {p['wins']} better, {p['ties']} equal, "
              f"{p['losses']} worse; mean {p['meanDifference']:+.4f} (95% {p['interval'][0]:+.4f} to "
              f"{p['interval'][1]:+.4f})", flush=True)
    results = {"abstracts": len(docs), "queries": len(queries), "rows": rows, "measured": time.strftime("%Y-%m-%d")}
    save_results("chunking", args.quick, results)


if __name__ == "__main__":
    main()
