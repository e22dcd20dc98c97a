"""The Bedrock (Titan Text Embeddings v2) provider through the real boto3 client:
against ministack's bedrock-runtime, and against a local server that speaks
InvokeModel (ministack's answer has no embedding in it, see the first test)."""
import math
import socket
import threading
import time

import pytest
from botocore.exceptions import ClientError

from chalicelib.embeddings import provider as registry
from chalicelib.errors import BadUpstream, Invalid, Transient
from chalicelib.embeddings.bedrock_provider import MAX_CHARS, MAX_CONCURRENCY, TITAN_V2, BedrockEmbeddings
from tests.integration.bedrock_server import TitanEmbeddingServer
from tests.integration.openai_server import fake_embedding


@pytest.fixture
def aws_env(monkeypatch, local_env):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"):
        monkeypatch.setenv(name, local_env[name])
    monkeypatch.delenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", raising=False)
    monkeypatch.setattr(registry, "_providers", {})


@pytest.fixture
def server(monkeypatch, aws_env):
    with TitanEmbeddingServer() as srv:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", srv.endpoint_url)
        yield srv


def _norm(vector):
    return math.sqrt(sum(x * x for x in vector))


def test_ministack_answers_titan_without_an_embedding_and_the_provider_says_so(aws_env):
    """ministack 1.5 routes amazon.titan-* InvokeModel to a text-generation mock
    ({"results": [{"outputText": ...}]}). If this fails, it has learnt Titan
    embeddings: test the provider against it instead of the local server."""
    with pytest.raises(BadUpstream, match="without a 1024-dimension embedding"):
        BedrockEmbeddings().embed_query("hello world")


def test_vectors_have_the_dimension_are_normalised_and_deterministic(server):
    embedder = BedrockEmbeddings()
    first, again = embedder.embed_query("glaciers carve valleys"), embedder.embed_query("glaciers carve valleys")
    assert len(first) == embedder.dimension == 1024
    assert abs(_norm(first) - 1.0) < 1e-6
    assert first == again
    assert server.model_ids() == [TITAN_V2, TITAN_V2]
    assert server.requests[0] == {"inputText": "glaciers carve valleys", "dimensions": 1024, "normalize": True}


@pytest.mark.parametrize("model, dimension", [(f"{TITAN_V2}/512", 512), (f"{TITAN_V2}/256", 256)])
def test_smaller_variants_ask_titan_for_fewer_dimensions(server, model, dimension):
    embedder = registry.get_provider("bedrock", model)
    assert (embedder.name, embedder.model, embedder.dimension) == ("bedrock", model, dimension)
    assert len(embedder.embed_query("x y z")) == dimension
    assert server.model_ids() == [TITAN_V2] and server.requests[0]["dimensions"] == dimension


def test_a_batch_keeps_its_order_one_call_per_text(server):
    texts = [f"passage number {i} about topic {i % 7}" for i in range(40)]
    vectors = BedrockEmbeddings().embed_documents(texts)
    assert len(server.requests) == len(texts)
    assert sorted(r["inputText"] for r in server.requests) == sorted(texts)
    assert vectors == [fake_embedding(t, 1024) for t in texts]


class SlowServer(TitanEmbeddingServer):
    def __init__(self):
        super().__init__()
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()

    def reply(self, body):
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(0.05)
        with self.lock:
            self.in_flight -= 1
        return super().reply(body)


def test_calls_run_concurrently_within_the_bound(monkeypatch, aws_env):
    with SlowServer() as srv:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", srv.endpoint_url)
        BedrockEmbeddings().embed_documents([f"text {i}" for i in range(16)])
    assert 1 < srv.most_in_flight <= MAX_CONCURRENCY


def test_throttles_timeouts_and_5xx_are_retried_with_backoff(server):
    delays = []
    embedder = BedrockEmbeddings(sleep=delays.append, base_delay=0.5)
    server.failures = ["ThrottlingException", "ModelTimeoutException", "ServiceUnavailableException",
                       "InternalServerException"]
    assert len(embedder.embed_query("hello world")) == 1024
    assert len(server.requests) == 5 and len(delays) == 4
    # full jitter: each delay lies in [0, base * 2^(attempt-1)]
    assert all(0 <= d <= 0.5 * 2 ** i for i, d in enumerate(delays))


def test_it_gives_up_after_max_attempts_and_does_not_retry_client_errors(server):
    embedder = BedrockEmbeddings(sleep=lambda _: None, max_attempts=3)
    server.failures = ["ThrottlingException"] * 4
    with pytest.raises(Transient, match="ThrottlingException"):
        embedder.embed_query("x")
    assert len(server.requests) == 3
    for code in ("ValidationException", "AccessDeniedException"):
        server.requests.clear()
        server.failures = [code]
        with pytest.raises(ClientError, match=code):
            embedder.embed_query("x")
        assert len(server.requests) == 1


def test_an_unreachable_endpoint_is_retried_then_raised(monkeypatch, aws_env):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", f"http://127.0.0.1:{port}")
    delays = []
    with pytest.raises(Transient, match="EndpointConnectionError"):
        BedrockEmbeddings(sleep=delays.append, max_attempts=3).embed_query("x")
    assert len(delays) == 2


def test_texts_over_titans_limit_are_refused_before_any_call(server):
    with pytest.raises(Invalid, match=f"text 1 has {MAX_CHARS + 1} characters"):
        BedrockEmbeddings().embed_documents(["fine", "x" * (MAX_CHARS + 1)])
    assert server.requests == []


def test_without_a_region_it_is_refused_up_front(monkeypatch, aws_env, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(Invalid, match="embedding.provider: bedrock is not configured"):
        registry.get_provider("bedrock")


def test_a_bedrock_knowledge_base_ingests_and_searches(server, tenant):
    from chalicelib.knowledge_bases import create_knowledge_base
    from chalicelib.retrieval import SearchRequest
    from chalicelib.storage import connection
    from tests.integration.test_search import _ingest, search

    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Titan", description="", provider="bedrock")
    assert (kb["embedding_provider"], kb["embedding_model"], kb["embedding_dim"]) == ("bedrock", TITAN_V2, 1024)
    small = create_knowledge_base(principal, name="Titan 256", description="", provider="bedrock",
                                  model=f"{TITAN_V2}/256")
    assert small["embedding_dim"] == 256
    for target in (kb, small):
        _ingest(target["id"], "b.txt", "Glaciers carve valleys out of solid rock.")
        _ingest(target["id"], "c.txt", "Bakers knead dough before proofing it.")
        answer = search(principal, SearchRequest((target["id"],), "glaciers carve valleys", 2, strategy="semantic"))
        assert answer["results"][0]["source"] == "b.txt"
    with connection() as conn:
        indexes = {r["indexname"] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'chunks'")}
    assert {"chunks_embedding_1024_hnsw", "chunks_embedding_512_hnsw", "chunks_embedding_256_hnsw"} <= indexes
