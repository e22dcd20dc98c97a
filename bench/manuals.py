"""Answers from real documentation: real manuals dropped into the bucket, questions in a user's words.

    .venv/bin/python bench/manuals.py [--slice] [--packages P ...] [--hybrid-weights W ...]

The manuals are documentation packages Debian ships (bench/manuals/questions.jsonl names them):
`apt-get download` fetches them into .kb/bench-cache/manuals/ once, `dpkg-deb -x` unpacks them,
and each becomes a knowledge base of its own with the service's defaults, its files put into the
bucket under kb/{kbId}/ and ingested by the local stack's pipeline (`make up` first), as a user's
folder would be. The questions were written before any search was run, each with the page that
answers it and a string of that page's answer; every third question is held out (`split`), and
both parts are reported.

Per strategy and split: how often the answer string is in the top 3 passages (the measure), how
often it is in the top 10 (what a reranker reordering the list, or a model placing it better,
could bring into the top 3), how often the answering page is among the top 3 passages'
documents, how often a navigation page (an index, a sitemap, a table of contents) is in the top
5, and the tokens the top 3 passages cost (their `tokens` summed; median over questions).

--slice: the few pages kept in tests/data/manuals/ (with their licence) and their questions,
the harness test's run (tests/e2e/test_bench_harness.py).
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, save_results  # noqa: E402
from ingestion import scratch_knowledge_base  # noqa: E402

QUESTIONS = Path(__file__).resolve().parent / "manuals" / "questions.jsonl"
SLICE = ROOT / "tests" / "data" / "manuals"
CACHE = ROOT / ".kb" / "bench-cache" / "manuals"
STRATEGIES = ("semantic", "keyword", "hybrid")
# Where each package keeps its documentation, and what of it a user would drop into a knowledge
# base: its pages and text files, not the images, archives or the PDF that repeats a manual.
PACKAGES = {
    "sqlite3-doc": ("usr/share/doc/sqlite3", re.compile(r"^(?!releaselog/).*\.html$")),
    "bash-doc": ("usr/share/doc/bash", re.compile(r"^(?!.*\.(pdf|gz|png|tar)$).+$")),
}
# Pages that only lead elsewhere: answering with one of these is answering with a table of contents.
NAVIGATION = re.compile(r"(^|/)(index|sitemap|doclist|docs|keyword_index|toc|INDEX)\.(html|txt)$"
                        r"|_crossref\.html$")


def fetch(package: str) -> Path:
    """The package unpacked under .kb/bench-cache/manuals/<package>/ (downloaded once)."""
    root = CACHE / package
    if not (root / PACKAGES[package][0]).is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", package], cwd=CACHE, check=True, capture_output=True)
        deb = sorted(CACHE.glob(f"{package}_*.deb"))[-1]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root / PACKAGES[package][0]


def files_of(folder: Path, wanted: re.Pattern) -> list[tuple[str, bytes]]:
    return [(str(p.relative_to(folder)), p.read_bytes()) for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink() and wanted.match(str(p.relative_to(folder)))]


def normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _call(method: str, url: str, **options) -> dict:
    """The API's JSON answer, asked again (up to 5 times) when a loaded machine makes it time out, 5xx
    or throttle."""
    import requests

    for attempt in range(5):
        try:
            answer = requests.request(method, url, timeout=120, **options)
            if answer.status_code < 500 and answer.status_code != 429:  # throttled: asked again
                return answer.json()
        except (requests.Timeout, requests.ConnectionError):
            pass
        time.sleep(5 * (attempt + 1))
    raise SystemExit(f"{method} {url} did not answer")


def ingest(api, headers, s3, bucket, kb, files: list[tuple[str, bytes]], timeout: float = 3600) -> dict:
    """Every file put into the knowledge base's prefix, then its documents' statuses once none is pending."""
    for rel, data in files:
        s3.put_object(Bucket=bucket, Key=f"kb/{kb['id']}/{rel}", Body=data)
    deadline, statuses = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        statuses, token = {}, None
        while True:
            page = _call("GET", f"{api}/knowledge-bases/{kb['id']}/documents", headers=headers,
                         params={"limit": 100, **({"nextToken": token} if token else {})})["data"]
            statuses.update({d["path"]: d["status"] for d in page["items"]})
            token = page.get("nextToken")
            if not token:
                break
        if len(statuses) >= len(files) and all(s in ("PROCESSED", "FAILED") for s in statuses.values()):
            break
        time.sleep(5)
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    return counts


def ask(api, headers, kb, question: dict, strategy: str, top_k: int, semantic_weight: float | None = None) -> dict:
    """One question's top passages, judged: answer string in the top 3 and in the top 10, page in
    the top 3, a navigation page in the top 5, the top 3's tokens. semantic_weight: hybrid at these
    weights (semantic, 1 - it for keyword), reported as the strategy "hybrid W"."""
    # A budget the top 10 fits whole in (the top 3 are the same under the default one).
    body = {"query": question["question"], "topK": top_k, "strategy": strategy, "minScore": 0, "maxTokens": 20_000}
    if semantic_weight is not None:
        body["hybridWeights"] = {"semantic": semantic_weight, "keyword": round(1 - semantic_weight, 6)}
        strategy = f"hybrid {semantic_weight:g}"
    answer = _call("POST", f"{api}/knowledge-bases/{kb['id']}/search", headers=headers, json=body)
    results = answer["data"]["results"]
    top3 = results[:3]
    paths = [r.get("path") or r.get("source") or "" for r in results]
    wanted = normalised(question["answer"])
    return {"id": question["id"], "split": question["split"], "strategy": strategy,
            "answerInTop3": any(wanted in normalised(r["content"]) for r in top3),
            "answerInTop10": any(wanted in normalised(r["content"]) for r in results[:10]),
            "pageInTop3": any(p == question["page"] or p.endswith("/" + question["page"]) for p in paths[:3]),
            "navigationInTop5": any(NAVIGATION.search(p) for p in paths[:5]),
            "top3Tokens": sum(int(r.get("tokens") or 0) for r in top3),
            "top3": [{"path": p, "excerpt": r["content"][:160]} for p, r in zip(paths[:3], top3)]}


def summary(rows: list[dict]) -> dict:
    """Per strategy and split (and both): counts and shares of the measures."""
    out = {}
    for strategy in dict.fromkeys(r["strategy"] for r in rows):
        for split in ("dev", "heldout", "all"):
            part = [r for r in rows if r["strategy"] == strategy and split in ("all", r["split"])]
            if not part:
                continue
            n = len(part)
            out[f"{strategy}/{split}"] = {
                "questions": n,
                "answerInTop3": sum(r["answerInTop3"] for r in part),
                "answerInTop10": sum(r["answerInTop10"] for r in part),
                "pageInTop3": sum(r["pageInTop3"] for r in part),
                "navigationInTop5": sum(r["navigationInTop5"] for r in part),
                "top3TokensMedian": statistics.median(r["top3Tokens"] for r in part)}
    return out


def report(results: dict) -> str:
    """The docs/benchmarks.md section (bench/report.py)."""
    lines = [f"Real manuals ({', '.join(f'{p}: {n} files' for p, n in results['files'].items())}), each a knowledge "
             "base with the service's defaults, ingested by the local stack's pipeline; "
             f"{results['questions']} questions in a user's words written before any search (every third held out). "
             "Answer: the answer string in the top 3 passages (in the top 10: what reordering could bring up); "
             "page: the answering page among the top 3 passages' documents; navigation: an index or contents page in the top 5; tokens: the top 3 passages' "
             "token counts summed, median over questions.", "",
             "| strategy | split | answer in top 3 | answer in top 10 | page in top 3 | navigation in top 5 "
             "| top-3 tokens (median) |",
             "|---|---|---|---|---|---|---|"]
    for key, row in results["summary"].items():
        strategy, split = key.split("/")
        n = row["questions"]
        lines.append(f"| {strategy} | {split} | {row['answerInTop3']}/{n} ({row['answerInTop3'] / n:.0%}) | "
                     f"{row['answerInTop10']}/{n} | {row['pageInTop3']}/{n} | {row['navigationInTop5']}/{n} | "
                     f"{row['top3TokensMedian']:.0f} |")
    return "\n".join(lines)


def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slice", action="store_true", help="the pages kept in tests/data/manuals/ only")
    parser.add_argument("--top-k", type=int, default=10, help="passages asked for (at least 10 for the top-10 figure)")
    parser.add_argument("--hybrid-weights", type=float, nargs="*", default=[],
                        help="also ask hybrid at these semantic weights (keyword: 1 - each), to choose fusion"
                             " weights on the dev questions")
    parser.add_argument("--packages", nargs="*", help="only these packages")
    parser.add_argument("--embedding", type=json.loads,
                        help='the knowledge bases\' embedding as the API takes it (JSON), e.g. '
                             '\'{"provider": "openai", "model": "text-embedding-3-small"}\' on a deployment that has it')
    parser.add_argument("--chunking", type=json.loads,
                        help='the knowledge bases\' chunking as the API takes it (JSON), e.g. '
                             '\'{"strategy": "hierarchical", "parentTokens": 500, "childTokens": 214}\';'
                             ' by default the service\'s')
    args = parser.parse_args()
    questions = [json.loads(line) for line in (SLICE / "questions.jsonl" if args.slice else QUESTIONS)
                 .read_text().splitlines() if line.strip()]
    packages = sorted({q["package"] for q in questions} & set(args.packages or PACKAGES))
    rows, files_count, statuses = [], {}, {}
    for package in packages:
        if args.slice:
            files = files_of(SLICE / package, re.compile(r".+\.html?$|.+\.txt$"))
        else:
            files = files_of(fetch(package), PACKAGES[package][1])
        files_count[package] = len(files)
        with scratch_knowledge_base(f"manual-{package}", args.chunking, args.embedding) as (api, headers, s3, bucket, kb):
            started = time.monotonic()
            statuses[package] = ingest(api, headers, s3, bucket, kb, files)
            print(f"{package}: {len(files)} files ingested in {time.monotonic() - started:.0f} s: {statuses[package]}",
                  flush=True)
            for question in (q for q in questions if q["package"] == package):
                for strategy in STRATEGIES:
                    rows.append(ask(api, headers, kb, question, strategy, args.top_k))
                for weight in args.hybrid_weights:
                    rows.append(ask(api, headers, kb, question, "hybrid", args.top_k, weight))
    results = {"files": files_count, "statuses": statuses, "chunking": args.chunking or "default", "embedding": args.embedding or "default", "questions": len({r["id"] for r in rows}), "rows": rows,
               "summary": summary(rows)}
    print(report(results))
    save_results("manuals", args.slice, results)
    return results


if __name__ == "__main__":
    sys.exit(main() and 0)
