"""Keyword search ranks by BM25 (migrations 0011 and 0026): statistics and postings kept by
triggers as chunks come and go, folded into blocks by compactions, and rankings equal to
BM25 computed here from the chunks' own tsvectors."""
import math
import os
import threading

import numpy as np
import pytest

from chalicelib import indexing
from chalicelib.knowledge_bases import create_knowledge_base
from chalicelib.retrieval import SearchRequest, bm25, policy
from chalicelib.retrieval import search as run_search
from chalicelib.storage import chunks as chunk_rows
from chalicelib import postings
from chalicelib.storage import connection, document_status, postings_cache, term_blocks, terms
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


def _width(largest: float) -> int:
    return next(w for w in (1, 2, 4, 8) if largest < 256 ** w)


def _stored(kb_id: str, old_layout: bool = False) -> dict:
    """The statistics, and the postings as the blocks hold them with the tail applied, read
    here in SQL (not through term_blocks.BlockPostings); checks the blocks' own invariants (and
    that every block is packed, unless old_layout allows 0026's)."""
    with connection() as conn:
        stats = conn.execute("SELECT chunks, length FROM kb_text_stats WHERE kb_id = %s", (kb_id,)).fetchone()
        df = {r["term"]: r["df"] for r in conn.execute(
            "SELECT term, df FROM kb_terms WHERE kb_id = %s AND df <> 0", (kb_id,))}
        blocks = conn.execute(
            "SELECT b.term, b.first_id, b.last_id, b.n, b.max_tf, b.min_dl, b.id_bytes, b.tf_bytes, b.dl_bytes,"
            "       u.ids, u.tfs, u.dls FROM term_blocks b CROSS JOIN LATERAL"
            "  (SELECT array_agg(x.id ORDER BY x.o) AS ids, array_agg(x.tf ORDER BY x.o) AS tfs,"
            "          array_agg(x.dl ORDER BY x.o) AS dls FROM kb_bm25_unpack(b.first_id, b.id_bytes, b.tf_bytes,"
            "          b.dl_bytes, b.ids, b.tfs, b.dls) WITH ORDINALITY x(id, tf, dl, o)) u"
            " WHERE b.kb_id = %s ORDER BY b.term, b.first_id", (kb_id,)).fetchall()
        tail = conn.execute("SELECT term, chunk_id, tf, dl, sign FROM chunk_terms WHERE kb_id = %s"
                            " ORDER BY sign, chunk_id", (kb_id,)).fetchall()
    found: dict[tuple[str, int], tuple[float, float]] = {}
    last: dict[str, int] = {}
    for b in blocks:
        # Packed (migration 0027): each column in the fewest of 1, 2, 4 or 8 bytes its largest value
        # needs; or as 0026 wrote it, until packed after the migrations (0028).
        steps = np.diff(b["ids"], prepend=b["ids"][0])
        packed = [_width(max(steps)), _width(max(b["tfs"])), _width(max(b["dls"]))]
        assert [b["id_bytes"], b["tf_bytes"], b["dl_bytes"]] in ([packed, [0, 2, 4]] if old_layout else [packed])
        assert b["ids"] == sorted(b["ids"]) and (b["first_id"], b["last_id"]) == (b["ids"][0], b["ids"][-1])
        assert b["n"] == len(b["ids"]) == len(b["tfs"]) == len(b["dls"]) <= terms.BLOCK
        assert (b["max_tf"], b["min_dl"]) == (max(b["tfs"]), min(b["dls"]))
        assert b["first_id"] > last.get(b["term"], -1)  # a term's blocks: disjoint, in order
        last[b["term"]] = b["last_id"]
        found.update({(b["term"], i): (tf, dl) for i, tf, dl in zip(b["ids"], b["tfs"], b["dls"])})
    for r in tail:  # voids first, then the new postings
        if r["sign"] < 0:
            found.pop((r["term"], r["chunk_id"]), None)
        else:
            assert (r["term"], r["chunk_id"]) not in found
            found[(r["term"], r["chunk_id"])] = (r["tf"], r["dl"])
    postings: dict[int, dict[str, float]] = {}
    lengths: dict[int, float] = {}
    for (term, chunk), (tf, dl) in found.items():
        postings.setdefault(chunk, {})[term] = tf
        lengths[chunk] = dl
    return {"chunks": stats["chunks"] if stats else 0, "length": stats["length"] if stats else 0,
            "df": df, "tf": postings, "dl": lengths, "blocks": len(blocks), "tail": len(tail)}


