"""Keyword search ranks by BM25 (migration 0011): statistics kept by triggers as chunks
come and go, rankings equal to BM25 computed here from the chunks' own tsvectors."""
import math
import os
import threading

import pytest

from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.retrieval import SearchRequest, policy
from chalicelib.retrieval import search as run_search
from chalicelib.storage import chunks as chunk_rows
from chalicelib.storage import connection, document_status, terms
from chalicelib.storage.db import open_connection
from tests.integration.test_search import _embedded_chunks, _ingest

K1, B = 1.2, 0.75


def _reference(kb_id: str) -> dict:
    """BM25's inputs recomputed from the chunks' tsvectors, independently of the triggers."""
    with connection() as conn:
        rows = conn.execute("SELECT c.id, u.lexeme, cardinality(u.positions) AS n, u.weights"
                            " FROM chunks c, unnest(c.tsv) u WHERE c.kb_id = %s", (kb_id,)).fetchall()
        count = conn.execute("SELECT count(*) AS n FROM chunks WHERE kb_id = %s", (kb_id,)).fetchone()["n"]
    tf: dict[int, dict[str, float]] = {}
    for r in rows:
        tf.setdefault(r["id"], {})[r["lexeme"]] = r["n"] + r["weights"].count("A")  # a title counts twice
    df: dict[str, int] = {}
    for chunk in tf.values():
        for term in chunk:
            df[term] = df.get(term, 0) + 1
    return {"chunks": count, "length": sum(sum(c.values()) for c in tf.values()), "df": df, "tf": tf}


def _stored(kb_id: str) -> dict:
    with connection() as conn:
        stats = conn.execute("SELECT chunks, length FROM kb_text_stats WHERE kb_id = %s", (kb_id,)).fetchone()
        df = {r["term"]: r["df"] for r in conn.execute(
            "SELECT term, df FROM kb_terms WHERE kb_id = %s AND df <> 0", (kb_id,))}
        postings: dict[int, dict[str, float]] = {}
        for r in conn.execute("SELECT chunk_id, term, tf, dl FROM chunk_terms WHERE kb_id = %s", (kb_id,)):
            postings.setdefault(r["chunk_id"], {})[r["term"]] = r["tf"]
        lengths = {r["chunk_id"]: r["dl"] for r in conn.execute(
            "SELECT DISTINCT chunk_id, dl FROM chunk_terms WHERE kb_id = %s", (kb_id,))}
    return {"chunks": stats["chunks"] if stats else 0, "length": stats["length"] if stats else 0,
            "df": df, "tf": postings, "dl": lengths}


def _assert_in_step(kb_id: str) -> None:
    want, got = _reference(kb_id), _stored(kb_id)
    assert (got["chunks"], got["length"]) == (want["chunks"], want["length"])
    assert got["df"] == want["df"]
    assert got["tf"] == want["tf"]
    assert got["dl"] == {chunk: sum(t.values()) for chunk, t in want["tf"].items()}


def _bm25(kb_id: str, query: str) -> list[tuple[int, float]]:
    """The ranking BM25 gives the question over the knowledge base's chunks."""
    ref = _reference(kb_id)
    with connection() as conn:
        words = {r["lexeme"] for r in conn.execute("SELECT lexeme FROM unnest(to_tsvector('english', %s))",
                                                   (query,))}
    n, avgdl = ref["chunks"], ref["length"] / ref["chunks"]
    idf = {t: math.log(1 + (n - ref["df"][t] + 0.5) / (ref["df"][t] + 0.5)) for t in words if t in ref["df"]}
    best = sum(idf.values()) * (K1 + 1)
    scores = {}
    for chunk, tf in ref["tf"].items():
        dl = sum(tf.values())
        s = sum(idf[t] * tf[t] * (K1 + 1) / (tf[t] + K1 * (1 - B + B * dl / avgdl)) for t in idf if t in tf)
        if s > 0:
            scores[chunk] = s / best
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def _keyword(principal, kb, query: str, top_k: int = 20, **options) -> list[dict]:
    answer = run_search(principal, SearchRequest((kb["id"],), query, top_k, strategy="keyword",
                                                 max_tokens=10**6, **options))
    with connection() as conn:
        ids = {(r["document_id"], r["chunk_index"]): r["id"] for r in conn.execute(
            "SELECT id, document_id, chunk_index FROM chunks WHERE kb_id = %s", (kb["id"],))}
    return [{"chunk": ids[(p.document_id, p.chunk_index)], "score": p.scores.keyword, "source": p.source}
            for p in answer.passages]


PUMPS = {
    "pumps.txt": "Centrifugal pumps move water with a spinning impeller. A pump needs priming before use.",
    "valves.txt": "A stuck valve stops the pump. Replace the valve seal when the pump leaks.",
    "impeller.txt": "The impeller of a centrifugal pump wears out; inspect the impeller every year.",
    "garden.txt": "Water the garden in the evening. A pump from the rain barrel saves water.",
    "long.txt": " ".join(["Maintenance schedules list many tasks for the plant operators."] * 6)
                + " Check the pump once.",
    "boat.txt": "The boat's bilge pump runs when water rises; the boat stays dry.",
}


