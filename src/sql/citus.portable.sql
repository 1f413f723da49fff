-- citus.portable.sql: what Citus says of a table, read from its catalog in
-- PL/pgSQL (the portable edition; citus.native.sql has the library's).
-- The portable edition runs its statements on the server it is installed
-- on: a store Citus distributes needs the native edition (docs/managed.md).

-- How Citus distributes a table: NULL (it does not, or Citus is not
-- here), 'key_value' or 'namespace' (hash-distributed by that column, one
-- copy of each shard), 'other'.
CREATE OR REPLACE FUNCTION idem_store_distribution(store regclass)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    t record;
BEGIN
    IF store IS NULL OR to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE 'SELECT p.partmethod, p.repmodel, pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) AS col'
            ' FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1'
        INTO t USING store;
    IF t IS NULL THEN
        RETURN NULL;
    ELSIF t.partmethod = 'h' AND t.repmodel = 's' AND t.col IN ('namespace', 'key_value') THEN
        RETURN t.col;
    END IF;
    RETURN 'other';
END;
$$;