def _compact(kb_id: str, block: int = 2) -> None:
    """Folds the tail into blocks; blocks of 2 make every term's list several blocks."""
    with connection() as conn:
        terms.compact(conn, kb_id, block)


def _assert_in_step(kb_id: str, old_layout: bool = False) -> None:
    want, got = _reference(kb_id), _stored(kb_id, old_layout)
    assert (got["chunks"], got["length"]) == (want["chunks"], want["length"])
    assert got["df"] == want["df"]
    assert got["tf"] == want["tf"]
    assert got["dl"] == {chunk: sum(t.values()) for chunk, t in want["tf"].items()}


def _bm25(kb_id: str, query: str) -> list[tuple[int, float]]:
    """The ranking BM25 gives the question over the knowledge base's chunks."""
    return _bm25_over([kb_id], query)


def _bm25_over(kb_ids: list[str], query: str) -> list[tuple[int, float]]:
    """The ranking BM25 gives the question over the knowledge bases' chunks, searched together."""
    refs = [_reference(kb_id) for kb_id in kb_ids]
    ref = {"chunks": sum(r["chunks"] for r in refs), "length": sum(r["length"] for r in refs), "df": {},
           "tf": {chunk: tf for r in refs for chunk, tf in r["tf"].items()}}
    for r in refs:
        for term, n in r["df"].items():
            ref["df"][term] = ref["df"].get(term, 0) + n
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
    _compact(kb["id"])
    assert _stored(kb["id"])["tail"] == 0
    _assert_in_step(kb["id"])
    # replaced: a document stored again with new text
    with connection() as conn:
        chunk_rows.replace_document_chunks(conn, doc_id=ids["garden.txt"], kb_id=kb["id"], dim=384,
                                           chunks=_embedded_chunks(kb, "garden.txt", "Roses like sun."),
                                           page_count=None)
    _assert_in_step(kb["id"])
    with connection() as conn:
        conn.execute("DELETE FROM documents WHERE id = %s", (ids["boat.txt"],))  # chunks go by cascade
        document_status.set_chunk_metadata(conn, ids["pumps.txt"], {"team": "water"})  # text unchanged
        conn.execute("UPDATE chunks SET content = 'A valve, a valve, a valve.' WHERE document_id = %s",
                     (ids["valves.txt"],))
    _assert_in_step(kb["id"])  # the changes of chunks in blocks: voids and new postings in the tail
    assert _stored(kb["id"])["tail"] > 0
    _compact(kb["id"])
    _assert_in_step(kb["id"])
    with connection() as conn:  # a chunk changed twice between compactions, then removed
        for text in ("Pumps and pumps.", "Only valves."):
            conn.execute("UPDATE chunks SET content = %s WHERE document_id = %s", (text, ids["pumps.txt"]))
        _assert_in_step(kb["id"])
        conn.execute("DELETE FROM documents WHERE id = %s", (ids["pumps.txt"],))
    _assert_in_step(kb["id"])
    _compact(kb["id"], block=1024)
    _assert_in_step(kb["id"])
    assert "boat" not in _stored(kb["id"])["df"] and "rose" in _stored(kb["id"])["df"]
    with connection() as conn:
        conn.execute("DELETE FROM knowledge_bases WHERE id = %s", (kb["id"],))
        left = [conn.execute(f"SELECT count(*) AS n FROM {t} WHERE kb_id = %s", (kb["id"],)).fetchone()["n"]
                for t in ("chunk_terms", "term_blocks", "kb_terms", "kb_text_stats")]
    assert left == [0, 0, 0, 0]


@pytest.mark.parametrize("query", ["pump impeller", "centrifugal pump water", "valve seal leaks",
                                   "how often should the impeller of my pump be inspected?"])
