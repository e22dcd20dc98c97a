"""Search against real pgvector with real embeddings: ranking, tenant scope, the cache."""
import os
import secrets

import pytest

from chalicelib.api.views import search_view
from chalicelib.documents.listing import DocumentQuery
from chalicelib.embeddings import get_provider
from chalicelib.errors import NotFound
from chalicelib.ingestion.chunk import chunk_document
from chalicelib.ingestion.extract import extract
from chalicelib.ingestion.model import Chunk
from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.retrieval import SearchRequest
from chalicelib.retrieval import search as run_search
from chalicelib.storage import chunks as chunk_rows
from chalicelib.storage import connection, document_status, documents, knowledge_bases
from chalicelib.storage.chunks import as_vector
from chalicelib.storage.db import open_connection
from tests.integration.conftest import org_name

PASSAGES = {
    "cooking.txt": "To bake sourdough bread, feed the starter the night before and bake at 230 degrees.",
    "space.txt": "The James Webb telescope observes infrared light from the earliest galaxies.",
    "finance.txt": "Quarterly revenue grew by twelve percent thanks to subscriptions in Europe.",
}


def search(principal, request: SearchRequest) -> dict:
    """The search as the API answers it (its public JSON)."""
    return search_view(run_search(principal, request))


def _embedded_chunks(kb: dict, filename: str, text: str, chunk_tokens: int = 500) -> list[Chunk]:
    """The pipeline's work in-process: extract, chunk, embed with the knowledge base's own model."""
    chunks = chunk_document(extract(text.encode(), filename), chunk_tokens, 0, {})
    vectors = get_provider(kb["embedding_provider"], kb["embedding_model"]).embed_documents(
        [c.content for c in chunks])
    for chunk, vector in zip(chunks, vectors):
        chunk.embedding = vector
    return chunks


def _ingest(kb_id: str, filename: str, text: str, chunk_tokens: int = 500) -> str:
    """Extract, chunk and embed as the pipeline does, then store."""
    with connection() as conn:
        kb = knowledge_bases.get_for_pipeline(conn, kb_id)
    chunks = _embedded_chunks(kb, filename, text, chunk_tokens)
    with connection() as conn:
        doc = document_status.upsert_pending(conn, kb_id=kb_id, s3_key=f"kb/{kb_id}/{filename}",
                                             filename=filename, size_bytes=len(text))
        chunk_rows.replace_document_chunks(conn, doc_id=doc["id"], kb_id=kb_id, dim=kb["embedding_dim"],
                                           chunks=chunks, page_count=None)
    return doc["id"]


