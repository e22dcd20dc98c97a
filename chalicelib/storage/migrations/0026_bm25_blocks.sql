-- Keyword search exact at a million chunks (issue 30).
--
-- Migration 0011's postings, one row each, cost ~1 us a posting to read: at a million chunks a
-- question's common words hold hundreds of thousands, so the search read at most 20,000 of them
-- by impact and found 0.470 of the exact BM25 top 10. Here a term's postings are packed into
-- blocks of up to 128, ordered by chunk id, a row each (term_blocks): the chunk ids, term
-- frequencies and chunk lengths as big-endian int8, int2 and int4 in three bytea, which the
-- server sends as they are stored and numpy reads without a copy per value (int8[] arrays,
-- tried first, cost ~1 us a posting to send: 30 ms for 30,000). A block of 128 stays inline
-- (under the 2 kB at which PostgreSQL moves values out of line), and its directory entry
-- (range, highest frequency, shortest chunk) bounds what it can add to a chunk, so a search
-- reads a common term's blocks only where they could change the top. The function scores
-- them (chalicelib/retrieval/bm25.py owns the constants, formulas and bounds), exactly.
--
-- chunk_terms keeps the postings written since the last compaction (the tail): the triggers
-- add a new chunk's postings there (sign 1); a removed chunk's postings leave the tail if they
-- are in it, else a row of sign -1 voids them in the blocks. kb_bm25_compact() folds a knowledge
-- base's tail into its blocks, rewriting only the blocks the tail's chunk ids fall in; the
-- function runs it after a store leaves more than bm25.TAIL_MAX postings in the tail.
-- A search reads blocks + tail, so it is exact at every moment. A compaction and the triggers
-- of the same knowledge base take one advisory lock (the compaction exclusively), so a
-- compaction never sees half of a store.

CREATE FUNCTION kb_bm25_lock(kb text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT hashtextextended('kb_bm25:' || kb, 0) $$;

CREATE TABLE term_blocks (
    kb_id     text NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    term      text NOT NULL,
    first_id  bigint NOT NULL,
    last_id   bigint NOT NULL,
    n         integer NOT NULL,
    max_tf    real NOT NULL,
    min_dl    real NOT NULL,
    ids       bytea NOT NULL,
    tfs       bytea NOT NULL,
    dls       bytea NOT NULL,
    PRIMARY KEY (kb_id, term, first_id)
);
-- Never compressed: pglz saves little on ids and would cost every read.
ALTER TABLE term_blocks ALTER COLUMN ids SET STORAGE EXTERNAL, ALTER COLUMN tfs SET STORAGE EXTERNAL,
    ALTER COLUMN dls SET STORAGE EXTERNAL;

-- A block's postings as rows (a compaction's merge).
CREATE FUNCTION kb_bm25_unpack(ids bytea, tfs bytea, dls bytea) RETURNS TABLE (id bigint, tf real, dl real)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ('x' || encode(substring(ids FROM i * 8 + 1 FOR 8), 'hex'))::bit(64)::bigint,
           ('x' || encode(substring(tfs FROM i * 2 + 1 FOR 2), 'hex'))::bit(16)::integer::real,
           ('x' || encode(substring(dls FROM i * 4 + 1 FOR 4), 'hex'))::bit(32)::integer::real
      FROM generate_series(0, length(ids) / 8 - 1) i
$$;

DROP INDEX IF EXISTS chunk_terms_by_impact;
ALTER TABLE chunk_terms DROP COLUMN impact;
ALTER TABLE chunk_terms ADD COLUMN sign smallint NOT NULL DEFAULT 1;
CREATE INDEX chunk_terms_tail ON chunk_terms (kb_id, term, chunk_id) INCLUDE (tf, dl, sign);