def test_keyword_search_ranks_and_scores_as_bm25(pumps, query):
    principal, kb, _ = pumps
    want = _bm25(kb["id"], query)
    got = _keyword(principal, kb, query)
    assert [r["chunk"] for r in got] == [chunk for chunk, _ in want]
    assert [r["score"] for r in got] == pytest.approx([s for _, s in want], abs=1e-5)


@pytest.mark.parametrize("query, top_k", [("pump", 3), ("water pump", 3), ("coral pump seas", 3),
                                          ("warm water pump impeller", 3), ("impeller water", 1)])
def test_the_top_is_exact_from_blocks_and_tail_when_common_terms_are_read_only_where_they_count(
        pumps, monkeypatch, query, top_k):
    principal, kb, ids = pumps
    for i in range(10):
        _ingest(kb["id"], f"reef{i}.txt", f"Coral reef {i} grows slowly in warm shallow seas of water.")
    _compact(kb["id"])
    _ingest(kb["id"], "late.txt", "A late pump: water, water and a coral reef.")  # in the tail
    with connection() as conn:
        conn.execute("DELETE FROM documents WHERE id = %s", (ids["garden.txt"],))  # voided in the blocks
    monkeypatch.setattr(bm25, "FIRST_READ", 1)  # the rarest term first, the rest as they can matter
    monkeypatch.setattr(policy, "DEDUPE_SPARE", 0)  # BM25 asked for top_k itself, not the spare repeats take
    holding, whole = [], []
    real, real_read = term_blocks.BlockPostings.read_blocks, term_blocks.BlockPostings.read
    monkeypatch.setattr(term_blocks.BlockPostings, "read_blocks",
                        lambda self, wanted: holding.extend(wanted) or real(self, wanted))
    monkeypatch.setattr(term_blocks.BlockPostings, "read", lambda self, t: whole.extend(t) or real_read(self, t))
    got = _keyword(principal, kb, query, top_k=top_k)
    want = _bm25(kb["id"], query)[:top_k]
    assert [(r["chunk"], pytest.approx(r["score"], abs=1e-5)) for r in got] == want
    if query == "impeller water":
        # in most chunks: read only in the blocks where it could lift one to the top, never whole
        assert "water" in holding and "water" not in whole


def _version(kb_id: str) -> int:
    with connection() as conn:
        return conn.execute("SELECT blocks_version FROM kb_text_stats WHERE kb_id = %s", (kb_id,)).fetchone()[
            "blocks_version"]


def test_a_worker_keeps_blocks_under_their_version_and_a_compaction_retires_them(pumps, monkeypatch):
    """The worker's decoded blocks (postings_cache.CACHE) serve the next search while the tail moves
    under them, and a compaction's new blocks, under a new version, are read from SQL."""
    principal, kb, ids = pumps
    for i in range(10):
        _ingest(kb["id"], f"reef{i}.txt", f"Coral reef {i} grows slowly in warm shallow seas of water.")
    _compact(kb["id"])
    monkeypatch.setattr(bm25, "FIRST_READ", 1)  # the rarest term whole, the rest through the directory
    monkeypatch.setattr(policy, "DEDUPE_SPARE", 0)  # BM25 asked for top_k itself, not the spare repeats take
    decoded, real = [], term_blocks._decoded  # the terms whose blocks a search read from SQL
    monkeypatch.setattr(term_blocks, "_decoded", lambda rows: decoded.extend(r["term"] for r in rows) or real(rows))
    query = "warm water pump impeller"

    def exact(top_k: int = 5) -> bool:  # debug: never the results cache's answer
        decoded.clear()
        got = _keyword(principal, kb, query, top_k=top_k, debug=True)
        return [(r["chunk"], pytest.approx(r["score"], abs=1e-5)) for r in got] == _bm25(kb["id"], query)[:top_k]

    def kept() -> set[str]:  # the terms read whole, kept under the current version
        return {key[3] for key in list(postings_cache.CACHE._entries) if key[:3] == ("postings", kb["id"], _version(kb["id"]))}

    assert exact() and decoded and kept()
    assert exact() and kept().isdisjoint(decoded)  # read whole once, then from the worker
    before, whole = _version(kb["id"]), kept()
    _ingest(kb["id"], "late.txt", "A late pump: warm water, water and a coral reef.")  # new postings, in the tail
    with connection() as conn:
        conn.execute("DELETE FROM documents WHERE id = %s", (ids["pumps.txt"],))  # postings voided in the blocks
    assert _version(kb["id"]) == before
    assert exact() and whole.isdisjoint(decoded)  # the kept blocks with this snapshot's tail
    _compact(kb["id"])
    assert _version(kb["id"]) != before and not kept()
    assert exact() and whole & set(decoded)  # the new blocks, from SQL


