-- privileges.sql: every grant the extension's objects have (made once: an
-- update grants only on what it makes, so that what operators granted is
-- never recorded as the extension's own).

-- Applications go through the functions, never the tables.
REVOKE ALL ON idempotency_record, idem_namespace_config, idem_namespace_grant, idem_defaults FROM PUBLIC;
REVOKE ALL ON idempotency_internal.idem_lock_secret FROM PUBLIC;
-- The API's functions reach the plumbing for any caller; each of its
-- objects carries its own privileges.
GRANT USAGE ON SCHEMA idempotency_internal TO PUBLIC;

-- What is stored is not for every role: monitoring roles read the views,
-- superusers reset the counters.
REVOKE ALL ON idem_stats, idem_namespace_stats, idem_namespaces, idem_metrics FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_stats_counters(), idem_stats_reset(),
                       idempotency_internal.idem_stats_counters(), idempotency_internal.idem_stats_released_keys(),
                       idempotency_internal.idem_stats_recovery(), idempotency_internal.idem_namespace_stats_figures(),
                       idempotency_internal.idem_stats_count_purged(bigint),
                       idempotency_internal.idem_namespace_counters(), idempotency_internal.idem_metrics_figures(),
                       idempotency_internal.idem_metrics_stores()
    FROM PUBLIC;
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT SELECT ON idem_stats, idem_namespace_stats, idem_namespaces, idem_metrics TO pg_monitor;
GRANT EXECUTE ON FUNCTION idem_stats_counters(),
                          idempotency_internal.idem_stats_counters(), idempotency_internal.idem_stats_released_keys(),
                          idempotency_internal.idem_stats_recovery(), idempotency_internal.idem_namespace_stats_figures(),
                          idempotency_internal.idem_namespace_counters(), idempotency_internal.idem_metrics_figures(),
                          idempotency_internal.idem_metrics_stores()
    TO pg_monitor;

