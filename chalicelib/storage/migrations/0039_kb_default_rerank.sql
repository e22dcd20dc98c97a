-- A knowledge base may make reranking its default (its search.rerank): every search of it that
-- does not say, from any surface, is reranked where the deployment has a reranker.
ALTER TABLE knowledge_bases ADD COLUMN default_rerank boolean NOT NULL DEFAULT false;

-- A knowledge-base tool's rerank false was the service's default when it was stored; null now
-- means "as the knowledge base says", which is what those tools were given.
UPDATE agents a SET available_tools = (
    SELECT jsonb_agg(CASE WHEN t.tool -> 'config' -> 'rerank' = 'false'::jsonb
                          THEN jsonb_set(t.tool, '{config,rerank}', 'null'::jsonb) ELSE t.tool END ORDER BY t.n)
    FROM jsonb_array_elements(a.available_tools) WITH ORDINALITY AS t(tool, n))
WHERE a.available_tools @> '[{"config": {"rerank": false}}]'::jsonb;
