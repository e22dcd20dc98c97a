-- Hierarchical chunking: a knowledge base indexes child chunks of child_tokens and answers their
-- parent of up to chunk_tokens (its parentTokens). Null for the other strategies, whose children
-- are cut to the embedding model's window. Existing knowledge bases keep their chunking.
ALTER TABLE knowledge_bases ADD COLUMN child_tokens integer;
ALTER TABLE knowledge_bases DROP CONSTRAINT IF EXISTS knowledge_bases_chunk_strategy_check;
ALTER TABLE knowledge_bases ADD CONSTRAINT knowledge_bases_chunk_strategy_check
    CHECK (chunk_strategy IN ('fixed', 'semantic', 'hierarchical'));
ALTER TABLE knowledge_bases ADD CONSTRAINT knowledge_bases_child_tokens_check
    CHECK ((chunk_strategy = 'hierarchical') = (child_tokens IS NOT NULL)
           AND coalesce(child_tokens BETWEEN 1 AND chunk_tokens, true));
