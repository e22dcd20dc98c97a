-- Term blocks packed, and their directory read from an index (issue 30).
--
-- At a million chunks a search's time went mostly to moving postings: 14 bytes each (int8 id,
-- int2 frequency, int4 length). Reading 'year' whole (90,549 postings, 1.3 MB) took 5.7 ms as
-- kb_app, and 2.1 ms at 5 bytes a posting; on AWS the bytes cross a network. A block now
-- keeps each id as its difference from the one before (the first 0: first_id itself), and
-- each column in the fewest bytes its largest value needs (1, 2, 4 or 8, big-endian, given by
-- id_bytes, tf_bytes and dl_bytes): a common term's ids differ by tens, its frequencies are
-- 1 or 2 and chunks hold tens of terms, so most postings take 3 bytes.
--
-- A search reads the blocks' ranges and bounds (the directory) before any of their postings:
-- now from an index alone, not from the blocks' rows. A question's 3,627 directory rows took
-- 4.2 ms through the primary key's index and the table (956 buffers), 1.1 ms from this one.

-- The blocks 0026 wrote are not repacked here (edited after this migration first shipped: it
-- rebuilt every knowledge base, 177 s at a million chunks in one transaction, inside the
-- deployment's migration function, which has 300). Their layout reads as id_bytes 0 (each id
-- whole, in 8 bytes), tf_bytes 2 and dl_bytes 4, the defaults these columns are added with;
-- 0028's kb_bm25_repack packs them after the migrations, a batch a transaction.
ALTER TABLE term_blocks ADD COLUMN id_bytes smallint NOT NULL DEFAULT 0, ADD COLUMN tf_bytes smallint NOT NULL DEFAULT 2,
    ADD COLUMN dl_bytes smallint NOT NULL DEFAULT 4;
ALTER TABLE term_blocks ALTER COLUMN id_bytes DROP DEFAULT, ALTER COLUMN tf_bytes DROP DEFAULT,
    ALTER COLUMN dl_bytes DROP DEFAULT;

-- The fewest bytes (1, 2, 4 or 8) that hold a value of 0..v.
CREATE FUNCTION kb_bm25_width(v bigint) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (CASE WHEN v < 256 THEN 1 WHEN v < 65536 THEN 2 WHEN v < 4294967296 THEN 4 ELSE 8 END)::smallint
$$;

