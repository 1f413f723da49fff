-- update: installs the extension the way an existing user gets it: the
-- first release, then ALTER EXTENSION UPDATE through every upgrade script.
-- Checks that this ends in exactly the objects a new installation gets, and
-- what it installed and where.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idempotency;
RESET client_min_messages;

-- Every member of the extension with everything that defines it: columns,
-- constraints, indexes, triggers, function definitions, comments,
-- privileges and initial privileges (what pg_dump leaves out).
CREATE FUNCTION public.extension_definition()
RETURNS TABLE (object text, definition text)
LANGUAGE sql AS $$
WITH member AS (
    SELECT d.classid, d.objid, pg_describe_object(d.classid, d.objid, 0) AS object
    FROM pg_depend d
    WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
      AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency'))
SELECT m.object, concat_ws(E'\n',
    CASE m.classid
    WHEN 'pg_proc'::regclass THEN pg_get_functiondef(m.objid) || ' acl=' || coalesce((SELECT proacl::text FROM pg_proc WHERE oid = m.objid), '-')
    WHEN 'pg_type'::regclass THEN (SELECT format('type %s %s', t.typtype,
            coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid), ''))
            FROM pg_type t WHERE t.oid = m.objid)
    WHEN 'pg_class'::regclass THEN (SELECT format('%s acl=%s options=%s', c.relkind, coalesce(c.relacl::text, '-'), c.reloptions)
            FROM pg_class c WHERE c.oid = m.objid)
    WHEN 'pg_namespace'::regclass THEN (SELECT format('schema owner=%s acl=%s', n.nspowner::regrole, coalesce(n.nspacl::text, '-'))
            FROM pg_namespace n WHERE n.oid = m.objid)
    END,
    (SELECT string_agg(format('column %s %s %s notnull=%s default=%s', a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
                              a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid)), E'\n' ORDER BY a.attnum)
     FROM pg_attribute a LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
     WHERE m.classid = 'pg_class'::regclass AND a.attrelid = m.objid AND a.attnum > 0 AND NOT a.attisdropped),
    (SELECT string_agg(format('attribute %s %s', a.attname, format_type(a.atttypid, a.atttypmod)), E'\n' ORDER BY a.attnum)
     FROM pg_type t JOIN pg_attribute a ON a.attrelid = t.typrelid
     WHERE m.classid = 'pg_type'::regclass AND t.oid = m.objid AND a.attnum > 0 AND NOT a.attisdropped),
    (SELECT string_agg(format('constraint %s %s', conname, pg_get_constraintdef(oid)), E'\n' ORDER BY conname)
     FROM pg_constraint WHERE m.classid = 'pg_class'::regclass AND conrelid = m.objid),
    (SELECT string_agg(pg_get_indexdef(indexrelid), E'\n' ORDER BY pg_get_indexdef(indexrelid))
     FROM pg_index WHERE m.classid = 'pg_class'::regclass AND indrelid = m.objid),
    (SELECT string_agg(pg_get_triggerdef(oid), E'\n' ORDER BY tgname)
     FROM pg_trigger WHERE m.classid = 'pg_class'::regclass AND tgrelid = m.objid AND NOT tgisinternal),
    (SELECT pg_get_viewdef(m.objid) WHERE m.classid = 'pg_class'::regclass
        AND (SELECT relkind FROM pg_class WHERE oid = m.objid) = 'v'),
    (SELECT format('sequence %s %s %s %s', seqtypid::regtype, seqstart, seqmin, seqcycle)
     FROM pg_sequence WHERE m.classid = 'pg_class'::regclass AND seqrelid = m.objid),
    'comment=' || coalesce(obj_description(m.objid, m.classid::regclass::name), '-'),
    'initprivs=' || coalesce((SELECT initprivs::text FROM pg_init_privs i
                              WHERE i.classoid = m.classid AND i.objoid = m.objid AND i.objsubid = 0), '-'))
FROM member m
UNION ALL
SELECT 'extension', format('config=%s schema acl=%s schema initprivs=%s',
       (SELECT array_agg(c::regclass ORDER BY c::regclass::text) FROM unnest(extconfig) c),
       (SELECT nspacl FROM pg_namespace WHERE oid = extnamespace),
       (SELECT initprivs FROM pg_init_privs WHERE classoid = 'pg_namespace'::regclass AND objoid = extnamespace))
