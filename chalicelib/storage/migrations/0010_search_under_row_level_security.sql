-- Row-level security as measured at a million chunks (make bench, and the probe in the
-- closing note of issue 13): semantic search kept its speed, keyword search did not.
--
-- 1. Full-text matching (tsv @@ query) is not LEAKPROOF, so PostgreSQL will not test it
--    in the GIN index ahead of the policies: kb_app's keyword search scanned every row of
--    the knowledge base instead (a selective query: 61 ms as the owner, 957 ms as kb_app).
--    Keyword search reads chunks through this view instead. The view runs with its owner's
--    rights (the migrations' role, which row-level security does not limit) and states
--    the same read rule as the policies on knowledge_bases and chunks, so it shows kb_app
--    nothing more than they do, and the planner may use the GIN index. The rule is written
--    twice: a change to the policies of 0008 changes this view too
--    (tests/integration/test_row_level_security.py checks both).
-- 2. kb_org() was PARALLEL UNSAFE by default, which kept every query of kb_app on tables
--    with policies from parallel plans (a broad keyword query: 1.46 s instead of 0.61 s).
ALTER FUNCTION kb_org() PARALLEL SAFE;

-- The columns of chunks when this was written: a column added later must be added here too.
CREATE VIEW chunks_visible AS
    SELECT c.*
      FROM chunks c
     WHERE c.kb_id IN (SELECT kb.id FROM knowledge_bases kb
                        WHERE kb.org_id = kb_org() OR kb.visibility = 'public' OR kb_org() = '*');
GRANT SELECT ON chunks_visible TO kb_app;
