"""How hybrid search fuses its two lists, on SciFact: each fusion method and weight against the
single strategies, in the service (bench/retrieval.py's corpus and load).

    .venv/bin/python bench/fusion.py [--quick]

The train queries split in two by their id's parity, so a choice made on one half can be read on
the other; both halves and the whole are printed."""
import argparse

from common import corpus, drop_database, quality, queries_and_qrels, save_results
from retrieval import run_queries, setup

METHODS = [("score", 0.5), ("score", 0.6), ("score", 0.4), ("rank", 0.5), ("distribution", 0.5),
           ("distribution", 0.6), ("distribution", 0.4)]


def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--methods", nargs="*", help="only these fusion methods (score, rank, distribution)")
    args = parser.parse_args()
    docs = corpus(200 if args.quick else None)
    queries, qrels = queries_and_qrels({d["_id"] for d in docs})
    principal, _, kb, flat, doc_to_corpus = setup(docs)
    halves = {"even": [q for q in queries if int(q["_id"]) % 2 == 0],
              "odd": [q for q in queries if int(q["_id"]) % 2 == 1], "all": queries}
    rows = []
    runs = {s: run_queries(principal, kb, queries, doc_to_corpus, s) for s in ("semantic", "keyword")}
    for method, weight in [(None, None), *(m for m in METHODS if not args.methods or m[0] in args.methods)]:
        run = (runs if method is None else
               {"hybrid": run_queries(principal, kb, queries, doc_to_corpus, "hybrid", hybrid_weights=(weight, 1 - weight),
                                      fusion=method)})
        for name, ranked in run.items():
            row = {"strategy": name, "method": method, "semanticWeight": weight}
            for half, qs in halves.items():
                row[half] = quality({q["_id"]: ranked[q["_id"]] for q in qs}, qrels)["nDCG@10"]
            rows.append(row)
            print(f"{name:8} {method or '':12} {weight or '':>4} " + " ".join(f"{h} {row[h]:.4f}" for h in halves),
                  flush=True)
    results = {"corpus": len(docs), "chunks": len(flat), "rows": rows}
    save_results("fusion", args.quick, results)
    drop_database()
    return results


if __name__ == "__main__":
    main()
