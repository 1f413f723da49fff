-- update_keys: records that 0.4.1 made from quoted Idempotency-Key headers
-- still answer their retries after the update to 0.5.0. 0.4.1's
-- idem_http_key took the field value with its double quotes as the key;
-- 0.5.0's takes the string inside them, so without the update's copies a
-- retry sent before the update and again after it would answer fresh: a
-- second effect for one request.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idempotency;
RESET client_min_messages;
SET search_path = public, idempotency;
CREATE EXTENSION idempotency VERSION '0.4.1';
SELECT namespace FROM idem_namespace_configure('hashed', hash_keys => true);

-- The records 0.4.1 wrote, as it wrote them (this release's library no
-- longer serves a 0.4.1 schema: docs/compatibility.md): the key as
-- idem_http_key took it, stored hashed in a hash_keys namespace.
CREATE FUNCTION pg_temp.recorded(ns text, header text, request jsonb, final text, payload jsonb,
                                 hashed boolean DEFAULT false, keep interval DEFAULT '24 hours')
RETURNS text LANGUAGE sql AS $$
    INSERT INTO idempotency_record (namespace, key_value, status, request_hash, request_payload,
                                    result_payload, error_payload, created_at, updated_at, expires_at)
    SELECT ns, CASE WHEN hashed THEN encode(sha256(convert_to(h.key, 'UTF8')), 'hex') ELSE h.key END, final,
           idem_request_hash(request), request,
           CASE final WHEN 'committed' THEN payload END, CASE final WHEN 'failed' THEN payload END,
           now(), now(), now() + keep
    FROM idem_http_key(ns, header) h
    RETURNING key_value
$$;

-- 0.4.1: a client that follows the draft, one that sends the key bare, a
-- recorded error, one in flight under a lease, and a hashed namespace.
SELECT namespace FROM idem_namespace_configure('leased', in_progress_lease => '1 hour');
SELECT h.key AS key_041 FROM idem_http_key('payments', '"8e03978e-40d5"') h \gset
SELECT :'key_041' AS key_in_041;
SELECT pg_temp.recorded('payments', '"8e03978e-40d5"', '{"amount": 100}', 'committed', '{"status": 201, "body": {"payment": 1}}');
SELECT pg_temp.recorded('payments', 'bare-1', '{"amount": 5}', 'committed', '{"payment": 2}');
SELECT pg_temp.recorded('payments', '"declined-1"', '{"amount": 7}', 'failed', '{"class_tag": "Declined", "message": "no funds"}');
SELECT pg_temp.recorded('leased', '"running-1"', '{"job": 1}', 'in_progress', NULL);
SELECT pg_temp.recorded('hashed', '"h-1"', '{"amount": 9}', 'committed', '{"payment": 3}', true) IS NOT NULL AS hashed;
-- Two clients whose keys only 0.4.1 told apart (bare ord-77 and quoted
-- "ord-77"), and a quoted key that 0.5.0 refuses (blank inside the quotes).
SELECT pg_temp.recorded('payments', 'ord-77', '{"amount": 100}', 'committed', '{"payment": "A-1"}');
SELECT pg_temp.recorded('payments', '"ord-77"', '{"amount": 100}', 'committed', '{"payment": "B-9"}');
SELECT pg_temp.recorded('payments', '"   "', '{"amount": 5}', 'committed', '{"payment": "C-3"}');
-- A record past its replay window has no retries left to answer.
SELECT pg_temp.recorded('payments', '"old-1"', '{"amount": 1}', 'committed', '{}', keep => '-1 second');

-- The update copies each finished record of a quoted key still in its
-- window to the key 0.5.0 finds in the same header, and warns of what it
-- could not copy: the in-progress one, "ord-77" (its key without quotes is
-- the other client's), "   " and the hashed one.
ALTER EXTENSION idempotency UPDATE;
SELECT namespace, key_value, status, result_payload, error_payload
FROM idempotency_record ORDER BY namespace, key_value;

-- The client's retry, same header, same request: a replay, not fresh.
SELECT h.key AS key_050 FROM idem_http_key('payments', '"8e03978e-40d5"') h \gset
SELECT :'key_050' AS key_in_050;
BEGIN;
SELECT kind, result FROM idem_begin('payments', :'key_050', '{"amount": 100}');
ROLLBACK;
-- The error replays too, and the old keys answer as they did.
BEGIN;
SELECT kind, error FROM idem_begin('payments', (SELECT key FROM idem_http_key('payments', '"declined-1"')), '{"amount": 7}');
SELECT kind FROM idem_begin('payments', '"8e03978e-40d5"', '{"amount": 100}');
SELECT kind FROM idem_begin('payments', 'bare-1', '{"amount": 5}');
ROLLBACK;


-- A store the service owns without the recovery columns (0.7.0's shape),
-- bound under 0.9.2: the update to 1.0.0 warns of it with the ALTER TABLE
-- to run, its namespace's calls are refused until then, and work after.
SET client_min_messages = warning;
DROP EXTENSION idempotency;
RESET client_min_messages;
CREATE EXTENSION idempotency VERSION '0.9.2';
CREATE TABLE public.shape_07 (
    namespace text COLLATE "C" NOT NULL, key_value text COLLATE "C" NOT NULL, status text NOT NULL,
    request_hash bytea NOT NULL, request_payload jsonb, result_payload jsonb, error_payload jsonb,
    created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, expires_at timestamptz NOT NULL,
    attempt integer NOT NULL DEFAULT 1, fence bigint, PRIMARY KEY (namespace, key_value));
CREATE INDEX ON public.shape_07 (expires_at);
SELECT namespace FROM idem_namespace_configure('old-store');
-- (bound as 0.7.0's idem_bind_store did; this library checks the shape 1.0.0 needs)
UPDATE idem_namespace_config SET store = 'public.shape_07', store_name = 'public.shape_07' WHERE namespace = 'old-store';
-- A role granted 0.9's idem_stats_counters() keeps calling it by that
-- (deprecated) name after the update; a role that could write the registry
-- may read the defaults idem_namespace_configure now reads.
CREATE ROLE regress_idem_monitor;
CREATE ROLE regress_idem_configurer;
GRANT USAGE ON SCHEMA idempotency TO regress_idem_monitor, regress_idem_configurer;
GRANT EXECUTE ON FUNCTION idem_stats_counters() TO regress_idem_monitor;
GRANT SELECT, INSERT, UPDATE ON idem_namespace_config TO regress_idem_configurer;
ALTER EXTENSION idempotency UPDATE;
SET ROLE regress_idem_monitor;
SELECT counters_on FROM idem_stats_counters();
RESET ROLE;
SELECT has_table_privilege('regress_idem_configurer', 'idem_defaults', 'SELECT') AS configurer_reads_defaults;
DROP OWNED BY regress_idem_monitor, regress_idem_configurer;
DROP ROLE regress_idem_monitor, regress_idem_configurer;
BEGIN;
SELECT kind FROM idem_begin('old-store', 'k-1', '{}');
ROLLBACK;
ALTER TABLE public.shape_07 ADD COLUMN recovery_point text, ADD COLUMN recovery_state jsonb;
BEGIN;
SELECT kind FROM idem_begin('old-store', 'k-1', '{}');
ROLLBACK;
SELECT idem_bind_store('old-store', NULL) IS NULL AS unbound, idem_namespace_drop('old-store') AS dropped;
DROP TABLE public.shape_07;

SET client_min_messages = warning;
DROP EXTENSION idempotency;
RESET client_min_messages;
CREATE EXTENSION idempotency;
