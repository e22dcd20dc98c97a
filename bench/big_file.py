"""One real text file of 50 MB through the pipeline's Extract and Chunk steps, as the deployed
functions run them (chalicelib/ingestion/steps.py, in this process), against the local stack's S3
and a database of its own: each step's wall and CPU seconds and the process's peak memory, beside
the function's memory and timeout (.chalice/config.json) and bench/capacity.py's prediction for
the same size.

    .venv/bin/python bench/big_file.py [--megabytes 50] [--quick]

The text is what Debian installs under /usr/share/doc (change logs, copyright files, READMEs),
decompressed and joined in name order until it reaches the size: real prose, lists and code, not
one paragraph repeated. Each step runs in a child process of its own, so the peak memory read
is that step's. Embed and Store are measured per chunk by capacity.py: their figures here are
that model's, for this file's chunk count."""
import argparse
import gzip
import multiprocessing
import os
import resource
import sys
import time
from pathlib import Path

from common import local_env, save_results, scratch_database

DOCS = Path("/usr/share/doc")


def real_text(megabytes: float) -> bytes:
    """The size in bytes of Debian's installed documentation, decoded as UTF-8 where it is and
    skipped where it is not, one file after another with a blank line between them."""
    wanted, parts, size = int(megabytes * 2**20), [], 0
    for path in sorted(p for p in DOCS.rglob("*") if p.is_file() and not p.is_symlink()):
        raw = path.read_bytes()
        if path.suffix == ".gz":
            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError):
                continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if "\x00" in text:
            continue
        piece = f"{path.relative_to(DOCS)}\n\n{text}\n\n".encode()
        parts.append(piece)
        size += len(piece)
        if size >= wanted:
            break
    if size < wanted:
        raise SystemExit(f"{DOCS} holds {size / 2**20:.1f} MB of text, less than the {megabytes} MB asked for")
    return b"".join(parts)[:wanted].rsplit(b"\n", 1)[0] + b"\n"


def _in_child(step: str, event: dict, out) -> None:
    """Runs one step and sends back (answer, wall s, CPU s, peak MiB)."""
    from chalicelib import aws
    from chalicelib.ingestion import steps

    aws.client.cache_clear()
    started, cpu = time.perf_counter(), time.process_time()
    answer = getattr(steps, f"{step}_step")(event)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    out.send((answer, wall, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def run_step(step: str, event: dict) -> tuple[dict, float, float, float]:
    receive, send = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_in_child, args=(step, event, send))
    child.start()
    answer = receive.recv()
    child.join()
    return answer


def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--quick", action="store_true", help="1 MB (checks the harness)")
    args = parser.parse_args()
    if args.quick:
        args.megabytes = 1
    text = real_text(args.megabytes)
    env = local_env()
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        os.environ[name] = env[name]
    from chalicelib import aws
    from chalicelib.auth import issue_key
    from chalicelib.ingestion import objects, steps
    from chalicelib.ingestion.model import RunState
    from chalicelib.knowledge_bases import create_knowledge_base
    from chalicelib.storage import connection, document_status

    import capacity

    bucket, rows = env["KB_BUCKET"], []
    with scratch_database("kb_bigfile"):
        principal, _ = issue_key("org-big-file", "bench")
        kb = create_knowledge_base(principal, name="A big file", description="")
        key = f"bench/{kb['id']}/documentation.txt"  # outside kb/: the bucket's trigger does not start a run
        aws.client.cache_clear()
        objects.client("s3").put_object(Bucket=bucket, Key=key, Body=text)
        with connection() as conn:
            doc = document_status.upsert_pending(conn, kb_id=kb["id"], s3_key=key, filename="documentation.txt",
                                                 size_bytes=len(text), run_id="run-big")
        state = RunState(document_id=doc["id"], kb_id=kb["id"], bucket=bucket, key=key, run_id="run-big")
        event = state.to_json()
        try:
            for step in ("extract", "chunk"):
                event, wall, cpu, peak = run_step(step, event)
                rows.append({"step": step, "wallSeconds": round(wall, 1), "cpuSeconds": round(cpu, 1),
                             "peakMiB": round(peak)})
                print(f"{step:8} {wall:7.1f} s wall, {cpu:7.1f} s CPU, peak {peak:,.0f} MiB -> {event['outcome']}",
                      flush=True)
                if event["outcome"] == "FAILED":
                    break
        finally:
            objects.client("s3").delete_object(Bucket=bucket, Key=key)
            steps._clean_work(RunState.from_json(event))
    costs, _ = capacity.load_saved(args.quick)
    predicted = modelled = None
    if costs:  # the model's per-MB and per-token CPU costs, measured on 1 MB of synthetic prose
        predicted = capacity.document_seconds(costs, capacity.aws_pipeline(), megabytes=args.megabytes)
        modelled = {"extract": args.megabytes * costs.extract_s_per_mb,
                    "chunk": predicted["chunks"] * costs.chunk_tokens / 1000 * costs.chunk_s_per_1k_tokens}
    functions = capacity.function_settings()
    results = {"megabytes": args.megabytes, "bytes": len(text), "source": str(DOCS), "steps": rows,
               "outcome": event["outcome"], "failure": event.get("failure"), "chunks": event.get("chunkCount"),
               "batches": event.get("batchCount"),
               "functions": {step: functions[f"pipeline_{step}"] for step in ("extract", "chunk")},
               "modelledCpuSeconds": modelled, "predicted": predicted}
    print(report(results))
    save_results("big-file", args.quick, results)
    return results


def report(results: dict) -> str:
    functions = results["functions"]
    lines = [f"A real text file of {results['megabytes']:.0f} MB ({results['bytes']:,} bytes of {results['source']}):"
             f" {results['outcome']}" + (f", {results['chunks']:,} chunks in {results['batches']:,} batches"
                                          if results.get("chunks") else "")
             + (f" ({results['failure']['code']}: {results['failure']['message']})" if results.get("failure") else ""),
             "", "| step | wall s | CPU s | the model's CPU s | peak MiB | function memory MiB | timeout s |",
             "|---|---|---|---|---|---|---|"]
    modelled = results.get("modelledCpuSeconds") or {}
    for row in results["steps"]:
        settings = functions[row["step"]]
        model = f"{modelled[row['step']]:.1f}" if row["step"] in modelled else "-"
        lines.append(f"| {row['step']} | {row['wallSeconds']:.1f} | {row['cpuSeconds']:.1f} | {model} |"
                     f" {row['peakMiB']:,} | {settings['lambda_memory_size']:,} | {settings['lambda_timeout']} |")
    predicted = results.get("predicted")
    if predicted:
        lines += ["", "bench/capacity.py's model for this size on AWS at the template's width: "
                      + ", ".join(f"{k} {v:,.0f} s" for k, v in predicted.items()
                                  if k in ("extract", "chunk", "embed", "store", "total") and isinstance(v, (int, float)))]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main() and 0)
