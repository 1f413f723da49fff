-- tables.sql: the store's table, the lock secret and the namespace registry
-- (created once: an update changes them with ALTER TABLE).

-- One row per (namespace, key), shared by every consumer in the database;
-- the namespace column keeps their keyspaces apart. Keys compare bytewise
-- (COLLATE "C"): a key is an opaque token, and C comparison is the fastest.
-- attempt counts takeovers of an abandoned in-progress record; fence is the
-- claim's, drawn at random; recovery_point and recovery_state are the
-- last a holder recorded (idem_save_point); with store_request off the
-- request is not kept. The columns stand in the order the update scripts
-- leave them, which the C code reads by number (a store the service owns
-- has the same first twelve, and the recovery columns next to keep
-- recovery points). The store's C code is the table's only writer and keeps its rules (the status, a 32-byte hash, the payload that
-- goes with each status) where it writes: CHECK constraints would be
-- compiled again by every statement that writes (docs/performance.md).
CREATE TABLE idempotency_record (
    namespace       text COLLATE "C" NOT NULL,
    key_value       text COLLATE "C" NOT NULL,
    status          text NOT NULL,
    request_hash    bytea NOT NULL,
    request_payload jsonb,
    result_payload  jsonb,
    error_payload   jsonb,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    attempt         integer NOT NULL DEFAULT 1,
    fence           bigint,
    recovery_point  text,
    recovery_state  jsonb,
    CONSTRAINT idempotency_record_pkey PRIMARY KEY (namespace, key_value)
);

-- Purge deletes in expires_at order; this index makes each chunk cheap.
CREATE INDEX idempotency_record_expires_at_idx ON idempotency_record (expires_at);

-- pg_dump keeps the rows (a dump without them would replay nothing).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idempotency_record', '');


-- The key that lock tags are keyed with: a role that reads pg_locks sees 64
-- bits of HMAC-SHA256(secret, namespace, key), against which it can test no
-- guess, and with which it can make no two keys collide. Only the owner reads
-- it. Not dumped: a restored database draws its own.
CREATE TABLE idempotency_internal.idem_lock_secret (
    secret bytea NOT NULL CONSTRAINT idem_lock_secret_size_check CHECK (pg_catalog.octet_length(secret) = 32)
);
CREATE UNIQUE INDEX idem_lock_secret_one_row ON idempotency_internal.idem_lock_secret ((true));
-- Two random UUIDs are 32 bytes with 244 random bits (pg_strong_random).
INSERT INTO idempotency_internal.idem_lock_secret
SELECT pg_catalog.decode(pg_catalog.replace(pg_catalog.gen_random_uuid()::text OPERATOR(pg_catalog.||)
                                            pg_catalog.gen_random_uuid()::text, '-', ''), 'hex');


-- The registry ---------------------------------------------------------------

-- One row per registered namespace. A NULL setting follows idem_defaults.
-- hash_keys has no default: it decides how keys are looked up, so it may
-- change only while the namespace has no records. store is
-- the table the namespace's records are kept in (idem_bind_store), NULL for
-- idempotency_record; regclass, so that a dump names it. fingerprint_ignore
-- lists the JSON Pointers its request fingerprint leaves out
-- (idem_namespace_fingerprint), NULL for none; like hash_keys it may change
-- only while the namespace has no records.
CREATE TABLE idem_namespace_config (
    namespace         text COLLATE "C" PRIMARY KEY,
    replay_window     interval,
    in_progress_lease interval,
    store_request     boolean,
    hash_keys         boolean NOT NULL DEFAULT false,
    max_payload_bytes integer,
    configured_at     timestamptz NOT NULL DEFAULT now(),
    store             regclass,
    store_name        text,
    fingerprint_ignore text[],
    CONSTRAINT idem_namespace_config_replay_window_check CHECK (replay_window > interval '0'),
    CONSTRAINT idem_namespace_config_lease_check
        CHECK (in_progress_lease >= interval '0' AND in_progress_lease < interval '100 years'),
    CONSTRAINT idem_namespace_config_max_payload_bytes_check CHECK (max_payload_bytes > 0)
);

-- Which roles may use a namespace (and, through membership, their members).
-- regrole: pg_dump writes role names, so a restore maps them to the new OIDs.
CREATE TABLE idem_namespace_grant (
    namespace  text COLLATE "C" NOT NULL
        REFERENCES idem_namespace_config ON DELETE CASCADE,
    grantee    regrole NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    grantee_name text,
    PRIMARY KEY (namespace, grantee)
);

SELECT pg_catalog.pg_extension_config_dump('@extschema@.idem_namespace_config', '');
-- A grant to a role that was dropped names an OID no role has: a dump
-- leaves it out, so that a restore never hands it to whichever role has
-- that OID there.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idem_namespace_grant',
    'WHERE EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) grantee)');