def _exact_twice(principal, kb_ids: list[str], query: str, top_k: int = 5) -> None:
    """The search is exact from SQL, then from what the worker kept (debug: never the results cache)."""
    want = _bm25_over(kb_ids, query)[:top_k]
    for _ in range(2):
        answer = run_search(principal, SearchRequest(tuple(kb_ids), query, top_k, strategy="keyword",
                                                     max_tokens=10**6, debug=True))
        assert [(p.chunk_id, pytest.approx(p.scores.keyword, abs=1e-5)) for p in answer.passages] == want


def test_blocks_rewritten_by_a_rebuild_or_in_place_are_not_read_from_the_worker(pumps, database_url):
    import psycopg

    principal, kb, _ = pumps
    _compact(kb["id"])
    _exact_twice(principal, [kb["id"]], "water pump")
    before = _version(kb["id"])
    with psycopg.connect(database_url, autocommit=True) as owner:  # as the migrations' owner
        owner.execute("SELECT kb_bm25_rebuild(%s, 2)", (kb["id"],))
    assert _version(kb["id"]) != before
    _exact_twice(principal, [kb["id"]], "water pump")
    before = _version(kb["id"])
    with connection() as conn:  # rewritten in place, as a repack does
        conn.execute(_TO_0026, {"kb": kb["id"]})
    assert _version(kb["id"]) != before
    _exact_twice(principal, [kb["id"]], "water pump")


def test_a_warm_search_of_two_knowledge_bases_whose_blocks_interleave_is_exact(pumps, monkeypatch):
    principal, kb, _ = pumps
    other = create_knowledge_base(principal, name="Reefs", description="")
    for i in range(8):  # chunk ids of the two alternate, so their blocks' ranges overlap
        _ingest(kb["id"], f"more{i}.txt", f"A warm water pump {i} at the reef station.")
        _ingest(other["id"], f"reef{i}.txt", f"Coral reef {i} grows in warm water near the pump house.")
    _compact(kb["id"])
    _compact(other["id"])
    monkeypatch.setattr(bm25, "FIRST_READ", 1)  # the rest through the directory and the blocks
    for query, top_k in (("warm water pump reef", 5), ("pump impeller coral", 3), ("water", 4)):
        _exact_twice(principal, [kb["id"], other["id"]], query, top_k)
    assert {key[1] for key in list(postings_cache.CACHE._entries) if key[0] == "postings"} >= {kb["id"], other["id"]}


def _sql_reads(monkeypatch) -> list[str]:
    """The terms whose blocks or directories the searches from now on read from SQL."""
    read, real_blocks, real_directories = [], term_blocks._decoded, term_blocks._directories
    monkeypatch.setattr(term_blocks, "_decoded", lambda rows: read.extend(r["term"] for r in rows) or real_blocks(rows))
    monkeypatch.setattr(term_blocks, "_directories",
                        lambda rows: read.extend(f"directory:{r['term']}" for r in rows) or real_directories(rows))
    return read


@pytest.fixture
def shared_everything(monkeypatch):
    """Every term worth sharing (the fixtures' terms are all rare), Redis as the tests' own."""
    monkeypatch.setattr(postings_cache.SHARED, "min_postings", 1)
    return postings_cache.SHARED


