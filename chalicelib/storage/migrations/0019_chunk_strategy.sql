-- How a knowledge base cuts its documents (issue 28, seed 004's chunking.strategy): 'fixed'
-- packs sentences up to chunk_tokens, 'semantic' ends a chunk where the topic changes
-- (chalicelib/ingestion/semantic_chunk.py). Existing knowledge bases keep the fixed chunker.
ALTER TABLE knowledge_bases ADD COLUMN chunk_strategy text NOT NULL DEFAULT 'fixed'
    CHECK (chunk_strategy IN ('fixed', 'semantic'));
