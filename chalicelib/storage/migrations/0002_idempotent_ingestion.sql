-- What is indexed: the SHA-256 of the bytes whose chunks are stored, and the run
-- that owns the document now (an older run that finishes late must not win).
ALTER TABLE documents ADD COLUMN indexed_hash text;
ALTER TABLE documents ADD COLUMN current_run_id text;

-- OpenAI's text-embedding-3-small; other dimensions get their index when a
-- knowledge base first uses them (queries.ensure_vector_index).
CREATE INDEX IF NOT EXISTS chunks_embedding_1536_hnsw ON chunks
    USING hnsw ((embedding::vector(1536)) vector_cosine_ops) WHERE embedding_dim = 1536;
