-- Roles inside an organisation, the API-key lifecycle, and an audit log of every write.

-- admin: everything in the organisation; editor: creates knowledge bases and agents and
-- writes into knowledge bases it may write; viewer: searches and reads.
ALTER TABLE users ADD COLUMN role text NOT NULL DEFAULT 'editor'
    CHECK (role IN ('admin', 'editor', 'viewer'));
-- The first user of each existing organisation becomes its admin, as a new one's does.
UPDATE users u SET role = 'admin'
 WHERE u.id = (SELECT f.id FROM users f WHERE f.org_id = u.org_id ORDER BY f.created_at, f.id LIMIT 1);

ALTER TABLE api_keys
    ADD COLUMN name text NOT NULL DEFAULT 'default',
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN last_used_at timestamptz,
    -- Requests per second this key may make; NULL is the deployment's default (limits.py).
    ADD COLUMN rate_per_second integer CHECK (rate_per_second > 0);
CREATE INDEX api_keys_user_idx ON api_keys (user_id, created_at);

-- Every write, not only an agent's tools: target_type/target_id name what changed.
ALTER TABLE audit_log
    ALTER COLUMN agent_id DROP NOT NULL,
    ADD COLUMN key_id text,
    ADD COLUMN target_type text,
    ADD COLUMN target_id text;
UPDATE audit_log SET target_type = 'agent', target_id = agent_id WHERE target_type IS NULL;
ALTER TABLE audit_log ALTER COLUMN target_type SET NOT NULL, ALTER COLUMN target_id SET NOT NULL;
CREATE INDEX audit_log_org_idx ON audit_log (org_id, id);
CREATE INDEX audit_log_target_idx ON audit_log (org_id, target_type, target_id, id);
