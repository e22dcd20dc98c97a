-- A document's chunks are written in committed batches and switched to at once (issue 33).
--
-- One transaction held the whole swap: a 50,000-chunk Markdown file kept its INSERT INTO
-- chunks open past the Store step's 300 s four times, and every other writer waited behind
-- it. Now each chunk row carries the `version` that wrote it (the run's id; '' for rows
-- written before this migration), a version being written or being deleted is listed in
-- chunk_versions, and search skips the listed versions with a condition on the chunk row
-- itself (chunk_versions.py: CURRENT_CHUNK; no join inside the HNSW or BM25 scans). The
-- new version is written in batches under a 'staged' entry; one short transaction removes
-- that entry, lists the old version as 'retired' and points documents.chunks_version at the
-- new one; the retired rows are then deleted in batches. A search sees the old version or
-- the new one, never both and never half of one. BM25's postings follow their chunk: they
-- are read through the chunk row, which the same condition hides.
ALTER TABLE chunks ADD COLUMN version text NOT NULL DEFAULT '';
ALTER TABLE documents ADD COLUMN chunks_version text NOT NULL DEFAULT '';

-- Two versions of a document's chunks live side by side while one replaces the other.
ALTER TABLE chunks DROP CONSTRAINT chunks_document_id_chunk_index_key;
CREATE UNIQUE INDEX chunks_document_version_idx ON chunks (document_id, version, chunk_index);

CREATE TABLE chunk_versions (
    document_id text NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    version     text NOT NULL,
    kb_id       text NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    state       text NOT NULL CHECK (state IN ('staged', 'retired')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (document_id, version)
);
CREATE INDEX chunk_versions_kb_idx ON chunk_versions (kb_id);

-- The rules of chunks (0014), for the same rows.
ALTER TABLE chunk_versions ENABLE ROW LEVEL SECURITY;
CREATE POLICY reads ON chunk_versions FOR SELECT TO kb_app USING (kb_id IN (SELECT id FROM knowledge_bases));
CREATE POLICY writes ON chunk_versions TO kb_app
    USING (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*'))
    WITH CHECK (kb_id IN (SELECT id FROM knowledge_bases WHERE org_id = kb_org() OR kb_org() = '*'));
GRANT SELECT, INSERT, UPDATE, DELETE ON chunk_versions TO kb_app;

-- chunks_visible (0010, 0014) keeps the columns it was made with: the new one is added.
CREATE OR REPLACE VIEW chunks_visible AS
    SELECT c.*
      FROM chunks c
     WHERE c.kb_id IN (SELECT kb.id FROM knowledge_bases kb
                        WHERE kb.org_id = kb_org() OR kb.visibility = 'public' OR kb_org() = '*')
       AND kb_reads_audience(c.audience);

-- Creating a knowledge base waited 30 s behind a store (the issue: POST /knowledge-bases
-- 502): CREATE INDEX IF NOT EXISTS takes its lock on chunks before it looks whether the
-- index exists, and that lock waits for every open writer of chunks. The catalog is read
-- first now, which takes no lock on chunks; every dimension the providers offer has its
-- index from a migration (0001, 0002, 0005; tests/integration/test_store_batches.py checks
-- them), so a request finds it there. A dimension without one (a provider added without a
-- migration) is built here, but waits for the lock at most lock_timeout, then fails (the
-- API answers 503 with Retry-After) instead of queueing every writer behind it.
CREATE OR REPLACE FUNCTION kb_ensure_vector_index(dim integer) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp SET lock_timeout = '1s' AS $$
BEGIN
    IF dim IS NULL OR dim <= 0 OR dim > 2000 THEN
        RAISE EXCEPTION 'dimension % cannot be indexed with HNSW', dim;
    END IF;
    IF to_regclass(format('public.chunks_embedding_%s_hnsw', dim)) IS NOT NULL THEN
        RETURN;
    END IF;
    EXECUTE format('CREATE INDEX IF NOT EXISTS chunks_embedding_%s_hnsw ON chunks'
                   ' USING hnsw ((embedding::vector(%s)) vector_cosine_ops)'
                   ' WITH (m = 24, ef_construction = 128) WHERE embedding_dim = %s',
                   dim, dim, dim);
END $$;