def test_a_new_worker_reads_the_blocks_another_shared_until_a_compaction_moves_the_version(
        pumps, shared_everything, monkeypatch):
    principal, kb, ids = pumps
    for i in range(10):
        _ingest(kb["id"], f"reef{i}.txt", f"Coral reef {i} grows slowly in warm shallow seas of water.")
    _compact(kb["id"])
    monkeypatch.setattr(bm25, "FIRST_READ", 1)  # the rarest term whole, the rest through the directory
    monkeypatch.setattr(policy, "DEDUPE_SPARE", 0)  # BM25 asked for top_k itself, not the spare repeats take
    read = _sql_reads(monkeypatch)
    query = "warm water pump impeller"

    def exact(top_k: int = 5) -> bool:  # debug: never the results cache's answer
        read.clear()
        got = _keyword(principal, kb, query, top_k=top_k, debug=True)
        return [(r["chunk"], pytest.approx(r["score"], abs=1e-5)) for r in got] == _bm25(kb["id"], query)[:top_k]

    whole, real = [], term_blocks.BlockPostings.read  # the terms read whole (shared), not only some blocks
    monkeypatch.setattr(term_blocks.BlockPostings, "read", lambda self, asked: whole.extend(asked) or real(self, asked))
    assert exact() and read  # the first worker reads SQL's blocks and directories, and shares them
    first, shared = set(read), set(whole) | {r for r in read if r.startswith("directory:")}
    assert shared and first & shared
    for change in ("nothing", "the tail", "a compaction"):
        if change == "the tail":
            _ingest(kb["id"], "late.txt", "A late pump: warm water, water and a coral reef.")
            with connection() as conn:
                conn.execute("DELETE FROM documents WHERE id = %s", (ids["pumps.txt"],))  # voided in the blocks
        if change == "a compaction":  # the new version's blocks from SQL, then shared again
            _compact(kb["id"])
            postings_cache.CACHE.clear()
            assert exact() and set(read) & shared
        postings_cache.CACHE.clear()  # another worker, which has kept nothing
        assert exact() and read and not set(read) & shared, change  # only the blocks read one by one


def test_shared_blocks_that_cannot_be_read_are_read_from_sql(pumps, shared_everything, monkeypatch):
    import redis

    from chalicelib.kv import redis_client

    principal, kb, _ = pumps
    _compact(kb["id"])
    read = _sql_reads(monkeypatch)
    _exact_twice(principal, [kb["id"]], "water pump")
    keys = redis_client().keys(postings_cache.shared_key("*", kb["id"], "*", "*"))
    assert b"postings" in {k.split(b":")[5] for k in keys}
    for key in keys:  # cut short, as a value written half-way (or by other code) would be
        redis_client().set(key, redis_client().get(key)[:-1])
    postings_cache.CACHE.clear()
    read.clear()
    _exact_twice(principal, [kb["id"]], "water pump")
    assert "pump" in read

    class Down:
        def mget(self, keys):
            raise redis.ConnectionError("Redis is down")

        def pipeline(self, transaction):
            raise redis.ConnectionError("Redis is down")

    monkeypatch.setattr(postings_cache, "redis_client", lambda: Down())
    postings_cache.CACHE.clear()
    read.clear()
    _exact_twice(principal, [kb["id"]], "water pump")
    assert "pump" in read


def test_blocks_versions_are_drawn_at_random_not_from_a_sequence(pumps):
    """Shared blocks are keyed by version: another database behind the same Redis (a restore
    of this one) must not draw the versions this one drew (migration 0032)."""
    principal, kb, _ = pumps
    seen = {_version(kb["id"])}
    for _ in range(4):
        _compact(kb["id"])
        with connection() as conn:  # rewritten in place, as a repack does
            conn.execute(_TO_0026, {"kb": kb["id"]})
        seen.add(_version(kb["id"]))
    assert len(seen) == 5 and min(seen) >= 0
    steps = {b - a for a, b in zip(sorted(seen), sorted(seen)[1:])}
    assert min(steps) > 1000  # drawn from 2**63, not consecutive
    with connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM pg_class WHERE relname = 'kb_blocks_version'").fetchone()["n"] == 0


