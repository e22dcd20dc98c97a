-- Tenants, API keys, knowledge bases, documents and their chunks.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE organizations (
    id          text PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id          text PRIMARY KEY,
    org_id      text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name)
);

-- Only a SHA-256 of each key is stored; the key itself is shown once.
CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    user_id     text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    key_hash    text NOT NULL UNIQUE,
    key_prefix  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE TABLE knowledge_bases (
    id               text PRIMARY KEY,
    org_id           text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    owner_id         text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name             text NOT NULL,
    description      text NOT NULL DEFAULT '',
    visibility       text NOT NULL DEFAULT 'private' CHECK (visibility IN ('private', 'org', 'public')),
    embedding_provider text NOT NULL,
    embedding_model  text NOT NULL,
    embedding_dim    integer NOT NULL CHECK (embedding_dim > 0),
    chunk_tokens     integer NOT NULL,
    chunk_overlap    integer NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX knowledge_bases_org_idx ON knowledge_bases (org_id);

CREATE TABLE documents (
    id             text PRIMARY KEY,
    kb_id          text NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    s3_key         text NOT NULL,
    filename       text NOT NULL,
    content_type   text,
    size_bytes     bigint,
    content_hash   text,
    status         text NOT NULL DEFAULT 'PENDING'
                   CHECK (status IN ('PENDING', 'PROCESSING', 'PROCESSED', 'FAILED')),
    error_code     text,
    error_message  text,
    page_count     integer,
    chunk_count    integer NOT NULL DEFAULT 0,
    token_count    integer NOT NULL DEFAULT 0,
    metadata       jsonb NOT NULL DEFAULT '{}'::jsonb,
    step_durations jsonb NOT NULL DEFAULT '{}'::jsonb,
    execution_arn  text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    processed_at   timestamptz,
    UNIQUE (kb_id, s3_key)
);
CREATE INDEX documents_kb_status_idx ON documents (kb_id, status);

-- The vector column has no fixed dimension so knowledge bases with different
-- embedding models can live side by side; each dimension gets its own partial
-- HNSW index over a cast expression (pgvector's documented pattern).
CREATE TABLE chunks (
    id             bigserial PRIMARY KEY,
    document_id    text NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    kb_id          text NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    chunk_index    integer NOT NULL,
    content        text NOT NULL,
    page           integer,
    headers        jsonb NOT NULL DEFAULT '[]'::jsonb,
    start_char     integer NOT NULL,
    end_char       integer NOT NULL,
    token_count    integer NOT NULL,
    metadata       jsonb NOT NULL DEFAULT '{}'::jsonb,
    embedding_dim  integer NOT NULL,
    embedding      vector NOT NULL,
    tsv            tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    UNIQUE (document_id, chunk_index)
);
CREATE INDEX chunks_kb_idx ON chunks (kb_id);
CREATE INDEX chunks_tsv_idx ON chunks USING gin (tsv);
CREATE INDEX chunks_embedding_384_hnsw ON chunks
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE embedding_dim = 384;
