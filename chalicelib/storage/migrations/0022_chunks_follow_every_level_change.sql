-- 0014's documents_audience_to_chunks was `AFTER UPDATE OF audience`: a column-specific
-- trigger fires only when the statement's SET list names the column, and a change of level
-- sets audience in the BEFORE trigger instead. So a level widened by extraction's merge (and
-- now by PATCH .../entries/{id}) left the entry's chunks at the old audience: the document
-- was readable at its new level, its passages were not searchable there (found by
-- tests/e2e/test_entry_levels.py, issue 31). The trigger now fires on any update that
-- changes the audience, and chunks left behind are brought level.
DROP TRIGGER documents_audience_to_chunks ON documents;
CREATE TRIGGER documents_audience_to_chunks AFTER UPDATE ON documents FOR EACH ROW
    WHEN (OLD.audience IS DISTINCT FROM NEW.audience) EXECUTE FUNCTION kb_chunks_follow_audience();

UPDATE chunks c SET audience = d.audience
  FROM documents d
 WHERE d.id = c.document_id AND c.audience IS DISTINCT FROM d.audience;

-- A level change (PATCH .../entries/{id}, issue 31) may move an entry out of its changer's
-- sight: an admin who demotes a colleague's entry to individual no longer reads it, and an
-- UPDATE whose new row fails the SELECT policy is refused. This function makes the change for
-- the functions' role on an entry the session reads, in its own organisation's knowledge base,
-- which the write lists let it write; who may choose which level is decided in the service
-- (chalicelib/documents/entries.py:set_entry_level).
CREATE FUNCTION kb_set_entry_level(entry text, new_level text) RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = public, pg_temp AS $$
    WITH changed AS (
        UPDATE documents SET level = new_level, updated_at = now()
         WHERE id = entry AND kind = 'entry' AND kb_reads_audience(audience) AND kb_may_write(kb_id)
           AND kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*')
        RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM changed)
$$;
REVOKE ALL ON FUNCTION kb_set_entry_level(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kb_set_entry_level(text, text) TO kb_app;
