-- Authenticating a request reads its key before anyone knows the organisation; through
-- this function kb_app does it in one round trip without acting for every organisation
-- first (which cost two extra settings per request: '*' for the lookup, then the
-- caller's). Only the row of the presented key's hash comes out, and last_used_at is
-- written at most once a minute per key.
CREATE OR REPLACE FUNCTION kb_principal(presented_hash text)
RETURNS TABLE (user_id text, org_id text, role text, key_id text, rate_per_second integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
#variable_conflict use_column
DECLARE
    found_key record;
BEGIN
    SELECT u.id AS uid, u.org_id AS oid, u.role AS urole, k.id AS kid, k.rate_per_second AS rate,
           (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute') AS stale
      INTO found_key
      FROM api_keys k JOIN users u ON u.id = k.user_id
     WHERE k.key_hash = presented_hash AND k.revoked_at IS NULL
       AND (k.expires_at IS NULL OR k.expires_at > now());
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF found_key.stale THEN
        UPDATE api_keys SET last_used_at = now() WHERE id = found_key.kid;
    END IF;
    RETURN QUERY SELECT found_key.uid, found_key.oid, found_key.urole, found_key.kid, found_key.rate;
END $$;
REVOKE ALL ON FUNCTION kb_principal(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kb_principal(text) TO kb_app;
