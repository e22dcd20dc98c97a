-- Amazon Titan Text Embeddings v2 (Bedrock) at 1024, 512 and 256 dimensions. Built
-- in a migration rather than by queries.ensure_vector_index when the first such
-- knowledge base is created: building one scans all of chunks under a lock that
-- blocks ingestion, which belongs in a planned step, not in an API request.
CREATE INDEX IF NOT EXISTS chunks_embedding_1024_hnsw ON chunks
    USING hnsw ((embedding::vector(1024)) vector_cosine_ops) WHERE embedding_dim = 1024;
CREATE INDEX IF NOT EXISTS chunks_embedding_512_hnsw ON chunks
    USING hnsw ((embedding::vector(512)) vector_cosine_ops) WHERE embedding_dim = 512;
CREATE INDEX IF NOT EXISTS chunks_embedding_256_hnsw ON chunks
    USING hnsw ((embedding::vector(256)) vector_cosine_ops) WHERE embedding_dim = 256;
