-- stores.native.sql: what the library does for stores the service owns:
-- the shape check, and purge, request scrub, counts and statistics run as
-- each table's owner (src/pg/store_admin.cpp). (The guard against dropping
-- a bound table is in stores.sql, its event trigger in triggers.native.sql.)

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