def test_only_a_snapshot_gets_versions_and_a_new_connection_forgets_what_was_kept(pumps):
    """Under read committed (a caller's own transaction) a compaction could commit between
    the version's read and the blocks': no version, every block from SQL."""
    from chalicelib.storage import db

    principal, kb, _ = pumps
    _compact(kb["id"])
    _keyword(principal, kb, "water pump", debug=True)
    with connection() as conn, conn.transaction():
        assert terms.statistics(conn, [kb["id"]], ["pump"]).blocks_versions == {}
    with db.snapshot() as conn:
        assert terms.statistics(conn, [kb["id"]], ["pump"]).blocks_versions == {kb["id"]: _version(kb["id"])}
    assert postings_cache.CACHE.size > 0
    db.reset()
    with connection() as conn:
        conn.execute("SELECT 1")
    assert postings_cache.CACHE.size == 0


def test_another_organisation_gets_no_version_to_read_kept_blocks_under(pumps, database_url):
    """Kept blocks are read only under a version the search's own statistics gave it (the
    versions are the permission to read them), and those are read under row-level security:
    connected as the functions' role, kb_app."""
    import psycopg
    from psycopg.rows import dict_row

    from chalicelib.storage.db import functions_login

    principal, kb, _ = pumps
    _compact(kb["id"])
    _keyword(principal, kb, "water pump", debug=True)
    assert any(key[:2] == ("postings", kb["id"]) for key in list(postings_cache.CACHE._entries))
    for org, versions in ((principal.org_id, {kb["id"]: _version(kb["id"])}), ("org-elsewhere", {})):
        with psycopg.connect(functions_login(database_url), row_factory=dict_row) as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # as a search reads
            conn.execute("SELECT set_config('kb.org_id', %s, false)", (org,))
            stats = terms.statistics(conn, [kb["id"]], ["pump"])
            assert stats.blocks_versions == versions
            found = term_blocks.BlockPostings(conn, [kb["id"]], (), stats.blocks_versions).read(["pump"])
            assert bool(found) == bool(versions)


def test_a_deeper_list_than_asked_is_exact_to_its_depth(pumps):
    """Hybrid search reads a keyword list deeper than its top_k: exact to that depth."""
    from chalicelib.retrieval.search import _bm25 as keyword_list
    from chalicelib.storage import acting_for, snapshot

    principal, kb, _ = pumps
    for i in range(10):
        _ingest(kb["id"], f"reef{i}.txt", f"Coral reef {i} grows slowly in warm shallow seas.")
    _compact(kb["id"])
    request = SearchRequest((kb["id"],), "water pump", 1, strategy="hybrid")
    with acting_for(principal.org_id, principal.user_id), snapshot() as conn:
        rows, _ = keyword_list(conn, principal, request, [kb["id"]], pool=4)
    want = _bm25(kb["id"], "water pump")[:4]
    assert [(r.chunk_id, pytest.approx(r.keyword, abs=1e-5)) for r in rows] == want


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
        document_status.set_chunk_metadata(conn, ids["long.txt"], {"team": "plant"})
    monkeypatch.setattr(bm25, "DEEPER", 1)  # no deeper ranking: every match is scored
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
    query = bm25.query(stats, words)
    assert len(query.terms) == bm25.TERMS_MAX < len(stats.document_frequency)
    assert min(query.idfs) >= max(math.log(1 + (stats.chunks - df + 0.5) / (df + 0.5))
                                  for t, df in stats.document_frequency.items() if t not in query.terms)
    assert _keyword(principal, kb, question)


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

    done = threading.Event()

    def compact():  # folding the tail all along, as stores in other workers would
        try:
            with open_connection(os.environ["DATABASE_URL"]) as conn:
                while not done.is_set():
                    terms.compact(conn, kb["id"], 2)
        except Exception as err:
            errors.append(err)

    workers = [threading.Thread(target=store, args=(range(k, 12, 3),)) for k in range(3)]
    folder = threading.Thread(target=compact)
    for w in workers + [folder]:
        w.start()
    for w in workers:
        w.join()
    done.set()
    folder.join()
    assert errors == []
    _assert_in_step(kb["id"])
    assert _stored(kb["id"])["chunks"] == 12


