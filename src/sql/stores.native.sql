-- stores.native.sql: what the library does for stores the service owns:
-- the shape check, and purge, request scrub, counts and statistics run as
-- each table's owner (src/pg/store_admin.cpp); and the guard against
-- dropping a bound table (its event trigger: triggers.native.sql).

-- What is wrong with a table as a store (NULLs: nothing), and for an older
-- shape the ALTER TABLE that fixes it.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_problem(store regclass, OUT problem text, OUT fix text)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_store_problem_1_0'
LANGUAGE C STABLE PARALLEL SAFE;

-- One chunk of purge from a store (NULL: the extension's table),
-- and the requests a namespace's records kept there removed, both as the
-- store table's owner: a delete or an update run as the extension's owner
-- would run that table's triggers with the extension owner's rights.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_purge(store regclass, batch_size integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_store_purge_1_0'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_forget_requests(store regclass, namespace text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_store_forget_requests_1_0'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- How many records (or, with in_progress_only, records in
-- progress) a namespace has in a store (NULL: the extension's table; 0 for
-- one that was dropped), and idem_namespace_stats's figures for a store:
-- both read the store as its owner, never as the extension's.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_count(store regclass, namespace text, in_progress_only boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'idem_store_count_1_0'
LANGUAGE C STABLE PARALLEL UNSAFE;

CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_stats(store regclass)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'idem_store_stats_1_0'
LANGUAGE C STABLE PARALLEL UNSAFE;


-- A table a namespace is bound to cannot be dropped (DROP TABLE, DROP
-- SCHEMA ... CASCADE, DROP OWNED): the namespace's records would go with it
-- and its retries begin again, and the registry would keep an OID that a
-- later table, or a restored dump, could give another table. Bind the
-- namespace elsewhere first. (The store calls still refuse a store that is
-- gone, for a drop made with event triggers off.)
CREATE OR REPLACE FUNCTION idempotency_internal.idem_refuse_dropping_a_store()
RETURNS event_trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    bound record;
BEGIN
    IF to_regclass('@extschema@.idem_namespace_config') IS NULL THEN
        RETURN;   -- the registry itself is being replaced (a Citus conversion)
    END IF;
    -- On a Citus worker a drop is the coordinator's, relayed: the
    -- coordinator has checked it, and a query of the registry (a reference
    -- table) inside Citus's relayed command would be refused.
    IF EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'citus') THEN
        IF (SELECT l.groupid FROM pg_dist_local_group l) <> 0 THEN
            RETURN;
        END IF;
    END IF;
    SELECT c.namespace, d.object_identity INTO bound
    FROM pg_event_trigger_dropped_objects() d
    JOIN @extschema@.idem_namespace_config c ON c.store::oid OPERATOR(pg_catalog.=) d.objid
    WHERE d.classid OPERATOR(pg_catalog.=) 'pg_class'::regclass AND d.objsubid OPERATOR(pg_catalog.=) 0
    ORDER BY c.namespace LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'cannot drop table %: idempotency namespace "%" is bound to it', bound.object_identity, bound.namespace
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = 'The namespace''s records are kept there; dropped, its retries would begin again.',
                  HINT = 'Bind the namespace to another store with idem_bind_store, or drop the namespace with idem_namespace_drop once its records are gone.';
    END IF;
END;
$$;
