-- citus.native.sql: what Citus says of a table, in the library (its
-- registry as reference tables and its entry points: citus.sql).

-- How Citus distributes a table: NULL (it does not), 'key_value' or
-- 'namespace' (hash-distributed by that column, one copy of each shard), 'other'. What
-- pg_dist_partition already tells every role.
CREATE OR REPLACE FUNCTION idem_store_distribution(store regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_store_distribution'
LANGUAGE C STABLE PARALLEL SAFE;