def test_a_store_folds_a_long_tail_into_blocks(pumps, monkeypatch):
    principal, kb, _ = pumps
    monkeypatch.setattr(indexing, "TAIL_MAX", 10)
    assert _stored(kb["id"])["tail"] > 10
    indexing.after_store(kb["id"])  # what the pipeline's Store step and a new entry run
    stored = _stored(kb["id"])
    assert stored["tail"] == 0 and stored["blocks"] > 0
    _assert_in_step(kb["id"])


# A knowledge base's blocks rewritten as migration 0026's compaction wrote them.
_TO_0026 = """UPDATE term_blocks b SET id_bytes = 0, tf_bytes = 2, dl_bytes = 4, ids = o.ids, tfs = o.tfs, dls = o.dls
  FROM (SELECT t.term, t.first_id, string_agg(int8send(u.id), ''::bytea ORDER BY u.id) AS ids,
               string_agg(int2send(least(u.tf, 32767)::smallint), ''::bytea ORDER BY u.id) AS tfs,
               string_agg(int4send(u.dl::integer), ''::bytea ORDER BY u.id) AS dls
          FROM term_blocks t CROSS JOIN LATERAL
               kb_bm25_unpack(t.first_id, t.id_bytes, t.tf_bytes, t.dl_bytes, t.ids, t.tfs, t.dls) u
         WHERE t.kb_id = %(kb)s GROUP BY t.term, t.first_id) o
 WHERE b.kb_id = %(kb)s AND b.term = o.term AND b.first_id = o.first_id"""


def _old_blocks(kb_id: str) -> int:
    with connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM term_blocks WHERE kb_id = %s AND id_bytes = 0",
                            (kb_id,)).fetchone()["n"]


def test_blocks_in_0026s_layout_are_read_as_they_are_until_packed_after_the_migrations(pumps, monkeypatch):
    """Migration 0027 leaves 0026's blocks as they are (repacking them in the migration took
    177 s at a million chunks, of the migration function's 300): searches and compactions read
    them, each store's fold_tail packs a batch, and the migration function the rest (0028)."""
    from chalicelib import limits
    from chalicelib.storage.migrate import repack_old_blocks

    principal, kb, ids = pumps
    _compact(kb["id"])
    with connection() as conn:
        old = conn.execute(_TO_0026, {"kb": kb["id"]}).rowcount
    assert old == _old_blocks(kb["id"]) > 10
    _assert_in_step(kb["id"], old_layout=True)
    for query in ("pump impeller", "centrifugal pump water"):
        assert [r["chunk"] for r in _keyword(principal, kb, query)] == [c for c, _ in _bm25(kb["id"], query)]
    _ingest(kb["id"], "late.txt", "A late pump: water and an impeller.")  # in the tail
    with connection() as conn:
        conn.execute("DELETE FROM documents WHERE id = %s", (ids["garden.txt"],))  # voided in old blocks
    _compact(kb["id"])  # merges the tail into old blocks, and writes those packed
    _assert_in_step(kb["id"], old_layout=True)
    left = _old_blocks(kb["id"])
    assert 3 < left < old
    with open_connection(os.environ["DATABASE_URL"]) as compaction, compaction.transaction():  # a compaction's lock: no wait, nothing packed
        compaction.execute("SELECT pg_advisory_xact_lock(kb_bm25_lock(%s))", (kb["id"],))
        with connection() as conn:
            assert terms.repack(conn, kb["id"], 100) == 0
    assert _old_blocks(kb["id"]) == left
    monkeypatch.setattr(limits, "BM25_REPACK_BLOCKS", 3)
    indexing.fold_tail(kb["id"])  # what every store runs: a batch packed
    assert _old_blocks(kb["id"]) == left - 3
    assert repack_old_blocks(os.environ["DATABASE_URL"]) >= left - 3
    assert _old_blocks(kb["id"]) == 0
    with connection() as conn:
        assert kb["id"] not in terms.with_old_blocks(conn)
    _assert_in_step(kb["id"])  # every column in its fewest bytes
    for query in ("impeller pump", "water centrifugal pump", "late impeller"):  # not in the results cache
        got = _keyword(principal, kb, query)
        want = _bm25(kb["id"], query)
        assert [(r["chunk"], pytest.approx(r["score"], abs=1e-5)) for r in got] == want


