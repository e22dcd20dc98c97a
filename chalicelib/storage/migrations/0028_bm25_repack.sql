-- The blocks 0026 wrote, packed after the deployment rather than inside its migration (0027).
--
-- Until then they read as they are: id_bytes 0 means each id whole, in 8 bytes, where the
-- packed layout keeps its difference from the one before. kb_bm25_repack packs a batch of a
-- knowledge base's old blocks in one short transaction; storage/migrate.py calls it after the
-- migrations until none is left or its time is up, and every store's fold_tail packs a batch
-- of its knowledge base's (retrieval/bm25.py), so what one deployment leaves is not left for good.

CREATE OR REPLACE FUNCTION kb_bm25_unpack(first_id bigint, id_bytes smallint, tf_bytes smallint, dl_bytes smallint,
                                          ids bytea, tfs bytea, dls bytea) RETURNS TABLE (id bigint, tf real, dl real)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN id_bytes = 0 THEN kb_bm25_value(ids, i, 8::smallint)
                ELSE first_id + (sum(kb_bm25_value(ids, i, id_bytes)) OVER (ORDER BY i))::bigint END,
           kb_bm25_value(tfs, i, tf_bytes)::real, kb_bm25_value(dls, i, dl_bytes)::real
      FROM generate_series(0, length(ids) / (CASE WHEN id_bytes = 0 THEN 8 ELSE id_bytes END) - 1) i
$$;

-- Empty once every block is packed: finding a knowledge base's old blocks costs nothing then.
CREATE INDEX term_blocks_unpacked ON term_blocks (kb_id) WHERE id_bytes = 0;

-- Packs up to `most` of the knowledge base's old blocks; returns how many, 0 also while a
-- compaction holds or awaits the knowledge base's BM25 lock (never a wait: the migration
-- function has a deadline). The lock is taken shared, as a store takes it: a compaction,
-- which rewrites the same rows, takes it alone; stores write only the tail. Two repacks of
-- one block write the same bytes.
CREATE FUNCTION kb_bm25_repack(kb text, most integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    repacked integer;
BEGIN
    -- every store asks (fold_tail): with nothing to pack, one look at an empty index
    IF NOT EXISTS (SELECT 1 FROM term_blocks b WHERE b.kb_id = kb AND b.id_bytes = 0) THEN
        RETURN 0;
    END IF;
    IF NOT pg_try_advisory_xact_lock_shared(kb_bm25_lock(kb)) THEN
        RETURN 0;
    END IF;
    WITH old AS (
        SELECT b.term, b.first_id, b.id_bytes, b.tf_bytes, b.dl_bytes, b.ids, b.tfs, b.dls
          FROM term_blocks b WHERE b.kb_id = kb AND b.id_bytes = 0 LIMIT most),
    packed AS (
        SELECT o.term, o.first_id, p.id_bytes, p.tf_bytes, p.dl_bytes, p.packed_ids, p.packed_tfs, p.packed_dls
          FROM old o
         CROSS JOIN LATERAL (
               SELECT array_agg(u.id ORDER BY u.id) AS ids, array_agg(u.tf ORDER BY u.id) AS tfs,
                      array_agg(u.dl ORDER BY u.id) AS dls
                 FROM kb_bm25_unpack(o.first_id, o.id_bytes, o.tf_bytes, o.dl_bytes, o.ids, o.tfs, o.dls) u) a
         CROSS JOIN LATERAL kb_bm25_pack(a.ids, a.tfs, a.dls) p)
    UPDATE term_blocks b
       SET id_bytes = p.id_bytes, tf_bytes = p.tf_bytes, dl_bytes = p.dl_bytes,
           ids = p.packed_ids, tfs = p.packed_tfs, dls = p.packed_dls
      FROM packed p
     WHERE b.kb_id = kb AND b.term = p.term AND b.first_id = p.first_id;
    GET DIAGNOSTICS repacked = ROW_COUNT;
    RETURN repacked;
END $$;

REVOKE ALL ON FUNCTION kb_bm25_repack(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kb_bm25_repack(text, integer) TO kb_app;
