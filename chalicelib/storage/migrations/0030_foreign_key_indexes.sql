-- Foreign keys whose referenced rows the service deletes, indexed on the referencing side:
-- without an index, each deleted row made PostgreSQL scan the referencing table whole.
-- documents.superseded_by (0023) was the dear one: deleting a knowledge base of 100,000
-- documents (bench/documents_list.py's) ran a sequential scan of documents per document, over
-- 15 minutes, holding up the reconciler's updates of the same rows. Only entries' older
-- versions carry it, and a knowledge base's sessions and jobs are few: partial indexes.
CREATE INDEX IF NOT EXISTS documents_superseded_by_idx ON documents (superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX IF NOT EXISTS agent_sessions_knowledge_base_idx ON agent_sessions (knowledge_base_id)
    WHERE knowledge_base_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS agent_sessions_job_idx ON agent_sessions (job_id) WHERE job_id IS NOT NULL;
