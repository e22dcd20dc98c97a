-- kb_bm25_compact (0026, 0027) and kb_bm25_repack (0028) run as their owner (SECURITY DEFINER:
-- they rewrite the blocks kb_app may only read), so row-level security never scoped them:
-- kb_app acting for one organisation could fold or repack another's knowledge base. Each now
-- refuses, for kb_app, a knowledge base outside the organisation it acts for (kb.org_id; the
-- pipeline acts for '*'). Their bodies stay as 0027 and 0028 wrote them, under new names only
-- their owner may call; the old names check, then call them, with the same signatures and grants.
ALTER FUNCTION kb_bm25_compact(text, integer) RENAME TO kb_bm25_compact_any;
ALTER FUNCTION kb_bm25_repack(text, integer) RENAME TO kb_bm25_repack_any;
REVOKE ALL ON FUNCTION kb_bm25_compact_any(text, integer) FROM PUBLIC, kb_app;
REVOKE ALL ON FUNCTION kb_bm25_repack_any(text, integer) FROM PUBLIC, kb_app;

-- Raises unless the session may maintain the knowledge base's BM25 blocks: any, for a login
-- other than kb_app (the migrations, an operator); for kb_app, those of the organisation it
-- acts for, or every one when it acts for '*'.
CREATE FUNCTION kb_bm25_check_maintainer(kb text) RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    IF session_user = 'kb_app' AND kb_org() <> '*'
       AND NOT EXISTS (SELECT 1 FROM knowledge_bases k WHERE k.id = kb AND k.org_id = kb_org()) THEN
        RAISE EXCEPTION 'knowledge base % is not of the organisation this session acts for', kb
              USING ERRCODE = 'insufficient_privilege';
    END IF;
END $$;

CREATE FUNCTION kb_bm25_compact(kb text, block integer) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM kb_bm25_check_maintainer(kb);
    RETURN kb_bm25_compact_any(kb, block);
END $$;

CREATE FUNCTION kb_bm25_repack(kb text, most integer) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM kb_bm25_check_maintainer(kb);
    RETURN kb_bm25_repack_any(kb, most);
END $$;

REVOKE ALL ON FUNCTION kb_bm25_check_maintainer(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION kb_bm25_compact(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION kb_bm25_repack(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kb_bm25_compact(text, integer) TO kb_app;
GRANT EXECUTE ON FUNCTION kb_bm25_repack(text, integer) TO kb_app;
