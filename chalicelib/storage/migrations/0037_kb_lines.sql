-- Lines repeated across the documents of a knowledge base (a footer "Part of the … suite",
-- a copyright line, a navigation strip) are dropped from chunks (chalicelib/ingestion/
-- common_lines.py). documents.line_hashes holds the distinct lines of a document's text as
-- it was last chunked (their hashes; 0 stands for the document itself), kb_lines how many
-- documents of the knowledge base hold each: a trigger keeps it when a document's lines
-- change and when it is deleted, whichever statement does it.
ALTER TABLE documents ADD COLUMN line_hashes bigint[];
-- Why a document that is PROCESSED has no chunks (a page of navigation alone).
ALTER TABLE documents ADD COLUMN note text;

CREATE TABLE kb_lines (
    kb_id      text NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    line_hash  bigint NOT NULL,
    documents  integer NOT NULL,
    PRIMARY KEY (kb_id, line_hash)
);

ALTER TABLE kb_lines ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON kb_lines FOR SELECT TO kb_app USING (kb_id IN (SELECT id FROM knowledge_bases));
CREATE POLICY writes ON kb_lines TO kb_app
    USING (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*'))
    WITH CHECK (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*'));

-- One statement a document, its rows in hash order: two documents sharing a footer line
-- update their rows in the same order and never deadlock.
CREATE FUNCTION kb_lines_follow_documents() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
DECLARE
    kb text := OLD.kb_id;
    added bigint[] := CASE WHEN TG_OP = 'UPDATE' THEN NEW.line_hashes END;
BEGIN
    -- A knowledge base being deleted takes its rows with it (ON DELETE CASCADE).
    IF TG_OP = 'DELETE' AND NOT EXISTS (SELECT 1 FROM knowledge_bases WHERE id = kb) THEN
        RETURN NULL;
    END IF;
    INSERT INTO kb_lines AS l (kb_id, line_hash, documents)
    SELECT kb, h, sum(d) FROM (
        SELECT unnest(coalesce(added, '{}')) AS h, 1 AS d
        UNION ALL SELECT unnest(coalesce(OLD.line_hashes, '{}')), -1) AS change
    GROUP BY h HAVING sum(d) <> 0 ORDER BY h
    ON CONFLICT (kb_id, line_hash) DO UPDATE SET documents = l.documents + EXCLUDED.documents;
    DELETE FROM kb_lines WHERE kb_id = kb AND line_hash = ANY(coalesce(OLD.line_hashes, '{}')) AND documents <= 0;
    RETURN NULL;
END $$;

CREATE TRIGGER documents_lines_to_kb_lines AFTER UPDATE ON documents FOR EACH ROW
    WHEN (OLD.line_hashes IS DISTINCT FROM NEW.line_hashes) EXECUTE FUNCTION kb_lines_follow_documents();
CREATE TRIGGER documents_lines_leave_kb_lines AFTER DELETE ON documents FOR EACH ROW
    WHEN (OLD.line_hashes IS NOT NULL) EXECUTE FUNCTION kb_lines_follow_documents();
