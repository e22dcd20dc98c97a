-- OpenAI's /v1 files (compat/files.py) belong to their uploader, as a private knowledge base
-- belongs to its owner: the bytes stay in S3 under _files/{orgId}/{fileId}, and this table
-- records who uploaded each one, so a page of a user's files is one indexed query and the
-- database refuses another user's file even to a query that forgets to ask (admins included:
-- others reach a file only as a document of a knowledge base they may read). Files uploaded
-- before this table existed carry their uploader in the object's metadata (user): a
-- deployment records them here (storage/files.py, record_existing), and until it has, the
-- uploader's own request by id records the one it names.
CREATE TABLE files (
    id           text PRIMARY KEY,
    org_id       text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    user_id      text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    filename     text NOT NULL,
    purpose      text NOT NULL,
    bytes        bigint NOT NULL CHECK (bytes >= 0),
    content_type text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX files_uploader_idx ON files (org_id, user_id, id);
CREATE INDEX files_user_id_idx ON files (user_id);

ALTER TABLE files ENABLE ROW LEVEL SECURITY;
CREATE POLICY uploader ON files TO kb_app
    USING (kb_org() = '*' OR (org_id = kb_org() AND user_id = kb_user()))
    WITH CHECK (kb_org() = '*' OR (org_id = kb_org() AND user_id = kb_user()));
