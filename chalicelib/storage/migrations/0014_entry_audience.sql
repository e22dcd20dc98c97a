-- Entry levels on every read path (issue 29). An entry below public reaches only its
-- audience: an individual one (or one posted directly, without a level) the user who
-- wrote it, an organisation one the organisation of its knowledge base. Until now only
-- knowledge_search asked; search, /query, document lists and gets, and de-duplication
-- answered anybody who could read the knowledge base, another organisation's viewer of a
-- public one included.
--
-- `audience` says it on the row itself, documents and chunks alike: NULL for files and
-- public entries (whoever reads the knowledge base), 'user:<id>' or 'org:<id>' otherwise.
-- On chunks it is a plain column the search's single-table scans test per row (no join
-- to documents inside the HNSW or BM25 scan, whose plans the comments of chunks.py
-- explain). The database keeps it: a trigger sets the document's from its kind, level
-- and writer, and carries a change to the document's chunks; chunks.py copies it when it
-- writes a document's chunks.
ALTER TABLE documents ADD COLUMN audience text;
ALTER TABLE chunks ADD COLUMN audience text;

CREATE FUNCTION kb_entry_audience(kind text, level text, created_by text, kb text) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
    SELECT CASE WHEN kind IS DISTINCT FROM 'entry' OR level = 'public' THEN NULL
                WHEN level = 'organisation' THEN 'org:' || (SELECT org_id FROM knowledge_bases WHERE id = kb)
                ELSE 'user:' || coalesce(created_by, '') END
$$;

CREATE FUNCTION kb_document_audience() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    NEW.audience := kb_entry_audience(NEW.kind, NEW.level, NEW.created_by, NEW.kb_id);
    RETURN NEW;
END $$;
CREATE TRIGGER documents_audience BEFORE INSERT OR UPDATE OF kind, level, created_by, kb_id, audience
    ON documents FOR EACH ROW EXECUTE FUNCTION kb_document_audience();

CREATE FUNCTION kb_chunks_follow_audience() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    UPDATE chunks SET audience = NEW.audience
     WHERE document_id = NEW.id AND audience IS DISTINCT FROM NEW.audience;
    RETURN NULL;
END $$;
CREATE TRIGGER documents_audience_to_chunks AFTER UPDATE OF audience ON documents FOR EACH ROW
    WHEN (OLD.audience IS DISTINCT FROM NEW.audience) EXECUTE FUNCTION kb_chunks_follow_audience();

UPDATE documents SET audience = kb_entry_audience(kind, level, created_by, kb_id) WHERE kind = 'entry';
UPDATE chunks c SET audience = d.audience FROM documents d WHERE d.id = c.document_id AND d.audience IS NOT NULL;

-- De-duplication within an audience: the same text posted by two users is two individual
-- entries, and posting it never answers an entry the caller may not read.
DROP INDEX documents_entry_content_idx;
CREATE UNIQUE INDEX documents_entry_content_idx ON documents (kb_id, content_hash, (coalesce(audience, '')))
    WHERE kind = 'entry' AND content_hash IS NOT NULL;

-- The caller's user, '' when none was set (storage/db.py sets it beside kb.org_id), and
-- the audiences the session reads beyond NULL. '*' (the pipeline) reads every audience.
CREATE FUNCTION kb_user() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT coalesce(current_setting('kb.user_id', true), '') $$;
CREATE FUNCTION kb_reads_audience(audience text) RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT audience IS NULL OR kb_org() = '*' OR audience = 'user:' || kb_user() OR audience = 'org:' || kb_org() $$;

-- The policies of 0008 with the audience: FOR ALL policies (writes) also decide what a
-- SELECT sees, so both carry it.
DROP POLICY reads ON documents;
DROP POLICY writes ON documents;
DROP POLICY reads ON chunks;
DROP POLICY writes ON chunks;
CREATE POLICY reads ON documents FOR SELECT TO kb_app
    USING (kb_id IN (SELECT id FROM knowledge_bases) AND kb_reads_audience(audience));
CREATE POLICY writes ON documents TO kb_app
    USING (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*')
           AND kb_reads_audience(audience))
    WITH CHECK (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*'));
CREATE POLICY reads ON chunks FOR SELECT TO kb_app
    USING (kb_id IN (SELECT id FROM knowledge_bases) AND kb_reads_audience(audience));
CREATE POLICY writes ON chunks TO kb_app
    USING (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*')
           AND kb_reads_audience(audience))
    WITH CHECK (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*'));

-- chunks_visible (0010) states the same rule as the policies, the audience now included
-- (and the new column: a view keeps the columns it was made with).
CREATE OR REPLACE VIEW chunks_visible AS
    SELECT c.*
      FROM chunks c
     WHERE c.kb_id IN (SELECT kb.id FROM knowledge_bases kb
                        WHERE kb.org_id = kb_org() OR kb.visibility = 'public' OR kb_org() = '*')
       AND kb_reads_audience(c.audience);
