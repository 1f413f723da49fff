/* idempotency--0.1.0--0.2.0.sql: release 0.2.0 adds the store. */

\echo Use "ALTER EXTENSION idempotency UPDATE TO '0.2.0'" to load this file. \quit

-- What idem_begin answers (the seed's IdempotencyOutcome variants).
CREATE TYPE idem_kind AS ENUM ('fresh', 'in_flight', 'prior_result', 'prior_error', 'mismatch');

-- idem_begin's answer. result is set for prior_result, error for
-- prior_error; recorded_request, recorded_hash and submitted_hash for
-- mismatch (submitted_hash is set on every answer).
CREATE TYPE idem_outcome AS (
    kind             @extschema@.idem_kind,
    result           jsonb,
    error            jsonb,
    recorded_request jsonb,
    recorded_hash    bytea,
    submitted_hash   bytea
);

-- One row per (namespace, key), shared by every consumer in the database;
-- the namespace column keeps their keyspaces apart. Keys compare bytewise
-- (COLLATE "C"): a key is an opaque token, and C comparison is the fastest.
CREATE TABLE idempotency_record (
    namespace       text COLLATE "C" NOT NULL,
    key_value       text COLLATE "C" NOT NULL,
    status          text NOT NULL,
    request_hash    bytea NOT NULL,
    request_payload jsonb NOT NULL,
    result_payload  jsonb,
    error_payload   jsonb,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    CONSTRAINT idempotency_record_pkey PRIMARY KEY (namespace, key_value),
    CONSTRAINT idempotency_record_status_check
        CHECK (status IN ('in_progress', 'committed', 'failed')),
    CONSTRAINT idempotency_record_request_hash_check
        CHECK (octet_length(request_hash) = 32),
    CONSTRAINT idempotency_record_outcome_check CHECK (
        CASE status
            WHEN 'in_progress' THEN result_payload IS NULL AND error_payload IS NULL
            WHEN 'committed'   THEN result_payload IS NOT NULL AND error_payload IS NULL
            WHEN 'failed'      THEN result_payload IS NULL AND error_payload IS NOT NULL
        END)
);

-- Purge deletes in expires_at order; this index makes each chunk cheap.
CREATE INDEX idempotency_record_expires_at_idx ON idempotency_record (expires_at);

-- pg_dump keeps the rows (a dump without them would replay nothing).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idempotency_record', '');

-- Applications go through the functions, never the table.
REVOKE ALL ON idempotency_record FROM PUBLIC;

-- Volatility of the store functions: VOLATILE (they read and write the
-- table and depend on the transaction), not STRICT (a NULL argument is an
-- error that says which), PARALLEL UNSAFE (they write).

CREATE FUNCTION idem_begin(namespace text, key text, request jsonb, replay_window interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_begin(text, text, jsonb, interval) IS
'Starts an idempotent operation: fresh (go ahead), in_flight, prior_result, prior_error or mismatch';

CREATE FUNCTION idem_commit(namespace text, key text, result jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_commit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_commit(text, text, jsonb) IS
'Records the result of an in-progress operation for replay';

CREATE FUNCTION idem_fail_permanent(namespace text, key text, error jsonb)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_permanent'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_fail_permanent(text, text, jsonb) IS
'Records a permanent error ({"class_tag", "message", "cause"?}) of an in-progress operation for replay';

CREATE FUNCTION idem_fail_transient(namespace text, key text)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_transient'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_fail_transient(text, text) IS
'Forgets an in-progress operation so that the next idem_begin is fresh';

-- Deletes expired rows, batch_size at a time (at most max_batches chunks
-- when given), inside the caller's transaction. SKIP LOCKED: a row another
-- transaction holds is neither waited for nor deleted; rows that other
-- transactions have not committed are invisible here, so untouched too.
CREATE FUNCTION idem_purge(batch_size integer DEFAULT 10000, max_batches integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    total bigint := 0;
    batches integer := 0;
    n bigint;
BEGIN
    IF batch_size IS NULL OR batch_size < 1 THEN
        RAISE EXCEPTION 'invalid purge batch size'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('batch_size must be a positive integer, not %s.', coalesce(batch_size::text, 'NULL'));
    END IF;
    IF max_batches < 1 THEN
        RAISE EXCEPTION 'invalid purge batch count'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('max_batches must be a positive integer or NULL, not %s.', max_batches);
    END IF;
    LOOP
        WITH doomed AS (
            SELECT ctid FROM @extschema@.idempotency_record
            WHERE expires_at < now()
            ORDER BY expires_at
            LIMIT batch_size
            FOR UPDATE SKIP LOCKED)
        DELETE FROM @extschema@.idempotency_record r USING doomed d WHERE r.ctid = d.ctid;
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
        batches := batches + 1;
        EXIT WHEN n < batch_size OR batches = max_batches;
    END LOOP;
    RETURN total;
END;
$$;

COMMENT ON FUNCTION idem_purge(integer, integer) IS
'Deletes expired records in chunks inside the current transaction; returns how many';

-- The same, committing after every chunk, for pg_cron and operators purging
-- millions of rows: no lock or snapshot is held longer than one chunk.
-- CALL it outside an explicit transaction block.
CREATE PROCEDURE idem_purge_batches(batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $$
DECLARE
    n bigint;
    batches integer := 0;
    total bigint := 0;
BEGIN
    LOOP
        n := @extschema@.idem_purge(batch_size, 1);
        total := total + n;
        batches := batches + 1;
        COMMIT;
        EXIT WHEN n < batch_size;
    END LOOP;
    RAISE NOTICE 'idempotency: purged % expired records in % batches', total, batches;
END;
$$;

COMMENT ON PROCEDURE idem_purge_batches(integer) IS
'Deletes expired records, committing after every chunk (for pg_cron); CALL outside a transaction block';
