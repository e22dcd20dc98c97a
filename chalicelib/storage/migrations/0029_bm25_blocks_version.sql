-- A version of each knowledge base's BM25 blocks, which the service keeps decoded postings
-- under (storage/terms.py, PostingsCache): it changes whenever a block is written, rewritten
-- or removed (a compaction, a rebuild, a repack, a truncation), so postings kept under it are
-- exactly the blocks a snapshot that reads the same version sees. Values come from a sequence
-- and never repeat, also where a rebuild deletes and re-inserts the statistics row.

CREATE SEQUENCE kb_blocks_version;

-- A volatile default: each existing knowledge base gets its own value (kb_text_stats holds a
-- row per knowledge base, so the rewrite is short).
ALTER TABLE kb_text_stats ADD COLUMN blocks_version bigint NOT NULL DEFAULT nextval('kb_blocks_version');

CREATE FUNCTION kb_bm25_blocks_written() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE kb_text_stats s SET blocks_version = nextval('kb_blocks_version')
     WHERE s.kb_id IN (SELECT DISTINCT kb_id FROM changed);
    RETURN NULL;
END $$;

-- Once a statement, for the knowledge bases it touched (a compaction writes thousands of rows).
CREATE TRIGGER term_blocks_inserted AFTER INSERT ON term_blocks REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION kb_bm25_blocks_written();
CREATE TRIGGER term_blocks_deleted AFTER DELETE ON term_blocks REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION kb_bm25_blocks_written();
-- A repack keeps the postings, but nothing holds a later UPDATE to that.
CREATE TRIGGER term_blocks_updated AFTER UPDATE ON term_blocks REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION kb_bm25_blocks_written();

CREATE FUNCTION kb_bm25_blocks_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE kb_text_stats SET blocks_version = nextval('kb_blocks_version');
    RETURN NULL;
END $$;

CREATE TRIGGER term_blocks_truncated AFTER TRUNCATE ON term_blocks
    FOR EACH STATEMENT EXECUTE FUNCTION kb_bm25_blocks_truncated();

REVOKE ALL ON FUNCTION kb_bm25_blocks_written() FROM PUBLIC;
REVOKE ALL ON FUNCTION kb_bm25_blocks_truncated() FROM PUBLIC;
