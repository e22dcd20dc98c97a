"""Ingestion time of one many-batch document at the deployed stack's embedding width.

    KB_EMBED_WIDTH=1 make up && python bench/embed_width.py --batches 8 --runs 2
    KB_EMBED_WIDTH=2 make up && python bench/embed_width.py --batches 8 --runs 2

Each run uploads a fresh text file cut into `batches` embedding batches (64 chunks of 100
tokens each) and times it from the upload to PROCESSED; the document's own step durations
give the Embed Map's wall time. Results are appended to .kb/bench-results/embed_width.json,
which bench/capacity.py reads."""
import argparse
import json
import secrets
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / ".kb" / "bench-results" / "embed_width.json"
CHUNK_TOKENS = 100
EMBED_BATCH = 64


def _env() -> dict:
    from kbcli.config import read_env_file

    return read_env_file(ROOT / ".kb" / "local.env")


def _call(env: dict, method: str, path: str, body=None) -> dict:
    req = urllib.request.Request(env["KB_API_URL"] + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {env['KB_API_KEY']}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read())["data"]


def _text(chunks: int) -> str:
    # ~100-token paragraphs of distinct words, so the fixed chunker makes about one chunk each
    return "\n\n".join(" ".join(f"w{i}x{j} pump valve gauge" for j in range(20)) for i in range(chunks))


def run_once(env: dict, s3, kb_id: str, batches: int) -> dict:
    name = f"width-{secrets.token_hex(4)}.txt"
    started = time.monotonic()
    s3.put_object(Bucket=env["KB_BUCKET"], Key=f"kb/{kb_id}/{name}", Body=_text(batches * EMBED_BATCH).encode())
    while time.monotonic() - started < 900:
        docs = _call(env, "GET", f"/knowledge-bases/{kb_id}/documents?path={name}")["items"]
        if docs and docs[0]["status"] in ("PROCESSED", "FAILED"):
            doc = _call(env, "GET", f"/knowledge-bases/{kb_id}/documents/{docs[0]['id']}")
            return {"seconds": time.monotonic() - started, "status": doc["status"], "chunks": doc.get("chunks"),
                    "stepDurationsMs": doc.get("stepDurationsMs") or doc.get("processing", {}).get("stepDurationsMs")}
        time.sleep(0.5)
    raise SystemExit(f"{name} did not finish")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    import boto3

    env = _env()
    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                      aws_access_key_id="test", aws_secret_access_key="test")
    sfn = boto3.client("stepfunctions", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                       aws_access_key_id="test", aws_secret_access_key="test")
    machine = next(m["stateMachineArn"] for m in sfn.list_state_machines()["stateMachines"]
                   if m["name"] == f"{env['KB_STACK']}-ingestion")
    width = json.loads(sfn.describe_state_machine(stateMachineArn=machine)["definition"])["States"]["Embed"]["MaxConcurrency"]
    kb = _call(env, "POST", "/knowledge-bases", {"name": f"width {width} {secrets.token_hex(3)}",
                                                 "chunking": {"chunkTokens": CHUNK_TOKENS, "chunkOverlap": 0}})
    runs = [run_once(env, s3, kb["id"], args.batches) for _ in range(args.runs)]
    result = {"width": width, "batches": args.batches, "runs": runs}
    print(json.dumps(result, indent=1))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(OUT.read_text()) if OUT.exists() else []
    OUT.write_text(json.dumps([r for r in previous if r["width"] != width] + [result], indent=1))


if __name__ == "__main__":
    main()
