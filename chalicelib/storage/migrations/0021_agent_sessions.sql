-- Seed 003's "triggered after session completion" (issue 31): an agent's conversation is
-- recorded as a session, and completing it queues the extraction of what it taught into
-- the session's knowledge base (extraction_jobs, 0012). job_id makes completion idempotent:
-- a second completion answers the first one's job.
CREATE TABLE agent_sessions (
    id                text PRIMARY KEY,
    org_id            text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id           text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    agent_id          text NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    knowledge_base_id text REFERENCES knowledge_bases(id) ON DELETE SET NULL,
    messages          jsonb NOT NULL DEFAULT '[]',
    chars             integer NOT NULL DEFAULT 0,
    status            text NOT NULL DEFAULT 'OPEN' CHECK (status IN ('OPEN', 'COMPLETED')),
    job_id            text REFERENCES extraction_jobs(id) ON DELETE SET NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    completed_at      timestamptz
);
CREATE INDEX agent_sessions_agent_idx ON agent_sessions (agent_id, created_at);

ALTER TABLE agent_sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant ON agent_sessions TO kb_app
    USING (org_id = kb_org() OR kb_org() = '*') WITH CHECK (org_id = kb_org() OR kb_org() = '*');