FROM pg_extension WHERE extname = 'idempotency'
$$;

-- A new installation (idempotency--0.5.0.sql), remembered and dropped.
CREATE EXTENSION idempotency;
CREATE TABLE public.installed AS SELECT * FROM public.extension_definition();
DROP EXTENSION idempotency;

CREATE EXTENSION idempotency VERSION '0.1.0';
ALTER EXTENSION idempotency UPDATE TO '0.3.0';
-- A 0.3.0 deployment as its docs said: an application role with privileges
-- on the table, and a reading role. 0.4.0 moves the first to namespace
-- grants, and warns about the second. Its records were begun in autocommit
-- mode, which 0.3.0 let callers do (0.5.0 refuses to commit such a claim).
CREATE ROLE regress_idem_app03;
CREATE ROLE regress_idem_reader03;
GRANT USAGE ON SCHEMA idempotency TO regress_idem_app03, regress_idem_reader03;
GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.idempotency_record TO regress_idem_app03;
GRANT SELECT ON idempotency.idempotency_record TO regress_idem_reader03;
INSERT INTO idempotency.idempotency_record
    (namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at)
SELECT n, 'k', 'in_progress', idempotency.idem_request_hash('{}'), '{}', now(), now(), now() + interval '1 day'
FROM unnest(ARRAY['legacy-a', 'legacy-b']) n;
ALTER EXTENSION idempotency UPDATE;
SELECT namespace, grantees FROM idempotency.idem_namespaces ORDER BY namespace;
SELECT r.rolname, has_table_privilege(r.oid, 'idempotency.idempotency_record', 'SELECT') AS table_access,
       has_function_privilege(r.oid, 'idempotency.idem_purge(integer, integer)', 'EXECUTE') AS may_purge
FROM pg_roles r WHERE r.rolname LIKE 'regress_idem_%03' ORDER BY 1;
SET ROLE regress_idem_app03;
SELECT kind FROM idempotency.idem_begin('legacy-a', 'k', '{}');
RESET ROLE;
-- pg_dump writes out what the update granted: no grant to an operator role
-- is left among the extension's initial privileges (0.4.1).
SELECT count(*) AS operator_roles_in_init_privs
FROM pg_init_privs i, aclexplode(i.initprivs) x
WHERE x.grantee IN ('regress_idem_app03'::regrole, 'regress_idem_reader03'::regrole);
DELETE FROM idempotency.idempotency_record;
SELECT idempotency.idem_namespace_drop(n) FROM unnest(ARRAY['legacy-a', 'legacy-b']) n;
DROP OWNED BY regress_idem_app03, regress_idem_reader03;
DROP ROLE regress_idem_app03, regress_idem_reader03;
-- The updated installation and the new one have the same objects, defined
-- the same way, with the same privileges (no row: no difference).
(SELECT 'only new' AS side, * FROM public.installed EXCEPT SELECT 'only new', * FROM public.extension_definition())
UNION ALL
(SELECT 'only updated', * FROM public.extension_definition() EXCEPT SELECT 'only updated', * FROM public.installed)
ORDER BY object, side;
SELECT count(*) > 30 AS compared_many_objects FROM public.installed;
DROP TABLE public.installed;
DROP FUNCTION public.extension_definition();
SELECT extname, extversion, extnamespace::regnamespace AS schema,
       extconfig::regclass[] AS dumped_tables
FROM pg_extension WHERE extname = 'idempotency';
-- Every function, with its volatility, strictness and parallel safety:
-- the API's, and the plumbing's (1.0.0).
SELECT p.oid::regprocedure AS function, p.provolatile AS volatile,
       p.proisstrict AS strict, p.proparallel AS parallel
FROM pg_proc p
WHERE p.pronamespace IN ('idempotency'::regnamespace, 'idempotency_internal'::regnamespace)
ORDER BY p.pronamespace::regnamespace::text, p.oid::regprocedure::text;
-- The table: no privileges for PUBLIC; applications use the functions.
SELECT relname, relacl IS NULL OR NOT aclcontains(relacl, makeaclitem(0, relowner, 'SELECT', false)) AS public_cannot_read
FROM pg_class WHERE oid = 'idempotency.idempotency_record'::regclass;