-- Purging, operators' functions and administration are the extension
-- owner's (or whoever it grants them to).
REVOKE ALL ON FUNCTION idem_purge(integer, integer) FROM PUBLIC;
REVOKE ALL ON PROCEDURE idem_purge_batches(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_key_state(text, text), idem_release_key(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION idem_lock_namespace(text),
                       idem_namespace_configure(text, interval, interval, boolean, boolean, integer),
                       idem_namespace_defaults(interval, interval, boolean, integer, interval, boolean),
                       idem_namespace_fingerprint(text, text[]),
                       idem_namespace_drop(text), idem_grant(text, regrole), idem_revoke(text, regrole),
                       idem_bind_store(text, regclass), idem_distribute_registry()
    FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency_internal.idem_namespace_changed(),
                       idempotency_internal.idem_namespace_config_locked(),
                       idempotency_internal.idem_refuse_dropping_a_store(),
                       idempotency_internal.idem_store_problem(regclass),
                       idempotency_internal.idem_store_purge(regclass, integer),
                       idempotency_internal.idem_store_forget_requests(regclass, text),
                       idempotency_internal.idem_store_count(regclass, text, boolean),
                       idempotency_internal.idem_store_stats(regclass),
                       idempotency_internal.idem_lock_namespace_briefly(text)
    FROM PUBLIC;

-- The grants this script makes are all the extension's objects have: the
-- owner's, PUBLIC's and pg_monitor's on the views and the functions behind
-- them. ALTER DEFAULT PRIVILEGES of the installing role (EXECUTE on its
-- functions, SELECT on its tables, USAGE or CREATE on a schema it creates,
-- for an application role or for pg_monitor, say) would add others, and
-- that role could then read every namespace's records and the lock secret,
-- run what only the owner may (idem_key_state, idem_release_key, the
-- purge), or create objects in the schema: they are taken back here,
-- privilege by privilege, but USAGE on the schema (docs/security.md).
DO $defaults$
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT DISTINCT o.kind, o.name, a.privilege_type, r.rolname
        FROM (SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
              WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'
                AND d.refobjid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'idempotency')
              UNION ALL
              -- The portable edition's plain script makes no extension: its
              -- members are what its two schemas hold.
              SELECT m.classid, m.objid
              FROM (SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass AS classid, p.oid AS objid, p.pronamespace AS schema
                    FROM pg_catalog.pg_proc p
                    UNION ALL
                    SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, c.oid, c.relnamespace FROM pg_catalog.pg_class c
                    UNION ALL
                    SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid, t.typnamespace FROM pg_catalog.pg_type t) m
              WHERE m.schema IN ('@extschema@'::pg_catalog.regnamespace, 'idempotency_internal'::pg_catalog.regnamespace)
                AND NOT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname = 'idempotency')) d
        CROSS JOIN LATERAL (
            SELECT 'ROUTINE' AS kind, p.oid::pg_catalog.regprocedure::text AS name, p.proowner AS owner, p.proacl AS acl
            FROM pg_catalog.pg_proc p
            WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid = d.objid
            UNION ALL
            SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::pg_catalog.regclass::text,
                   c.relowner, c.relacl
            FROM pg_catalog.pg_class c
            WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND c.oid = d.objid
            UNION ALL
            SELECT 'TYPE', t.oid::pg_catalog.regtype::text, t.typowner, t.typacl
            FROM pg_catalog.pg_type t
            WHERE d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid = d.objid
            ) o
        CROSS JOIN LATERAL pg_catalog.aclexplode(o.acl) a
        JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE a.grantee <> o.owner
          -- pg_monitor keeps what this script grants it
          AND NOT (a.grantee = 'pg_monitor'::pg_catalog.regrole
                   AND ((a.privilege_type = 'SELECT'
                         AND d.objid IN ('@extschema@.idem_stats'::pg_catalog.regclass,
                                         '@extschema@.idem_namespace_stats'::pg_catalog.regclass,
                                         '@extschema@.idem_namespaces'::pg_catalog.regclass,
                                         '@extschema@.idem_metrics'::pg_catalog.regclass))
                        OR (a.privilege_type = 'EXECUTE'
                            AND d.objid IN ('@extschema@.idem_stats_counters()'::pg_catalog.regprocedure,
                                            'idempotency_internal.idem_stats_counters()'::pg_catalog.regprocedure,
                                            'idempotency_internal.idem_stats_released_keys()'::pg_catalog.regprocedure,
                                            'idempotency_internal.idem_stats_recovery()'::pg_catalog.regprocedure,
                                            'idempotency_internal.idem_namespace_stats_figures()'::pg_catalog.regprocedure,
                                            'idempotency_internal.idem_namespace_counters()'::pg_catalog.regprocedure,
                                            'idempotency_internal.idem_metrics_figures()'::pg_catalog.regprocedure,
                                            'idempotency_internal.idem_metrics_stores()'::pg_catalog.regprocedure))))
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %I', x.privilege_type, x.kind, x.name, x.rolname);
    END LOOP;
    -- The schema (CREATE EXTENSION may have made it, under the defaults for
    -- schemas; it is no member of the extension): no one but its owner
    -- creates objects among the extension's, where they could stand in for
    -- its functions. USAGE too is only its owner's and pg_monitor's: the
    -- grants this script makes are recorded as the schema's initial
    -- privileges, which pg_dump leaves out and which would keep a role
    -- named there from being dropped; idem_grant gives an application's
    -- role USAGE when it grants it a namespace.
    FOR x IN
        SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE pg_catalog.quote_ident(r.rolname) END AS grantee,
               a.privilege_type
        FROM pg_catalog.pg_namespace n
        CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
        LEFT JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
        WHERE n.oid = '@extschema@'::pg_catalog.regnamespace AND a.grantee <> n.nspowner
          AND NOT (a.grantee = 'pg_monitor'::pg_catalog.regrole AND a.privilege_type = 'USAGE')
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON SCHEMA @extschema@ FROM %s CASCADE', x.privilege_type, x.grantee);
        IF x.privilege_type = 'CREATE' THEN
            RAISE WARNING 'idempotency: % may no longer create objects in schema @extschema@', x.grantee
                USING DETAIL = 'Only the schema''s owner creates objects among the extension''s, where they could stand in for its functions.';
        ELSE
            RAISE WARNING 'idempotency: % no longer has USAGE on schema @extschema@', x.grantee
                USING DETAIL = 'The extension''s schema starts with its owner''s and pg_monitor''s privileges only.',
                      HINT = 'idem_grant(namespace, role) gives a role USAGE with its namespace; or GRANT USAGE again after CREATE EXTENSION.';
        END IF;
    END LOOP;
    -- The plumbing's schema, which this script made: no one's privileges
    -- but PUBLIC's USAGE, which the grants above gave (no one could have
    -- created anything there yet).
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
