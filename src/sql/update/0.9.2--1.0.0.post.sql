-- update/0.9.2--1.0.0.post.sql: the grants of what the update to 1.0.0
-- made (and nothing else: what operators granted on the rest stays theirs).

GRANT USAGE ON SCHEMA idempotency_internal TO PUBLIC;
REVOKE ALL ON @extschema@.idem_defaults FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_namespace_defaults(interval, interval, boolean, integer, interval, boolean)
    FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_stats_counters() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.idem_stats_counters() TO pg_monitor;
REVOKE ALL ON FUNCTION idempotency_internal.idem_lock_namespace_briefly(text) FROM PUBLIC;
REVOKE ALL ON @extschema@.idem_metrics FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency_internal.idem_namespace_counters(), idempotency_internal.idem_metrics_figures(),
                       idempotency_internal.idem_metrics_stores()
    FROM PUBLIC;
GRANT SELECT ON @extschema@.idem_metrics TO pg_monitor;
GRANT EXECUTE ON FUNCTION idempotency_internal.idem_namespace_counters(), idempotency_internal.idem_metrics_figures(),
                          idempotency_internal.idem_metrics_stores()
    TO pg_monitor;

-- What ALTER DEFAULT PRIVILEGES of the installing role granted on what this
-- update made is taken back, privilege by privilege (docs/security.md).
DO $defaults$
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT DISTINCT o.kind, o.name, a.privilege_type, r.rolname
        FROM (SELECT 'ROUTINE' AS kind, p.oid::pg_catalog.regprocedure::text AS name, p.proowner AS owner,
                     p.proacl AS acl
              FROM pg_catalog.pg_proc p
              WHERE p.oid IN ('@extschema@.idem_version()'::pg_catalog.regprocedure,
                              '@extschema@.idem_save_point(text, text, text, jsonb, bigint)'::pg_catalog.regprocedure,
                              '@extschema@.idem_stats_counters()'::pg_catalog.regprocedure,
                              '@extschema@.idem_namespace_defaults(interval, interval, boolean, integer, interval, boolean)'::pg_catalog.regprocedure,
                              'idempotency_internal.idem_namespace_counters()'::pg_catalog.regprocedure,
                              'idempotency_internal.idem_metrics_figures()'::pg_catalog.regprocedure,
                              'idempotency_internal.idem_metrics_stores()'::pg_catalog.regprocedure,
                              'idempotency_internal.idem_lock_namespace_briefly(text)'::pg_catalog.regprocedure)
              UNION ALL
              SELECT 'TABLE', c.oid::pg_catalog.regclass::text, c.relowner, c.relacl
              FROM pg_catalog.pg_class c
              WHERE c.oid IN ('@extschema@.idem_defaults'::pg_catalog.regclass,
                              '@extschema@.idem_metrics'::pg_catalog.regclass)) o
        CROSS JOIN LATERAL pg_catalog.aclexplode(o.acl) a
        JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE a.grantee <> o.owner
          AND NOT (a.grantee = 'pg_monitor'::pg_catalog.regrole AND a.privilege_type = 'EXECUTE'
                   AND o.name IN ('@extschema@.idem_stats_counters()'::pg_catalog.regprocedure::text,
                                  'idempotency_internal.idem_namespace_counters()'::pg_catalog.regprocedure::text,
                                  'idempotency_internal.idem_metrics_figures()'::pg_catalog.regprocedure::text,
                                  'idempotency_internal.idem_metrics_stores()'::pg_catalog.regprocedure::text))
          AND NOT (a.grantee = 'pg_monitor'::pg_catalog.regrole AND a.privilege_type = 'SELECT'
                   AND o.name = '@extschema@.idem_metrics'::pg_catalog.regclass::text)
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %I', x.privilege_type, x.kind, x.name, x.rolname);
    END LOOP;
    FOR x IN
        SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END AS grantee,
               a.privilege_type
        FROM pg_catalog.pg_namespace n
        CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
        LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE n.oid = 'idempotency_internal'::pg_catalog.regnamespace AND a.grantee <> n.nspowner
          AND NOT (a.grantee = 0 AND a.privilege_type = 'USAGE')
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON SCHEMA idempotency_internal FROM %s CASCADE', x.privilege_type, x.grantee);
    END LOOP;
END;
$defaults$;

-- From 1.0.0 every store has the recovery columns (0.8.0's): a store the
-- service owns that lacks them is refused at the namespaces' next call.
-- The update warns of each, with the ALTER TABLE that brings it up to date.
-- Not under Citus, whose registry is a reference table that a script
-- propagated to the workers cannot read (and whose stores
-- idem_create_store made, with every column since 0.8.0).
DO $stores$
DECLARE
    s record;
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RETURN;
    END IF;
    FOR s IN
        SELECT DISTINCT c.store, p.problem, p.fix
        FROM @extschema@.idem_namespace_config c
        CROSS JOIN LATERAL idempotency_internal.idem_store_problem(c.store) p
        WHERE c.store IS NOT NULL AND p.problem IS NOT NULL
    LOOP
        RAISE WARNING 'idempotency 1.0.0: store % cannot be used until it is changed', s.store
            USING DETAIL = s.problem,
                  HINT = coalesce(s.fix, 'Copy its rows into a table idem_create_store makes, and bind its namespaces to it.');
    END LOOP;
END;
$stores$;

-- Grants that must follow what they granted: a role granted 0.9's
-- idem_stats_counters() (which moved, with its grants, to
-- idempotency_internal) keeps calling it by its deprecated name; a role
-- that could configure namespaces (INSERT or UPDATE on the registry) reads
-- the defaults that idem_namespace_configure now reads.
DO $carried$
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT DISTINCT r.rolname
        FROM pg_catalog.pg_proc p CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
        JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE p.oid = 'idempotency_internal.idem_stats_counters()'::pg_catalog.regprocedure
          AND a.grantee <> p.proowner AND r.rolname <> 'pg_monitor' AND a.privilege_type = 'EXECUTE'
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION @extschema@.idem_stats_counters() TO %I', x.rolname);
    END LOOP;
    FOR x IN
        SELECT DISTINCT r.rolname
        FROM pg_catalog.pg_class c CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
        JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE c.oid = '@extschema@.idem_namespace_config'::pg_catalog.regclass
          AND a.grantee <> c.relowner AND a.privilege_type IN ('INSERT', 'UPDATE')
    LOOP
        EXECUTE pg_catalog.format('GRANT SELECT ON @extschema@.idem_defaults TO %I', x.rolname);
    END LOOP;
END;
$carried$;