@pytest.fixture
def pumps(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Pumps", description="")
    ids = {name: _ingest(kb["id"], name, text) for name, text in PUMPS.items()}
    return principal, kb, ids


def test_statistics_follow_chunks_as_documents_come_and_go(pumps):
    principal, kb, ids = pumps
    _assert_in_step(kb["id"])
    # replaced: a document stored again with new text
    with connection() as conn:
        chunk_rows.replace_document_chunks(conn, doc_id=ids["garden.txt"], kb_id=kb["id"], dim=384,
                                           chunks=_embedded_chunks(kb, "garden.txt", "Roses like sun."),
                                           page_count=None)
    _assert_in_step(kb["id"])
    with connection() as conn:
        conn.execute("DELETE FROM documents WHERE id = %s", (ids["boat.txt"],))  # chunks go by cascade
        chunk_rows.set_metadata(conn, ids["pumps.txt"], {"team": "water"})  # text unchanged
        conn.execute("UPDATE chunks SET content = 'A valve, a valve, a valve.' WHERE document_id = %s",
                     (ids["valves.txt"],))
    _assert_in_step(kb["id"])
    assert "boat" not in _stored(kb["id"])["df"] and "rose" in _stored(kb["id"])["df"]
    with connection() as conn:
        conn.execute("DELETE FROM knowledge_bases WHERE id = %s", (kb["id"],))
        left = [conn.execute(f"SELECT count(*) AS n FROM {t} WHERE kb_id = %s", (kb["id"],)).fetchone()["n"]
                for t in ("chunk_terms", "kb_terms", "kb_text_stats")]
    assert left == [0, 0, 0]


@pytest.mark.parametrize("query", ["pump impeller", "centrifugal pump water", "valve seal leaks",
                                   "how often should the impeller of my pump be inspected?"])
def test_keyword_search_ranks_and_scores_as_bm25(pumps, query):
    principal, kb, _ = pumps
    want = _bm25(kb["id"], query)
    got = _keyword(principal, kb, query)
    assert [r["chunk"] for r in got] == [chunk for chunk, _ in want]
    assert [r["score"] for r in got] == pytest.approx([s for _, s in want], abs=1e-5)


@pytest.mark.parametrize("query", ["pump", "water pump"])
def test_the_second_pass_makes_a_first_pass_that_read_too_little_exact(pumps, monkeypatch, query):
    principal, kb, _ = pumps
    for i in range(10):  # pump is in 6 chunks of 16: rare enough to matter
        _ingest(kb["id"], f"reef{i}.txt", f"Coral reef {i} grows slowly in warm shallow seas.")
    monkeypatch.setattr(policy, "KEYWORD_PER_TERM", 1)  # top_k 1: each term's best 2 postings
    passes = []
    real = policy.bm25_exact_pass
    monkeypatch.setattr(policy, "bm25_exact_pass", lambda *a: passes.append(real(*a)) or passes[-1])
    got = _keyword(principal, kb, query, top_k=1)
    assert passes and passes[0] is not None  # the first pass could have missed the best
    assert [(r["chunk"], pytest.approx(r["score"], abs=1e-5)) for r in got] == _bm25(kb["id"], query)[:1]


def test_a_deeper_list_than_asked_is_exact_in_its_top_k(pumps, monkeypatch):
    """Hybrid search reads a keyword list deeper than its top_k: the second pass makes
    the top_k exact, and the rest are first-pass hits, scored exactly, in order."""
    from chalicelib.retrieval.search import _bm25 as keyword_list
    from chalicelib.storage import acting_for, snapshot

    principal, kb, _ = pumps
    for i in range(10):
        _ingest(kb["id"], f"reef{i}.txt", f"Coral reef {i} grows slowly in warm shallow seas.")
    monkeypatch.setattr(policy, "KEYWORD_PER_TERM", 1)  # a pool of 2: each term's best 4 postings
    passes = []
    real = policy.bm25_exact_pass
    monkeypatch.setattr(policy, "bm25_exact_pass", lambda *a: passes.append(a) or real(*a))
    request = SearchRequest((kb["id"],), "water pump", 1, strategy="hybrid")
    with acting_for(principal.org_id, principal.user_id), snapshot() as conn:
        rows, _ = keyword_list(conn, principal, request, [kb["id"]], pool=2)
    want = dict(_bm25(kb["id"], "water pump"))
    assert passes and passes[0][3] == 1  # made exact to the request's top_k, not the pool's depth
    assert rows[0]["chunk_id"] == _bm25(kb["id"], "water pump")[0][0]
    assert len(rows) == 2 and rows[0]["score"] >= rows[1]["score"]
    assert [r["score"] for r in rows] == pytest.approx([want[r["chunk_id"]] for r in rows], abs=1e-5)


def test_a_rare_word_outweighs_a_common_one_and_a_short_chunk_a_long_one(pumps):
    principal, kb, _ = pumps
    # every passage says pump; only two say impeller, and impeller.txt says it twice
    assert [r["source"] for r in _keyword(principal, kb, "pump impeller")][:2] == ["impeller.txt", "pumps.txt"]
    # pump once in each: the long maintenance text comes last
    once = _keyword(principal, kb, "check pump")
    assert once[0]["source"] == "long.txt"  # "check" is there alone
    assert [r["source"] for r in _keyword(principal, kb, "pump")][-1] == "long.txt"


def test_a_filtered_search_is_complete_when_the_candidates_miss_it(pumps, monkeypatch):
    principal, kb, ids = pumps
    with connection() as conn:
        chunk_rows.set_metadata(conn, ids["long.txt"], {"team": "plant"})
    monkeypatch.setattr(policy, "KEYWORD_PER_TERM", 1)  # each term's best posting only (top_k 1: 10)
    assert "long.txt" not in [r["source"] for r in _keyword(principal, kb, "pump", top_k=1)]
    got = _keyword(principal, kb, "pump", top_k=1, filters=_team("plant"))
    assert [r["source"] for r in got] == ["long.txt"]


def _team(team: str):
    from chalicelib.retrieval.request import parse_filters

    return parse_filters({"metadata": {"team": team}})


def test_a_long_question_keeps_its_rarest_terms(pumps):
    principal, kb, _ = pumps
    question = " ".join(f"word{i}" for i in range(200)) + " " + " ".join(PUMPS.values())
    with connection() as conn:
        words = terms.query_terms(conn, question)
        stats = terms.statistics(conn, [kb["id"]], words)
    query = policy.bm25_query(stats, words, top_k=5)
    assert len(query.terms) == policy.KEYWORD_TERMS_MAX < len(stats.document_frequency)
    assert min(query.idfs) >= max(math.log(1 + (stats.chunks - df + 0.5) / (df + 0.5))
                                  for t, df in stats.document_frequency.items() if t not in query.terms)
    assert _keyword(principal, kb, question)  # answers, from 32 index scans


def test_documents_stored_at_once_in_one_knowledge_base_keep_the_statistics_right(tenant):
    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Busy", description="")
    texts = [f"Pump {i} and valve {i % 3}: the impeller, the seal and the water." for i in range(12)]
    embedded = {i: (_embedded_chunks(kb, "a.txt", texts[i]), _embedded_chunks(kb, "a.txt", texts[i] + " Replaced."))
                for i in range(12)}
    errors = []

    def store(batch):
        try:
            with open_connection(os.environ["DATABASE_URL"]) as conn:  # a worker's own connection
                for i in batch:
                    doc = document_status.upsert_pending(conn, kb_id=kb["id"], s3_key=f"kb/{kb['id']}/doc{i}.txt",
                                                         filename=f"doc{i}.txt", size_bytes=1)
                    for version in embedded[i]:
                        chunk_rows.replace_document_chunks(conn, doc_id=doc["id"], kb_id=kb["id"], dim=384,
                                                           chunks=version, page_count=None)
        except Exception as err:  # a deadlock would surface here
            errors.append(err)

    workers = [threading.Thread(target=store, args=(range(k, 12, 3),)) for k in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    _assert_in_step(kb["id"])
    assert _stored(kb["id"])["chunks"] == 12


@pytest.mark.parametrize("words", [(3, 12), (120, 300)], ids=["short chunks", "long chunks"])
def test_a_terms_bound_holds_for_every_chunk_and_the_best_posting_tightens_it(tenant, words):
    """The second pass skips a term when its bound says it cannot lift a chunk over the
    floor: no posting may score above it, whether the knowledge base's chunks average
    fewer terms than the impact order assumes (100) or more."""
    import random

    principal, _ = tenant
    kb = create_knowledge_base(principal, name="Bounds", description="")
    pick = random.Random(words[0])
    vocabulary = ("pump valve seal water impeller motor pipe gauge flow level tank filter drain"
                  " bearing shaft rotor").split()
    for i in range(8):
        text = " ".join(pick.choice(vocabulary[: 4 + i]) for _ in range(pick.randint(*words)))
        _ingest(kb["id"], f"doc{i}.txt", text + ".")
    # a term's highest frequency and shortest chunk in two different chunks
    _ingest(kb["id"], "short.txt", "Pump.")
    _ingest(kb["id"], "often.txt", " ".join(["pump"] * 6 + vocabulary * 2) + ".")
    ref = _reference(kb["id"])
    with connection() as conn:
        found = terms.query_terms(conn, " ".join(vocabulary))
        stats = terms.statistics(conn, [kb["id"]], found)
    query = policy.bm25_query(stats, found, top_k=5)
    average = ref["length"] / ref["chunks"]
    assert (average < 100) == (words[0] < 100)
    tighter = 0
    for term in query.terms:
        best = max(query.saturation(tf[term], sum(tf.values())) for tf in ref["tf"].values() if term in tf)
        assert best <= query.bound(stats, term) + 1e-9, term
        assert query.bound(stats, term) <= query.saturation(*stats.bounds[term])
        tighter += query.bound(stats, term) < query.saturation(*stats.bounds[term]) - 1e-6
    assert tighter  # the best posting bounds some term more closely than its counts do