@pytest.fixture
def filled_kb(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Mixed", description="")
    for name, text in PASSAGES.items():
        _ingest(kb["id"], name, text)
    return principal, kb


def test_the_relevant_passage_ranks_first(filled_kb):
    principal, kb = filled_kb
    answer = search(principal, SearchRequest((kb["id"],), "how do I make bread?", 3))
    assert [r["source"] for r in answer["results"]][0] == "cooking.txt"
    assert answer["resultCount"] == 3
    sims = [r["similarity"] for r in answer["results"]]
    assert sims == sorted(sims, reverse=True) and 0 < sims[0] <= 1
    answer = search(principal, SearchRequest((kb["id"],), "infrared astronomy", 1))
    assert answer["results"][0]["source"] == "space.txt"
    assert answer["results"][0]["chunkIndex"] == 0


def test_another_organisation_sees_nothing(filled_kb):
    from chalicelib.auth import issue_key

    _, kb = filled_kb
    stranger, _ = issue_key(f"org-{secrets.token_hex(4)}", "mallory")
    with pytest.raises(NotFound):
        search(stranger, SearchRequest((kb["id"],), "bread", 3))
    with connection() as conn:
        assert knowledge_bases.get_visible(conn, stranger, kb["id"]) is None
        # Even the raw search query, given the id, returns nothing for the stranger.
        assert chunk_rows.semantic_search(conn, stranger, kb_ids=[kb["id"]], dim=384,
                                          query_vector=[0.05] * 384, top_k=3, ef_search=200) == []


def test_a_colleague_sees_an_org_knowledge_base_but_not_a_private_one(tenant):
    from chalicelib.auth import issue_key
    from chalicelib.storage import connection

    owner, _ = tenant
    colleague, _ = issue_key(org_name(owner), "bob")
    shared = create_knowledge_base(owner, name="Shared", description="", visibility="org")
    private = create_knowledge_base(owner, name="Mine", description="")
    _ingest(shared["id"], "a.txt", PASSAGES["space.txt"])
    assert search(colleague, SearchRequest((shared["id"],), "telescope", 1))["resultCount"] == 1
    with pytest.raises(NotFound):
        search(colleague, SearchRequest((private["id"],), "telescope", 1))


def test_filtered_search_fills_top_k_when_the_kb_is_a_tiny_fraction(tenant):
    principal, _ = tenant
    big = create_knowledge_base(principal, name="Big", description="")
    small = create_knowledge_base(principal, name="Small", description="")
    sentences = [f"Note {i}: the warehouse in city {i} stores item {i * 7}." for i in range(400)]
    _ingest(big["id"], "big.txt", "\n\n".join(sentences), chunk_tokens=20)
    for i in range(3):
        _ingest(small["id"], f"s{i}.txt", f"Small fact {i} about gardening tomatoes.")
    with connection() as conn:
        total = conn.execute("SELECT count(*) AS n FROM chunks").fetchone()["n"]
    assert 3 / total < 0.01
    # On a table this small the planner reads the knowledge base's rows through
    # chunks_kb_idx. Take that path away (inside a transaction that is rolled
    # back) so the HNSW index serves the query, as it does on a large table,
    # where filtering after the index scan loses rows.
    with connection() as conn, conn.transaction(force_rollback=True):
        conn.execute("DROP INDEX chunks_kb_idx")
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = conn.execute(
            "EXPLAIN SELECT id FROM chunks WHERE embedding_dim = 384 AND kb_id = %s"
            " ORDER BY embedding::vector(384) <=> %b::vector(384) LIMIT 5",
            (small["id"], as_vector([0.1] * 384))).fetchall()
        assert "chunks_embedding_384_hnsw" in str(plan)
        answer = search(principal, SearchRequest((small["id"],), "warehouse in city 5", 5, strategy="semantic"))
    assert answer["resultCount"] == 3
    assert {r["source"] for r in answer["results"]} == {"s0.txt", "s1.txt", "s2.txt"}


def test_the_query_embedding_cache_hits_on_a_repeated_query(filled_kb):
    principal, kb = filled_kb
    first = search(principal, SearchRequest((kb["id"],), "Revenue  growth", 2))
    second = search(principal, SearchRequest((kb["id"],), "revenue growth", 2))
    assert first["metadata"]["cached"] is False
    assert second["metadata"]["cached"] is True
    assert [r["source"] for r in first["results"]] == [r["source"] for r in second["results"]]


def test_every_search_emits_its_latency_and_cache_metrics_as_emf(filled_kb, capsys):
    import json

    principal, kb = filled_kb
    capsys.readouterr()
    search(principal, SearchRequest((kb["id"],), "telescope", 1, strategy="keyword"))
    search(principal, SearchRequest((kb["id"],), "telescope", 1, strategy="semantic"))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    emitted = [(line["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"], line.get("strategy", line.get("provider")))
               for line in lines]
    assert emitted[0] == ("SearchLatency", "keyword")
    assert emitted[1][0].startswith("QueryEmbeddingCache") and emitted[1][1] == "local"
    assert emitted[2] == ("SearchLatency", "semantic")
    assert all(line["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "KnowledgeBaseService" for line in lines)
    assert all(ms >= 0 for ms in lines[0]["SearchLatency"])
    # Seed 004's query duration and seed 003's retrieval event ride on the same line.
    assert [m["Name"] for m in lines[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"]] == [
        "SearchLatency", "knowledge_query_duration_seconds", "SearchResultCount", "SearchResultsCached"]
    # Keyword search knows no cosine unless minScore asks for one; semantic search does.
    assert "SearchAverageSimilarity" not in lines[0] and 0 < lines[2]["SearchAverageSimilarity"][0] <= 1
    assert lines[0]["knowledge_query_duration_seconds"] == [ms / 1000 for ms in lines[0]["SearchLatency"]]
    assert lines[0]["event"] == "knowledge:searched" and lines[0]["resultCount"] == 1
    assert "telescope" not in json.dumps(lines[0]) and len(lines[0]["queryHash"]) == 16


def test_search_answers_without_redis(filled_kb, monkeypatch, caplog):
    principal, kb = filled_kb
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    answer = search(principal, SearchRequest((kb["id"],), "bread", 1))
    assert answer["results"][0]["source"] == "cooking.txt"
    assert answer["metadata"]["cached"] is False
    assert "query cache unavailable" in caplog.text


def test_results_cache_degrades_to_none_when_redis_is_down_or_goes_away(filled_kb, monkeypatch, caplog):
    from chalicelib import freshness

    principal, kb = filled_kb
    request = SearchRequest((kb["id"],), "bread at home", 1)
    assert [search(principal, request)["metadata"]["resultsCached"] for _ in range(2)] == [False, True]
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens there
    freshness.bump(kb["id"])  # a write while Redis is away is logged, not raised
    answers = [search(principal, request) for _ in range(2)]
    assert [a["metadata"]["resultsCached"] for a in answers] == [False, False]
    assert answers[0]["results"][0]["source"] == "cooking.txt"
    assert "results cache unavailable" in caplog.text and "could not mark" in caplog.text


def test_no_cached_answer_outlives_a_delete_made_while_redis_was_away(filled_kb, monkeypatch):
    """The delete's bump (an entry's: no S3 here) cannot reach Redis: it is noted in PostgreSQL, and once the gate has
    lapsed (limits.RESULTS_CACHE_GATE_SECONDS, 1 s here) the next search marks it in Redis
    before any cached answer is served: the deleted passage is not answered again."""
    from chalicelib import freshness, limits
    from chalicelib.documents.service import delete_document
    from chalicelib.kv import redis_client

    principal, kb = filled_kb
    monkeypatch.setattr(limits, "RESULTS_CACHE_GATE_SECONDS", 1)
    redis_client().delete(freshness.GATE)  # as when it lapsed: the next search opens it for 1 s
    from chalicelib.documents import entries

    doc_id = entries.create_entry(principal, kb["id"], title="Sourdough", metadata={},
                                  content="Sourdough bread rises overnight in a cool kitchen.").id
    request = SearchRequest((kb["id"],), "how does sourdough bread rise?", 3)
    answers = [search(principal, request) for _ in range(2)]
    assert [a["metadata"]["resultsCached"] for a in answers] == [False, True]
    assert answers[1]["results"][0]["documentId"] == doc_id
    redis_url = os.environ["REDIS_URL"]
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # Redis away for the delete
    delete_document(principal, kb["id"], doc_id)
    with connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM kb_unmarked_changes WHERE kb_id = %s",
                            (kb["id"],)).fetchone()["n"] == 1
    monkeypatch.setenv("REDIS_URL", redis_url)  # back, with the answer cached before the delete
    import time
    time.sleep(1.2)
    after = search(principal, request)
    assert after["metadata"]["resultsCached"] is False
    assert doc_id not in [r["documentId"] for r in after["results"]]
    assert search(principal, request)["metadata"]["resultsCached"] is True  # cached again, as it is now
    with connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM kb_unmarked_changes WHERE kb_id = %s",
                            (kb["id"],)).fetchone()["n"] == 0


def test_a_cached_answer_is_read_in_one_round_trip_and_only_while_its_counters_are_current(filled_kb, monkeypatch):
    import redis

    from chalicelib import freshness

    principal, kb = filled_kb
    request = SearchRequest((kb["id"],), "bread in the oven", 1)
    assert search(principal, request)["metadata"]["resultsCached"] is False
    round_trips, execute = [], redis.client.Pipeline.execute
    monkeypatch.setattr(redis.client.Pipeline, "execute", lambda pipe, *a, **k: round_trips.append(1) or
                        execute(pipe, *a, **k))
    commands, command = [], redis.Redis.execute_command
    monkeypatch.setattr(redis.Redis, "execute_command", lambda client, *a, **k: commands.append(a[0]) or
                        command(client, *a, **k))
    assert search(principal, request)["metadata"]["resultsCached"] is True
    assert (len(round_trips), commands) == (1, [])  # the counters and the answer in one pipeline
    freshness.bump(kb["id"])  # a write: the answer kept under the old counter answers no more
    assert [search(principal, request)["metadata"]["resultsCached"] for _ in range(2)] == [False, True]


def test_replacing_chunks_swaps_versions_atomically(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Versions", description="")
    _ingest(kb["id"], "v.txt", "The old version mentions zebras.")
    _ingest(kb["id"], "v.txt", "The new version mentions giraffes. It has two sentences.")
    with connection() as conn:
        rows = conn.execute("SELECT content FROM chunks WHERE kb_id = %s", (kb["id"],)).fetchall()
        doc = documents.list_page(conn, principal, kb["id"], DocumentQuery(limit=10))
    assert [r["content"] for r in rows] == ["The new version mentions giraffes. It has two sentences."]
    assert len(doc) == 1 and doc[0]["status"] == "PROCESSED" and doc[0]["chunk_count"] == 1


def test_hybrid_search_reads_both_lists_at_once_in_one_snapshot(tenant, monkeypatch):
    """The keyword list is read on one connection while the semantic list is read on
    another (each query waits for the other to have started: one after the other, the
    first would wait in vain), and a new version committed before the second connection's
    first statement stays out of both: it reads the first one's snapshot."""
    import importlib
    import threading

    search_module = importlib.import_module("chalicelib.retrieval.search")
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Swap", description="")
    doc_id = _ingest(kb["id"], "farm.txt", "Version alpha: the llama farm grows alfalfa.")
    with connection() as conn:
        stored_kb = knowledge_bases.get_for_pipeline(conn, kb["id"])
    new_chunks = _embedded_chunks(stored_kb, "farm.txt", "Version beta: the llama farm grows barley.")
    swapped, keyword_started, semantic_started, met, sessions = (threading.Event(), threading.Event(),
                                                                 threading.Event(), [], set())
    real_embedding = search_module.cached_embedding
    real_keyword, real_semantic = chunk_rows.keyword_rows, chunk_rows.semantic_search

    def keyword_search(conn, *args, **kwargs):
        if not swapped.is_set():
            with open_connection(os.environ["DATABASE_URL"]) as other:
                assert chunk_rows.replace_document_chunks(other, doc_id=doc_id, kb_id=kb["id"], dim=384,
                                                          chunks=new_chunks, page_count=None) is not False
            swapped.set()
            keyword_started.set()
            met.append(("keyword", semantic_started.wait(10)))
        sessions.add(("keyword", conn.info.backend_pid))
        return real_keyword(conn, *args, **kwargs)

    def embedding(*args):
        swapped.wait(10)  # the semantic side's first statement comes after the commit
        return real_embedding(*args)

    def semantic_search(conn, *args, **kwargs):
        semantic_started.set()
        met.append(("semantic", keyword_started.wait(10)))
        sessions.add(("semantic", conn.info.backend_pid))
        return real_semantic(conn, *args, **kwargs)

    monkeypatch.setattr(search_module, "cached_embedding", embedding)
    monkeypatch.setattr(chunk_rows, "keyword_rows", keyword_search)
    monkeypatch.setattr(chunk_rows, "semantic_search", semantic_search)
    answer = search(principal, SearchRequest((kb["id"],), "llama farm", 5, strategy="hybrid", debug=True))
    assert sorted(met) == [("keyword", True), ("semantic", True)]
    assert len({pid for _, pid in sessions}) == 2
    assert [r["content"] for r in answer["results"]] == ["Version alpha: the llama farm grows alfalfa."]
    top = answer["results"][0]["scores"]
    assert top["vectorScore"] > 0 and top["keywordScore"] > 0  # both lists found it
    for name, real in (("keyword_rows", real_keyword), ("semantic_search", real_semantic)):
        monkeypatch.setattr(chunk_rows, name, real)
    answer = search(principal, SearchRequest((kb["id"],), "llama farm", 5, strategy="hybrid"))
    assert [r["content"] for r in answer["results"]] == ["Version beta: the llama farm grows barley."]


def test_hybrid_search_without_a_second_connection_reads_the_lists_in_turn(filled_kb, monkeypatch, caplog):
    """A worker that cannot open its second connection (the server's are all taken)
    answers as it would with it, from one connection."""
    import psycopg

    from chalicelib.storage import db

    principal, kb = filled_kb
    request = SearchRequest((kb["id"],), "baking bread at home", 3, strategy="hybrid", debug=True)
    with_side = search(principal, request)
    db.reset()
    real_open = db.open_connection
    opened = []

    def open_connection(url):
        if opened:  # the first is the main connection; the side one finds the server full
            raise psycopg.OperationalError("FATAL: sorry, too many clients already")
        opened.append(url)
        return real_open(url)

    monkeypatch.setattr(db, "open_connection", open_connection)
    alone = search(principal, request)
    assert "no second database connection" in caplog.text
    assert len(opened) == 1 and db.SIDE not in db._conns
    assert [(r["source"], r["scores"]) for r in alone["results"]] == \
        [(r["source"], r["scores"]) for r in with_side["results"]]
    assert alone["results"][0]["source"] == "cooking.txt"


def test_hybrid_search_survives_its_second_connection_dying(filled_kb, caplog):
    """The server ends the side connection between two searches (a failover, an idle
    timeout): the search reads the semantic list on the first connection instead, and
    the next one opens a new side connection."""
    from chalicelib.storage import db

    principal, kb = filled_kb
    request = SearchRequest((kb["id"],), "baking bread at home", 3, strategy="hybrid", debug=True)
    before = search(principal, request)
    side_pid = db._conns[db.SIDE].info.backend_pid
    with open_connection(os.environ["DATABASE_URL"]) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s) AS ended", (side_pid,)).fetchone()["ended"]
    after = search(principal, request)
    assert "side database connection failed" in caplog.text
    assert [(r["source"], r["scores"]) for r in after["results"]] == \
        [(r["source"], r["scores"]) for r in before["results"]]
    search(principal, request)
    assert db._conns[db.SIDE].info.backend_pid not in (side_pid, db._conns[db.MAIN].info.backend_pid)


def test_hybrid_search_embeds_the_question_while_it_reads_the_keyword_list(tenant, monkeypatch):
    """Each side waits for the other to have started: run one after the other, the first
    would wait in vain."""
    import importlib
    import threading

    search_module = importlib.import_module("chalicelib.retrieval.search")  # the package's `search` is the function
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Overlap", description="")
    _ingest(kb["id"], "farm.txt", "The llama farm grows alfalfa and barley.")
    embedding_started, keyword_started, met = threading.Event(), threading.Event(), []
    real_embedding, real_keyword_search = search_module.cached_embedding, chunk_rows.keyword_rows

    def embedding(*args):
        embedding_started.set()
        met.append(("embedding", keyword_started.wait(10)))
        return real_embedding(*args)

    def keyword_search(*args, **kwargs):
        keyword_started.set()
        met.append(("keyword", embedding_started.wait(10)))
        return real_keyword_search(*args, **kwargs)

    monkeypatch.setattr(search_module, "cached_embedding", embedding)
    monkeypatch.setattr(chunk_rows, "keyword_rows", keyword_search)
    answer = search(principal, SearchRequest((kb["id"],), "llama farm", 5, strategy="hybrid", debug=True))
    assert sorted(met) == [("embedding", True), ("keyword", True)]
    top = answer["results"][0]
    assert top["source"] == "farm.txt" and top["scores"]["vectorScore"] > 0 and top["scores"]["keywordScore"] > 0


INSTALL_GUIDE = """# Install

## Debian

On Debian, add the project's package repository to the apt sources, refresh the package lists and
install the kb-service package with apt. The package starts the service at boot through systemd and
keeps its settings in the configuration directory under etc, which survives upgrades.

## Windows

On Windows, download the installer from the releases page and run it as an administrator. The wizard
asks for the folder to install into and whether the service should start with the machine; the
settings live in the program data folder.
"""


def _store(kb_id: str, path: str, data: bytes, chunk_tokens: int) -> None:
    """A file at kb/{kbId}/{path}, extracted, chunked, embedded and stored as the pipeline does."""
    name = path.rsplit("/", 1)[-1]
    extracted = extract(data, name)
    with connection() as conn:
        kb = knowledge_bases.get_for_pipeline(conn, kb_id)
        stored = chunk_document(extracted, chunk_tokens, 0, {})
        vectors = get_provider(kb["embedding_provider"], kb["embedding_model"]).embed_documents(
            [c.content for c in stored])
        for chunk, vector in zip(stored, vectors):
            chunk.embedding = vector
        doc = document_status.upsert_pending(conn, kb_id=kb_id, s3_key=f"kb/{kb_id}/{path}", filename=name,
                                             size_bytes=len(data))
        chunk_rows.replace_document_chunks(conn, doc_id=doc["id"], kb_id=kb_id, dim=kb["embedding_dim"],
                                           chunks=stored, page_count=extracted.page_count)


@pytest.mark.parametrize("strategy", ["semantic", "keyword", "hybrid"])
def test_every_passage_names_its_path_page_and_section(tenant, shared_docs, strategy):
    """What a model cites: the document's path (not its bare name), a PDF's page, and the
    headings a passage is under; none of them for a text entry."""
    from chalicelib.documents.entries import create_entry

    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Citations", description="")
    _store(kb["id"], "guides/install.md", INSTALL_GUIDE.encode(), 100)
    _store(kb["id"], "history/vicksburg.pdf", (shared_docs / "Seige_of_Vicksburg_Sample_OCR.pdf").read_bytes(), 200)
    create_entry(principal, kb["id"], title="Support hours", content="The support desk answers on weekdays"
                 " from nine to five, Central European Time.", metadata={})

    def top(query: str) -> dict:
        answer = search(principal, SearchRequest((kb["id"],), query, 3, strategy=strategy))
        return answer["results"][0]

    debian = top("install the package with apt on Debian")
    assert (debian["source"], debian["path"], debian["page"]) == ("install.md", "guides/install.md", None)
    assert debian["section"] == "Install > Debian" and debian["headers"] == ["Install", "Debian"]
    siege = top("siege of Vicksburg")
    assert (siege["source"], siege["path"], siege["section"]) == ("vicksburg.pdf", "history/vicksburg.pdf", None)
    assert siege["page"] in range(1, 7)
    hours = top("when does the support desk answer")
    assert (hours["source"], hours["path"], hours["page"], hours["section"]) == ("Support hours", None, None, None)


@pytest.fixture
def over_http(tenant, monkeypatch):
    """(post a semantic search through the Chalice app as a colleague of the owner of an org
    knowledge base, by either search route: the response; Redis round trips, commands; the kb)."""
    import json

    import redis
    from chalice.test import Client

    from app import app
    from chalicelib import limits
    from chalicelib.auth import issue_key

    monkeypatch.setattr(limits, "KEY_REMEMBERED_SECONDS", 600)  # however slowly the test runs
    owner, _ = tenant
    kb = create_knowledge_base(owner, name="Ahead", description="", visibility="org")
    _ingest(kb["id"], "cooking.txt", PASSAGES["cooking.txt"])
    reader, token = issue_key(org_name(owner), "bob", role="viewer")
    round_trips, commands = [], []
    execute, command = redis.client.Pipeline.execute, redis.Redis.execute_command
    monkeypatch.setattr(redis.client.Pipeline, "execute", lambda pipe, *a, **k: round_trips.append(1) or
                        execute(pipe, *a, **k))
    monkeypatch.setattr(redis.Redis, "execute_command", lambda client, *a, **k: commands.append(a[0]) or
                        command(client, *a, **k))
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    with Client(app) as client:
        def post(route: str, query: str = "bread in the oven"):
            round_trips.clear(), commands.clear()
            body = {"query": query, "topK": 1, "strategy": "semantic"}
            if route == "one":
                return client.http.post(f"/knowledge-bases/{kb['id']}/search", headers=headers, body=json.dumps(body))
            return client.http.post("/search", headers=headers, body=json.dumps({**body, "knowledgeBaseIds": [kb["id"]]}))

        yield post, round_trips, commands, kb, reader


@pytest.fixture
def statements(monkeypatch):
    """The SQL statements this process sends from now on (a list the test clears)."""
    import psycopg

    sent, execute = [], psycopg.Cursor.execute
    monkeypatch.setattr(psycopg.Cursor, "execute", lambda cur, query, *a, **k: sent.append(query) or
                        execute(cur, query, *a, **k))
    return sent


@pytest.mark.parametrize("route", ["one", "many"])
def test_a_remembered_callers_cached_search_over_http_is_one_redis_round_trip_and_no_sql(over_http, route, tenant,
                                                                                        statements):
    """Both search routes read the cached answer and its counters in the rate limit's round
    trip (kv.read_ahead) and hand them to that request alone; the caller's view of the
    knowledge base, remembered under those counters and the keys' generation
    (access.searchable), needs no SQL. Access withdrawn through the service moves the
    counter: refused from the next request."""
    from chalicelib import kv
    from chalicelib.knowledge_bases import update_knowledge_base

    post, round_trips, commands, kb, _ = over_http
    owner, _ = tenant
    first = post(route)  # the caller looked up and remembered; the answer computed and stored
    assert first.status_code == 200 and first.json_body["data"]["metadata"]["resultsCached"] is False
    assert len(round_trips) + len(commands) > 1
    statements.clear()
    second = post(route)
    assert second.status_code == 200 and second.json_body["data"]["metadata"]["resultsCached"] is True
    assert second.json_body["data"]["results"] == first.json_body["data"]["results"]
    assert (len(round_trips), commands) == (1, [])
    assert statements == []
    assert kv._read_ahead.get() is None and kv.keys_generation() is None  # nothing left for the next request
    update_knowledge_base(owner, kb["id"], {"visibility": "private"})
    refused = post(route)
    assert len(round_trips) == 1
    assert refused.status_code == 404 and refused.json_body["error"]["code"] == "NOT_FOUND", refused.json_body


def test_access_withdrawn_outside_the_service_is_seen_within_the_remembered_time(over_http, monkeypatch):
    """A change no counter sees (SQL by hand) is the one case the remembered view can miss,
    for at most limits.KEY_REMEMBERED_SECONDS; then the database decides again."""
    import time

    from chalicelib import limits

    post, _, _, kb, _ = over_http
    assert [post("one").status_code for _ in range(2)] == [200, 200]
    with connection() as conn:
        conn.execute("UPDATE knowledge_bases SET visibility = 'private' WHERE id = %s", (kb["id"],))
    assert post("one").status_code == 200  # remembered: no counter moved
    later = time.monotonic() + limits.KEY_REMEMBERED_SECONDS + 1
    monkeypatch.setattr(time, "monotonic", lambda: later)
    refused = post("one")
    assert refused.status_code == 404 and refused.json_body["error"]["code"] == "NOT_FOUND", refused.json_body


def test_a_reader_taken_out_of_the_group_a_knowledge_base_allows_is_refused_from_the_next_search(tenant,
                                                                                               monkeypatch):
    """kb_access_allows reads the user's groups: a change of them (make key GROUPS=) moves
    the keys' generation, so no worker answers from the view it remembered."""
    import json

    from chalice.test import Client

    from app import app
    from chalicelib import limits
    from chalicelib.auth import issue_key
    from chalicelib.knowledge_bases import parse_access

    monkeypatch.setattr(limits, "KEY_REMEMBERED_SECONDS", 600)
    owner, _ = tenant
    kb = create_knowledge_base(owner, name="Chefs only", description="", visibility="org",
                               access=parse_access({"readRoles": ["chefs"]}))
    _ingest(kb["id"], "cooking.txt", PASSAGES["cooking.txt"])
    _, token = issue_key(org_name(owner), "carol", role="viewer", groups=["chefs"])
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    body = json.dumps({"query": "bread in the oven", "topK": 1, "strategy": "semantic"})
    with Client(app) as client:
        def post():
            return client.http.post(f"/knowledge-bases/{kb['id']}/search", headers=headers, body=body)

        assert [post().status_code for _ in range(3)] == [200, 200, 200]
        issue_key(org_name(owner), "carol", groups=[])
        refused = post()
    assert refused.status_code == 404 and refused.json_body["error"]["code"] == "NOT_FOUND", refused.json_body


def test_an_answer_computed_under_counters_read_ahead_misses_once_a_write_moved_them(over_http, monkeypatch):
    """A write that lands between the request's check and its search: the answer is stored
    under the counters read before it, so the next search misses and computes again."""
    from chalicelib import freshness

    post, _, _, kb, _ = over_http
    import importlib

    searching = importlib.import_module("chalicelib.retrieval.search")  # the package's `search` is the function

    post("one", "warm the caller up")  # remembered from now on: the next request reads ahead
    compute, bumped = searching._search, []

    def write_meanwhile(principal, request, kbs):
        if not bumped:
            freshness.bump(kb["id"])
            bumped.append(1)
        return compute(principal, request, kbs)

    monkeypatch.setattr(searching, "_search", write_meanwhile)
    assert post("one").json_body["data"]["metadata"]["resultsCached"] is False
    assert bumped and post("one").json_body["data"]["metadata"]["resultsCached"] is False
    assert post("one").json_body["data"]["metadata"]["resultsCached"] is True


def test_a_revoked_key_remembered_with_a_read_ahead_is_refused(over_http):
    from chalicelib.auth import keys

    post, round_trips, _, _, reader = over_http
    assert [post("one").status_code for _ in range(2)] == [200, 200]
    kept = dict(keys._remembered)  # as a worker that did not revoke it
    keys.revoke_key(reader, reader.key_id)
    keys._remembered.update(kept)
    refused = post("one")
    assert refused.status_code == 401 and refused.json_body["error"]["code"] == "UNAUTHORIZED"


def test_who_added_a_document_is_shown_only_inside_the_knowledge_bases_organisation(tenant):
    """A public knowledge base's documents are read by other organisations too; who added one
    (createdBy, a user id of the owner's organisation) is shown only to its own."""
    from chalicelib.auth import issue_key
    from chalicelib.documents import entries
    from chalicelib.documents.listing import DocumentQuery
    from chalicelib.documents.service import get_document, list_documents

    owner, _ = tenant
    colleague, _ = issue_key(org_name(owner), "bob")
    stranger, _ = issue_key(f"org-{secrets.token_hex(4)}", "mallory")
    kb = create_knowledge_base(owner, name="Public", description="", visibility="public")
    entry = entries.create_entry(owner, kb["id"], title="Hours", content="The desk opens at nine.", metadata={},
                                 level="public")
    for reader, shown in ((owner, owner.user_id), (colleague, owner.user_id), (stranger, None)):
        rows, _ = list_documents(reader, kb["id"], DocumentQuery(limit=10))
        assert [r["created_by"] for r in rows] == [shown], reader
        assert get_document(reader, kb["id"], entry.id)["created_by"] == shown