CREATE OR REPLACE FUNCTION kb_bm25_count(sign integer, ids bigint[], kb_ids text[], tsvs tsvector[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
#variable_conflict use_variable
BEGIN
    PERFORM pg_advisory_xact_lock_shared(kb_bm25_lock(k.kb_id))
       FROM (SELECT DISTINCT u AS kb_id FROM unnest(kb_ids) u ORDER BY 1) k;
    WITH changed AS MATERIALIZED (SELECT * FROM unnest(ids, kb_ids, tsvs) c(id, kb_id, tsv)),
    d AS MATERIALIZED (
        SELECT c.kb_id, c.id AS chunk_id, x.term, x.tf, sum(x.tf) OVER (PARTITION BY c.id) AS dl
          FROM changed c, kb_bm25_terms(c.tsv) x),
    added AS (
        INSERT INTO chunk_terms (kb_id, term, chunk_id, tf, dl, sign)
        SELECT kb_id, term, chunk_id, tf, dl, 1 FROM d WHERE sign > 0),
    -- A removed posting leaves the tail when it is there, else is voided in the blocks.
    dropped AS (
        DELETE FROM chunk_terms p USING d
         WHERE sign < 0 AND p.sign = 1 AND p.kb_id = d.kb_id AND p.term = d.term AND p.chunk_id = d.chunk_id
        RETURNING p.term, p.chunk_id),
    voided AS (
        INSERT INTO chunk_terms (kb_id, term, chunk_id, tf, dl, sign)
        SELECT d.kb_id, d.term, d.chunk_id, d.tf, d.dl, -1 FROM d
         WHERE sign < 0 AND NOT EXISTS (SELECT 1 FROM dropped x WHERE x.chunk_id = d.chunk_id AND x.term = d.term)
           AND EXISTS (SELECT 1 FROM knowledge_bases kb WHERE kb.id = d.kb_id)),
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
        min_dl = CASE WHEN sign > 0 THEN least(t.min_dl, excluded.min_dl) ELSE t.min_dl END;
END $$;

-- Folds the knowledge base's tail into its blocks and returns how many blocks it wrote.
-- The blocks whose range holds a chunk id of the tail are rewritten (a term's first block
-- reaches down to any id, its last up to any); `origin` keeps the postings of one old block,
-- and the tail's that fall in its range, together, so blocks stay disjoint ranges of at most
-- `block` postings, in chunk id order. One statement: no temporary table, which would pin
-- the connection to RDS Proxy.
CREATE FUNCTION kb_bm25_compact(kb text, block integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    written bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(kb_bm25_lock(kb));
    WITH tail AS MATERIALIZED (
        DELETE FROM chunk_terms WHERE kb_id = kb RETURNING term, chunk_id, tf, dl, sign),
    ranges AS MATERIALIZED (
        SELECT b.term, b.first_id,
               CASE WHEN lag(b.first_id) OVER w IS NOT NULL THEN b.first_id END AS lo,
               lead(b.first_id) OVER w - 1 AS hi
          FROM term_blocks b
         WHERE b.kb_id = kb AND b.term IN (SELECT DISTINCT term FROM tail)
        WINDOW w AS (PARTITION BY b.term ORDER BY b.first_id)),
    placed AS MATERIALIZED (
        SELECT t.*, r.first_id AS origin
          FROM tail t LEFT JOIN ranges r
            ON r.term = t.term AND (r.lo IS NULL OR t.chunk_id >= r.lo) AND (r.hi IS NULL OR t.chunk_id <= r.hi)),
    old AS MATERIALIZED (
        DELETE FROM term_blocks b
         WHERE b.kb_id = kb AND (b.term, b.first_id) IN (SELECT term, origin FROM placed WHERE origin IS NOT NULL)
        RETURNING b.term, b.first_id, b.ids, b.tfs, b.dls),
    postings AS (
        SELECT o.term, o.first_id AS origin, u.id, u.tf, u.dl
          FROM old o CROSS JOIN LATERAL kb_bm25_unpack(o.ids, o.tfs, o.dls) u
         WHERE NOT EXISTS (SELECT 1 FROM placed v WHERE v.sign < 0 AND v.term = o.term AND v.chunk_id = u.id)
        UNION ALL
        SELECT term, coalesce(origin, -1), chunk_id, tf, dl FROM placed WHERE sign > 0),
    numbered AS (
        SELECT p.*, (row_number() OVER (PARTITION BY p.term, p.origin ORDER BY p.id) - 1) / block AS k
          FROM postings p)
    INSERT INTO term_blocks (kb_id, term, first_id, last_id, n, max_tf, min_dl, ids, tfs, dls)
    SELECT kb, term, min(id), max(id), count(*), max(tf), min(dl),
           string_agg(int8send(id), ''::bytea ORDER BY id),
           string_agg(int2send(least(tf, 32767)::smallint), ''::bytea ORDER BY id),
           string_agg(int4send(dl::integer), ''::bytea ORDER BY id)
      FROM numbered GROUP BY term, origin, k;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END $$;

-- A knowledge base's blocks and statistics recomputed from its chunks (this migration's
-- backfill, and bulk loads that disable the triggers).
CREATE FUNCTION kb_bm25_rebuild(kb text, block integer DEFAULT 128) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(kb_bm25_lock(kb));
    DELETE FROM chunk_terms WHERE kb_id = kb;
    DELETE FROM term_blocks WHERE kb_id = kb;
    DELETE FROM kb_terms WHERE kb_id = kb;
    DELETE FROM kb_text_stats WHERE kb_id = kb;
    WITH postings AS MATERIALIZED (
        SELECT x.term, c.id, x.tf, l.dl
          FROM chunks c
         CROSS JOIN LATERAL (SELECT sum(y.tf)::real AS dl FROM kb_bm25_terms(c.tsv) y) l
         CROSS JOIN LATERAL kb_bm25_terms(c.tsv) x
         WHERE c.kb_id = kb),
    term_rows AS (
        INSERT INTO kb_terms (kb_id, term, df, max_tf, min_dl)
        SELECT kb, term, count(*), max(tf), min(dl) FROM postings GROUP BY term),
    numbered AS (
        SELECT p.*, (row_number() OVER (PARTITION BY p.term ORDER BY p.id) - 1) / block AS k FROM postings p)
    INSERT INTO term_blocks (kb_id, term, first_id, last_id, n, max_tf, min_dl, ids, tfs, dls)
    SELECT kb, term, min(id), max(id), count(*), max(tf), min(dl),
           string_agg(int8send(id), ''::bytea ORDER BY id),
           string_agg(int2send(least(tf, 32767)::smallint), ''::bytea ORDER BY id),
           string_agg(int4send(dl::integer), ''::bytea ORDER BY id)
      FROM numbered GROUP BY term, k;
    INSERT INTO kb_text_stats (kb_id, chunks, length)
    SELECT kb, count(*), coalesce(sum(dl), 0)
      FROM (SELECT c.id, (SELECT sum(y.tf) FROM kb_bm25_terms(c.tsv) y) AS dl FROM chunks c WHERE c.kb_id = kb) s
    HAVING count(*) > 0;
END $$;

DROP FUNCTION kb_bm25_rebuild(text);
DROP FUNCTION kb_bm25_impact(real, real);
REVOKE ALL ON FUNCTION kb_bm25_rebuild(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION kb_bm25_compact(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kb_bm25_compact(text, integer) TO kb_app;

SELECT kb_bm25_rebuild(id) FROM knowledge_bases;
REVOKE ALL ON FUNCTION kb_bm25_unpack(bytea, bytea, bytea) FROM PUBLIC;

REVOKE INSERT, UPDATE, DELETE ON term_blocks FROM kb_app;
GRANT SELECT ON term_blocks TO kb_app;
ALTER TABLE term_blocks ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON term_blocks FOR SELECT TO kb_app USING (kb_id IN (SELECT id FROM knowledge_bases));
