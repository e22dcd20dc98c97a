"""What a cold worker loads: importing app.py (every function's handler module) loads
neither the embedding model's runtime nor the SDKs of other paths, and a search whose
query embedding is cached answers without loading onnxruntime. Each in a fresh
interpreter, as a new execution environment is."""
import json
import subprocess
import sys
from pathlib import Path

from chalicelib.auth import issue_key
from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.retrieval.cache import cache_key

ROOT = Path(__file__).resolve().parents[2]
LAZY = ("onnxruntime", "boto3", "openai", "mcp")


def _fresh(code: str, env: dict | None = None) -> dict:
    import os

    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_handlers_loads_no_model_runtime_or_unused_sdk():
    loaded = _fresh(f"import json, sys, app; print(json.dumps([m for m in {LAZY!r} if m in sys.modules]))")
    assert loaded == []


def test_a_search_with_a_cached_embedding_does_not_load_onnxruntime(service_env):
    import redis

    principal, key = issue_key("org-cold", "alice")
    kb = create_knowledge_base(principal, name="Cold", description="")
    query = "what does a cold worker load"
    redis.Redis.from_url(service_env["REDIS_URL"]).set(
        cache_key(kb["embedding_provider"], kb["embedding_model"], query), json.dumps([0.05] * 384))
    answer = _fresh(
        "import json, sys\nfrom chalicelib.api import events as app\n"
        f"answer = app.kb_search({{'apiKey': {key!r}, 'knowledgeBaseId': {kb['id']!r}, 'query': {query!r}}}, None)\n"
        "print(json.dumps({'success': answer['success'], 'loaded': [m for m in "
        f"{LAZY!r} if m in sys.modules]}}))", service_env)
    assert answer == {"success": True, "loaded": []}
