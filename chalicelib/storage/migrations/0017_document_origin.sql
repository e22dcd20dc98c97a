-- Who added a document and where it came from (seed 004's CreatedBy and OriginalURL).
-- created_by (0003) was written for entries only; uploads through the API now set it too
-- (a file dropped straight into the bucket has no user: NULL). original_url is the URL a
-- document was fetched from (POST .../documents {"url"}), NULL for uploaded bytes.
ALTER TABLE documents ADD COLUMN original_url text;
