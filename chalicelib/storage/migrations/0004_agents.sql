-- Agents keep their tools in a JSON array (no junction table); every change to a
-- knowledge-base tool is written to the audit log with its before and after.
CREATE TABLE agents (
    id               text PRIMARY KEY,
    org_id           text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    owner_id         text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name             text NOT NULL,
    description      text NOT NULL DEFAULT '',
    available_tools  jsonb NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(available_tools) = 'array'),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agents_org_idx ON agents (org_id);

CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    org_id      text NOT NULL,
    user_id     text NOT NULL,
    agent_id    text NOT NULL,
    action      text NOT NULL,
    tool_id     text,
    before      jsonb,
    after       jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_agent_idx ON audit_log (agent_id, id);
