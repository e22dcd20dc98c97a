-- Blocks versions drawn at random (63 bits from gen_random_uuid, core since PostgreSQL 13)
-- instead of from a sequence: workers now share decoded postings through Redis under the
-- knowledge base and its version (storage/terms.py, SharedBlocks), and a database restored
-- from a snapshot, or any other one behind the same Redis, would draw the same sequence values
-- again for other blocks. Versions are only ever compared for equality.

CREATE FUNCTION kb_new_blocks_version() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT ('x' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16))::bit(64)::bigint & 9223372036854775807
$$;

ALTER TABLE kb_text_stats ALTER COLUMN blocks_version SET DEFAULT kb_new_blocks_version();

CREATE OR REPLACE FUNCTION kb_bm25_blocks_written() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE kb_text_stats s SET blocks_version = kb_new_blocks_version()
     WHERE s.kb_id IN (SELECT DISTINCT kb_id FROM changed);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION kb_bm25_blocks_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE kb_text_stats SET blocks_version = kb_new_blocks_version();
    RETURN NULL;
END $$;

-- The versions drawn from the sequence so far could be drawn again elsewhere: new ones (a
-- worker's kept blocks are read again from SQL once, as after any compaction).
UPDATE kb_text_stats SET blocks_version = kb_new_blocks_version();

DROP SEQUENCE kb_blocks_version;
