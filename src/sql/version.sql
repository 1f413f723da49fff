-- version.sql: which edition and API this is (client packages ask
-- once and refuse an API major they do not know).
CREATE OR REPLACE FUNCTION idem_version(OUT edition text, OUT version text, OUT api text)
RETURNS record
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT '@edition@'::text, '1.0.0'::text, '1.0'::text $$;

COMMENT ON FUNCTION idem_version() IS
'The edition installed (native or portable), its release and its API version';
