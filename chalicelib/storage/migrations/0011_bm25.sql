-- Keyword search ranks by BM25 (issue 12) and answers from a small candidate set.
--
-- ts_rank ranked every chunk that shared a word with the question: 1.5 s at a million
-- chunks, and it has no inverse document frequency. BM25 needs, per knowledge base, the
-- number of chunks and their average length, each term's document frequency, and per
-- chunk each term's frequency and the chunk's length. chunk_terms holds the last as
-- postings ordered by impact within each (knowledge base, term), so a query reads the
-- few hundred most promising chunks of each of its terms from a btree (equality, which
-- is leakproof, so the index also serves under row-level security) instead of ranking
-- every match.
--
-- Triggers on chunks keep all three right as chunks come and go, in the writer's
-- transaction: no rebuild per ingest. kb_bm25_rebuild() recomputes a knowledge base from
-- its chunks (this migration's backfill, and bulk loads that disable the triggers).

-- A term's weighted frequency in a chunk: an occurrence in the title (weight A) counts
-- twice. The length of a chunk is the sum over its terms (stop words are not terms).
-- Not STRICT, so the planner inlines it: scoring 500 candidates took 8 ms instead of 23.
CREATE FUNCTION kb_bm25_terms(tsv tsvector) RETURNS TABLE (term text, tf real)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT u.lexeme, (cardinality(u.positions) + cardinality(array_positions(u.weights, 'A')))::real
      FROM unnest(tsv) u
$$;

-- The order of a term's postings: BM25's term-frequency factor (k1 1.2, b 0.75) for a
-- knowledge base whose chunks average 100 terms. Only the order of the candidates uses
-- it; the score uses the knowledge base's own average, as it is when the query runs.
CREATE FUNCTION kb_bm25_impact(tf real, dl real) RETURNS real
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (tf / (tf + 1.2 * (0.25 + 0.75 * dl / 100.0)))::real
$$;

-- No foreign keys: the triggers below remove a chunk's postings with the chunk, and a
-- check per posting would double the cost of a bulk load.
CREATE TABLE chunk_terms (
    kb_id     text NOT NULL,
    term      text NOT NULL,
    impact    real NOT NULL,
    chunk_id  bigint NOT NULL,
    tf        real NOT NULL,
    dl        real NOT NULL
);
CREATE INDEX chunk_terms_by_impact ON chunk_terms (kb_id, term, impact DESC, chunk_id) INCLUDE (tf, dl);

-- df: how many chunks hold the term. max_tf and min_dl bound what the term can add to a
-- chunk's score (BM25 grows with tf and falls with length); they only ever widen, so
-- they stay true bounds as chunks leave.
CREATE TABLE kb_terms (
    kb_id   text NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    term    text NOT NULL,
    df      bigint NOT NULL,
    max_tf  real NOT NULL,
    min_dl  real NOT NULL,
    PRIMARY KEY (kb_id, term)
);

CREATE TABLE kb_text_stats (
    kb_id   text PRIMARY KEY REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    chunks  bigint NOT NULL,
    length  double precision NOT NULL
);

-- The postings and statistics of chunks added (sign 1) or removed (sign -1). The
-- statistics rows are updated in (kb_id, term) order, so two documents stored at once
-- in one knowledge base wait for each other instead of deadlocking; a knowledge base
-- deleted in the same transaction is skipped (its rows go with it). The triggers pass
-- their transition tables' ids, knowledge bases and tsvectors as arrays: a function they
-- call cannot read those tables (and the embeddings need not be copied).
CREATE FUNCTION kb_bm25_count(sign integer, ids bigint[], kb_ids text[], tsvs tsvector[]) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH changed AS MATERIALIZED (SELECT * FROM unnest(ids, kb_ids, tsvs) c(id, kb_id, tsv)),
    d AS MATERIALIZED (
        SELECT c.kb_id, c.id AS chunk_id, x.term, x.tf, sum(x.tf) OVER (PARTITION BY c.id) AS dl
          FROM changed c, kb_bm25_terms(c.tsv) x),
    added AS (
        INSERT INTO chunk_terms (kb_id, term, impact, chunk_id, tf, dl)
        SELECT kb_id, term, kb_bm25_impact(tf, dl), chunk_id, tf, dl FROM d WHERE sign > 0),
    removed AS (
        DELETE FROM chunk_terms p USING d
         WHERE sign < 0 AND p.kb_id = d.kb_id AND p.term = d.term
           AND p.impact = kb_bm25_impact(d.tf, d.dl) AND p.chunk_id = d.chunk_id),
    totals AS (
        INSERT INTO kb_text_stats AS s (kb_id, chunks, length)
        SELECT c.kb_id, sign * count(*), sign * coalesce(sum(l.dl), 0)
          FROM changed c
          LEFT JOIN (SELECT chunk_id, sum(tf) AS dl FROM d GROUP BY chunk_id) l ON l.chunk_id = c.id
         WHERE EXISTS (SELECT 1 FROM knowledge_bases kb WHERE kb.id = c.kb_id)
         GROUP BY c.kb_id ORDER BY c.kb_id
        ON CONFLICT (kb_id) DO UPDATE SET chunks = s.chunks + excluded.chunks, length = s.length + excluded.length)
    INSERT INTO kb_terms AS t (kb_id, term, df, max_tf, min_dl)
    SELECT d.kb_id, d.term, sign * count(*), max(d.tf), min(d.dl) FROM d
     WHERE EXISTS (SELECT 1 FROM knowledge_bases kb WHERE kb.id = d.kb_id)
     GROUP BY d.kb_id, d.term ORDER BY d.kb_id, d.term
    ON CONFLICT (kb_id, term) DO UPDATE SET df = t.df + excluded.df,
        max_tf = CASE WHEN sign > 0 THEN greatest(t.max_tf, excluded.max_tf) ELSE t.max_tf END,
        min_dl = CASE WHEN sign > 0 THEN least(t.min_dl, excluded.min_dl) ELSE t.min_dl END
$$;

CREATE FUNCTION kb_bm25_chunks_added() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM kb_bm25_count(1, array_agg(n.id), array_agg(n.kb_id), array_agg(n.tsv)) FROM kb_bm25_new n;
    RETURN NULL;
END $$;

CREATE FUNCTION kb_bm25_chunks_removed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM kb_bm25_count(-1, array_agg(o.id), array_agg(o.kb_id), array_agg(o.tsv)) FROM kb_bm25_old o;
    RETURN NULL;
END $$;

-- Only rows whose text changed: a metadata update leaves the statistics alone.
CREATE FUNCTION kb_bm25_chunks_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM kb_bm25_count(-1, array_agg(o.id), array_agg(o.kb_id), array_agg(o.tsv))
       FROM kb_bm25_old o JOIN kb_bm25_new n ON n.id = o.id
      WHERE n.tsv IS DISTINCT FROM o.tsv OR n.kb_id <> o.kb_id;
    PERFORM kb_bm25_count(1, array_agg(n.id), array_agg(n.kb_id), array_agg(n.tsv))
       FROM kb_bm25_new n JOIN kb_bm25_old o ON o.id = n.id
      WHERE n.tsv IS DISTINCT FROM o.tsv OR n.kb_id <> o.kb_id;
    RETURN NULL;
END $$;

CREATE TRIGGER kb_bm25_added AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS kb_bm25_new FOR EACH STATEMENT EXECUTE FUNCTION kb_bm25_chunks_added();
CREATE TRIGGER kb_bm25_removed AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS kb_bm25_old FOR EACH STATEMENT EXECUTE FUNCTION kb_bm25_chunks_removed();
CREATE TRIGGER kb_bm25_changed AFTER UPDATE ON chunks
    REFERENCING OLD TABLE AS kb_bm25_old NEW TABLE AS kb_bm25_new
    FOR EACH STATEMENT EXECUTE FUNCTION kb_bm25_chunks_changed();

-- A knowledge base's postings and statistics recomputed from its chunks.
CREATE FUNCTION kb_bm25_rebuild(kb text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    DELETE FROM chunk_terms WHERE kb_id = kb;
    DELETE FROM kb_terms WHERE kb_id = kb;
    DELETE FROM kb_text_stats WHERE kb_id = kb;
    INSERT INTO chunk_terms (kb_id, term, impact, chunk_id, tf, dl)
    SELECT c.kb_id, x.term, kb_bm25_impact(x.tf, l.dl), c.id, x.tf, l.dl
      FROM chunks c
     CROSS JOIN LATERAL (SELECT sum(y.tf)::real AS dl FROM kb_bm25_terms(c.tsv) y) l
     CROSS JOIN LATERAL kb_bm25_terms(c.tsv) x
     WHERE c.kb_id = kb;
    INSERT INTO kb_terms (kb_id, term, df, max_tf, min_dl)
    SELECT kb_id, term, count(*), max(tf), min(dl) FROM chunk_terms WHERE kb_id = kb GROUP BY kb_id, term;
    INSERT INTO kb_text_stats (kb_id, chunks, length)
    SELECT kb, count(*), coalesce(sum(dl), 0)
      FROM (SELECT c.id, (SELECT sum(y.tf) FROM kb_bm25_terms(c.tsv) y) AS dl FROM chunks c WHERE c.kb_id = kb) s
    HAVING count(*) > 0;
END $$;
REVOKE ALL ON FUNCTION kb_bm25_rebuild(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION kb_bm25_count(integer, bigint[], text[], tsvector[]) FROM PUBLIC;

SELECT kb_bm25_rebuild(id) FROM knowledge_bases;

-- kb_app reads them; only the triggers (running as this migration's role) write them.
REVOKE INSERT, UPDATE, DELETE ON chunk_terms, kb_terms, kb_text_stats FROM kb_app;
GRANT SELECT ON chunk_terms, kb_terms, kb_text_stats TO kb_app;
ALTER TABLE chunk_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE kb_text_stats ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON chunk_terms FOR SELECT TO kb_app USING (kb_id IN (SELECT id FROM knowledge_bases));
CREATE POLICY reads ON kb_terms FOR SELECT TO kb_app USING (kb_id IN (SELECT id FROM knowledge_bases));
CREATE POLICY reads ON kb_text_stats FOR SELECT TO kb_app USING (kb_id IN (SELECT id FROM knowledge_bases));
