/* idempotency--0.9.2--1.0.0.sql: release 1.0.0, the release the API is
   frozen on (docs/compatibility.md, docs/api.md#the-10-surface). This
   script writes no system catalog. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '1.0.0'" to load this file. \quit

-- Which edition and API this is: client packages ask once and refuse an
-- API major they do not know.
CREATE FUNCTION @extschema@.idem_version(OUT edition text, OUT version text, OUT api text)
RETURNS record
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 'native'::text, '1.0.0'::text, '1.0'::text $$;

COMMENT ON FUNCTION @extschema@.idem_version() IS
'The edition installed (native or portable), its release and its API version';

-- A holder's recovery point, the fence last as in every other call.
CREATE FUNCTION @extschema@.idem_save_point(namespace text, key text, point text, state jsonb, fence bigint)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_save_point'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION @extschema@.idem_save_point(text, text, text, jsonb, bigint) IS
'Records how far a claim''s work got (a phase and its state), answered to a begin that takes it over; a heartbeat too';

COMMENT ON FUNCTION @extschema@.idem_record_point(text, text, bigint, text, jsonb) IS
'Deprecated: use idem_save_point(namespace, key, point, state, fence), the fence last as everywhere; removed in 2.0';

-- The new functions get their own grants and no more: what ALTER DEFAULT
-- PRIVILEGES of the installing role added is taken back.
DO $defaults$
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT DISTINCT p.oid::pg_catalog.regprocedure AS fn, a.privilege_type, r.rolname
        FROM pg_catalog.pg_proc p
        CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
        JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE p.oid IN ('@extschema@.idem_version()'::pg_catalog.regprocedure,
                        '@extschema@.idem_save_point(text, text, text, jsonb, bigint)'::pg_catalog.regprocedure)
          AND a.grantee <> p.proowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON FUNCTION %s FROM %I', x.privilege_type, x.fn, x.rolname);
    END LOOP;
END;
$defaults$;
