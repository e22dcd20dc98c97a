"""The OpenAI provider through the real `openai` client against a local server
that speaks the same protocol."""
import openai
import pytest

from chalicelib.embeddings import provider as registry
from chalicelib.errors import Invalid, Transient
from chalicelib.embeddings.openai_provider import MAX_INPUTS_PER_REQUEST, OpenAIEmbeddings
from tests.integration.openai_server import OpenAIEmbeddingServer


@pytest.fixture
def server(monkeypatch):
    with OpenAIEmbeddingServer() as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setattr(registry, "_providers", {})
        yield srv


def test_batches_stay_within_the_input_limit(server):
    server.dim = 8  # small vectors: this test is about request sizes
    embedder = OpenAIEmbeddings()
    texts = [f"text number {i}" for i in range(MAX_INPUTS_PER_REQUEST + 52)]
    vectors = embedder.embed_documents(texts)
    assert len(vectors) == len(texts) and len(vectors[0]) == 8
    assert [len(r["input"]) for r in server.requests] == [MAX_INPUTS_PER_REQUEST, 52]
    assert server.requests[0]["model"] == "text-embedding-3-small"


def test_429_and_5xx_are_retried_with_backoff(server):
    delays = []
    embedder = OpenAIEmbeddings(sleep=delays.append, base_delay=0.5)
    server.failures = [429, 500, 503]
    vector = embedder.embed_query("hello world")
    assert len(vector) == 1536
    assert len(server.requests) == 4 and len(delays) == 3
    # full jitter: each delay lies in [0, base * 2^(attempt-1)]
    assert all(0 <= d <= 0.5 * 2 ** i for i, d in enumerate(delays))


def test_it_gives_up_after_max_attempts_and_does_not_retry_client_errors(server):
    embedder = OpenAIEmbeddings(sleep=lambda _: None, max_attempts=3)
    server.failures = [429, 429, 429, 429]
    with pytest.raises(Transient, match="RateLimitError"):
        embedder.embed_query("x")
    assert len(server.requests) == 3
    server.requests.clear()
    server.failures = [400]
    with pytest.raises(openai.BadRequestError):
        embedder.embed_query("x")
    assert len(server.requests) == 1


def test_knowledge_bases_of_different_dimensions_live_side_by_side(server, tenant):
    from chalicelib.knowledge_bases import create_knowledge_base
    from chalicelib.retrieval import SearchRequest
    from tests.integration.test_search import _ingest, search

    principal, _ = tenant
    local_kb = create_knowledge_base(principal, name="Local", description="")
    openai_kb = create_knowledge_base(principal, name="OpenAI", description="",
                                      provider="openai", model="text-embedding-3-small")
    assert local_kb["embedding_dim"] == 384
    assert (openai_kb["embedding_provider"], openai_kb["embedding_model"], openai_kb["embedding_dim"]) == (
        "openai", "text-embedding-3-small", 1536)
    _ingest(local_kb["id"], "a.txt", "Volcanoes erupt molten rock called lava.")
    _ingest(openai_kb["id"], "b.txt", "Glaciers carve valleys out of solid rock.")
    _ingest(openai_kb["id"], "c.txt", "Bakers knead dough before proofing it.")
    answer = search(principal, SearchRequest((openai_kb["id"],), "glaciers carve valleys", 2))
    assert answer["results"][0]["source"] == "b.txt"
    assert search(principal, SearchRequest((local_kb["id"],), "lava", 1))["results"][0]["source"] == "a.txt"


def test_unknown_models_and_unindexable_dimensions_are_refused(server, tenant):
    from chalicelib.knowledge_bases import create_knowledge_base

    principal, _ = tenant
    with pytest.raises(Invalid, match="embedding.model"):
        create_knowledge_base(principal, name="x", description="", provider="openai", model="nope")
    with pytest.raises(Invalid, match="embedding.model: dimension 3072"):
        create_knowledge_base(principal, name="x", description="", provider="openai",
                              model="text-embedding-3-large")
    with pytest.raises(Invalid, match="embedding.provider"):
        create_knowledge_base(principal, name="x", description="", provider="cohere")
    with pytest.raises(Invalid, match="chunking.chunkOverlap"):
        create_knowledge_base(principal, name="x", description="",
                              chunking={"strategy": "fixed", "chunkTokens": 100, "chunkOverlap": 80})


def test_openai_without_a_key_is_refused_up_front(monkeypatch, tenant):
    from chalicelib.knowledge_bases import create_knowledge_base

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(registry, "_providers", {})
    principal, _ = tenant
    with pytest.raises(Invalid, match="embedding.provider: openai is not configured"):
        create_knowledge_base(principal, name="x", description="", provider="openai")