def _in_0026s_layout(block: tuple) -> dict:
    """A block as migration 0026 wrote it: ids whole in 8 bytes, frequencies in 2, lengths in 4."""
    ids, tfs, dls = block
    return {"first_id": int(ids[0]), "n": len(ids), "id_bytes": 0, "tf_bytes": 2, "dl_bytes": 4,
            "packed_ids": ids.astype(">i8").tobytes(), "packed_tfs": np.minimum(tfs, 32_767).astype(">i2").tobytes(),
            "packed_dls": dls.astype(">i4").tobytes()}


@pytest.mark.parametrize("seed", range(4))
def test_blocks_packed_in_sql_read_back_the_same_in_numpy(seed, service_env):
    """kb_bm25_pack (migration 0027) against postings.unpacked: blocks whose id steps, frequencies
    and lengths need 1, 2, 4 or 8 bytes, and blocks in 0026's layout among them, joined as a
    search joins them; and kb_bm25_unpack, the compaction's reading, gives the same postings."""
    rng = np.random.default_rng(seed)
    blocks = []
    first = int(rng.integers(1, 1_000))
    for _ in range(6):
        n = int(rng.integers(1, terms.BLOCK + 1))
        largest_step = int(rng.choice([200, 60_000, 4_000_000_000, 2**40]))
        ids = first + np.concatenate([[0], np.cumsum(rng.integers(1, largest_step, size=n - 1))]).astype(np.int64)
        tfs = rng.integers(1, int(rng.choice([3, 300, 32_767])), size=n).astype(float)
        dls = np.maximum(tfs, rng.integers(1, int(rng.choice([250, 60_000, 100_000])), size=n)).astype(float)
        blocks.append((ids, tfs, dls))
        first = int(ids[-1]) + int(rng.integers(1, 1_000))
    with connection() as conn, conn.cursor(binary=True) as cur:
        rows = [cur.execute("SELECT * FROM kb_bm25_pack(%s::bigint[], %s::real[], %s::real[])",
                            (ids.tolist(), tfs.tolist(), dls.tolist())).fetchone() for ids, tfs, dls in blocks]
        # Some blocks as 0026 wrote them, not yet repacked (migration 0028): each id whole.
        rows = [r if i % 3 else _in_0026s_layout(b) for i, (r, b) in enumerate(zip(rows, blocks))]
        unpacked_in_sql = [cur.execute("SELECT id, tf, dl FROM kb_bm25_unpack(%s, %s, %s, %s, %s, %s, %s)",
                                       (r["first_id"], r["id_bytes"], r["tf_bytes"], r["dl_bytes"], r["packed_ids"],
                                        r["packed_tfs"], r["packed_dls"])).fetchall() for r in rows]
    assert len({(r["id_bytes"], r["tf_bytes"], r["dl_bytes"]) for r in rows}) > 2  # mixed widths and layouts
    layout = b"".join(int(v).to_bytes(2, "big") for r in rows
                      for v in (r["n"], r["id_bytes"], r["tf_bytes"], r["dl_bytes"]))
    got = postings.unpacked(b"".join(r["first_id"].to_bytes(8, "big") for r in rows), layout,
                         b"".join(r["packed_ids"] for r in rows), b"".join(r["packed_tfs"] for r in rows),
                         b"".join(r["packed_dls"] for r in rows))
    assert got.ids.tolist() == np.concatenate([b[0] for b in blocks]).tolist()
    assert got.tfs.tolist() == np.concatenate([b[1] for b in blocks]).tolist()
    assert got.dls.tolist() == np.concatenate([b[2] for b in blocks]).tolist()
    for (ids, tfs, dls), back in zip(blocks, unpacked_in_sql):
        assert [(r["id"], r["tf"], r["dl"]) for r in back] == list(zip(ids.tolist(), tfs.tolist(), dls.tolist()))