-- The value of `width` bytes at place i (from 0) of b, big-endian.
CREATE FUNCTION kb_bm25_value(b bytea, i integer, width smallint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ('x' || lpad(encode(substring(b FROM i * width + 1 FOR width), 'hex'), 16, '0'))::bit(64)::bigint
$$;

-- One block from its postings (ids ascending, at most a block's worth): its directory entry
-- and its three columns packed.
CREATE FUNCTION kb_bm25_pack(ids bigint[], tfs real[], dls real[])
RETURNS TABLE (first_id bigint, last_id bigint, n integer, max_tf real, min_dl real,
               id_bytes smallint, tf_bytes smallint, dl_bytes smallint, packed_ids bytea, packed_tfs bytea,
               packed_dls bytea)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH u AS (
        SELECT p.i, p.tf, p.dl, p.id - coalesce(lag(p.id) OVER (ORDER BY p.i), p.id) AS step,
               least(p.tf, 32767)::bigint AS tf_value, p.dl::bigint AS dl_value
          FROM unnest(ids, tfs, dls) WITH ORDINALITY p(id, tf, dl, i)),
    w AS (SELECT kb_bm25_width(max(step)) AS wi, kb_bm25_width(max(tf_value)) AS wt,
                 kb_bm25_width(max(dl_value)) AS wd FROM u)
    SELECT ids[1], ids[cardinality(ids)], cardinality(ids), max(u.tf), min(u.dl), w.wi, w.wt, w.wd,
           string_agg(substring(int8send(u.step) FROM 9 - w.wi), ''::bytea ORDER BY u.i),
           string_agg(substring(int8send(u.tf_value) FROM 9 - w.wt), ''::bytea ORDER BY u.i),
           string_agg(substring(int8send(u.dl_value) FROM 9 - w.wd), ''::bytea ORDER BY u.i)
      FROM u, w GROUP BY w.wi, w.wt, w.wd
$$;

-- A block's postings as rows (a compaction's merge, the tests' independent reading).
DROP FUNCTION kb_bm25_unpack(bytea, bytea, bytea);
CREATE FUNCTION kb_bm25_unpack(first_id bigint, id_bytes smallint, tf_bytes smallint, dl_bytes smallint,
                               ids bytea, tfs bytea, dls bytea) RETURNS TABLE (id bigint, tf real, dl real)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT first_id + (sum(kb_bm25_value(ids, i, id_bytes)) OVER (ORDER BY i))::bigint,
           kb_bm25_value(tfs, i, tf_bytes)::real, kb_bm25_value(dls, i, dl_bytes)::real
      FROM generate_series(0, length(ids) / id_bytes - 1) i
$$;

-- As in 0026, with the blocks packed.
CREATE OR REPLACE FUNCTION kb_bm25_compact(kb text, block integer) RETURNS bigint
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
        RETURNING b.term, b.first_id, b.id_bytes, b.tf_bytes, b.dl_bytes, b.ids, b.tfs, b.dls),
    postings AS (
        SELECT o.term, o.first_id AS origin, u.id, u.tf, u.dl
          FROM old o CROSS JOIN LATERAL kb_bm25_unpack(o.first_id, o.id_bytes, o.tf_bytes, o.dl_bytes, o.ids, o.tfs, o.dls) u
         WHERE NOT EXISTS (SELECT 1 FROM placed v WHERE v.sign < 0 AND v.term = o.term AND v.chunk_id = u.id)
        UNION ALL
        SELECT term, coalesce(origin, -1), chunk_id, tf, dl FROM placed WHERE sign > 0),
    numbered AS (
        SELECT p.*, (row_number() OVER (PARTITION BY p.term, p.origin ORDER BY p.id) - 1) / block AS k
          FROM postings p),
    grouped AS (
        SELECT term, array_agg(id ORDER BY id) AS ids, array_agg(tf ORDER BY id) AS tfs, array_agg(dl ORDER BY id) AS dls
          FROM numbered GROUP BY term, origin, k)
    INSERT INTO term_blocks (kb_id, term, first_id, last_id, n, max_tf, min_dl, id_bytes, tf_bytes, dl_bytes, ids, tfs, dls)
    SELECT kb, g.term, p.* FROM grouped g CROSS JOIN LATERAL kb_bm25_pack(g.ids, g.tfs, g.dls) p;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END $$;

CREATE OR REPLACE FUNCTION kb_bm25_rebuild(kb text, block integer DEFAULT 128) RETURNS void
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
        SELECT p.*, (row_number() OVER (PARTITION BY p.term ORDER BY p.id) - 1) / block AS k FROM postings p),
    grouped AS (
        SELECT term, array_agg(id ORDER BY id) AS ids, array_agg(tf ORDER BY id) AS tfs, array_agg(dl ORDER BY id) AS dls
          FROM numbered GROUP BY term, k)
    INSERT INTO term_blocks (kb_id, term, first_id, last_id, n, max_tf, min_dl, id_bytes, tf_bytes, dl_bytes, ids, tfs, dls)
    SELECT kb, g.term, p.* FROM grouped g CROSS JOIN LATERAL kb_bm25_pack(g.ids, g.tfs, g.dls) p;
    INSERT INTO kb_text_stats (kb_id, chunks, length)
    SELECT kb, count(*), coalesce(sum(dl), 0)
      FROM (SELECT c.id, (SELECT sum(y.tf) FROM kb_bm25_terms(c.tsv) y) AS dl FROM chunks c WHERE c.kb_id = kb) s
    HAVING count(*) > 0;
END $$;

CREATE INDEX term_blocks_directory ON term_blocks (kb_id, term, first_id) INCLUDE (last_id, max_tf, min_dl);

REVOKE ALL ON FUNCTION kb_bm25_unpack(bigint, smallint, smallint, smallint, bytea, bytea, bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION kb_bm25_pack(bigint[], real[], real[]) FROM PUBLIC;
