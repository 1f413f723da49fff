-- types.sql: what idem_begin answers.

-- What idem_begin answers (the specification's IdempotencyOutcome variants).
CREATE TYPE idem_kind AS ENUM ('fresh', 'in_flight', 'prior_result', 'prior_error', 'mismatch');

-- idem_begin's answer. result is set for prior_result, error for
-- prior_error; recorded_request, recorded_hash and submitted_hash for
-- mismatch (submitted_hash is set on every answer); attempt and fence for
-- fresh (the attempt number, 1 or more after takeovers, and the fence the
-- transitions may require); age for in_flight (how long ago the holder
-- claimed the key). The type only ever grows at its end
-- (docs/internals.md).
CREATE TYPE idem_outcome AS (
    kind             @extschema@.idem_kind,
    result           jsonb,
    error            jsonb,
    recorded_request jsonb,
    recorded_hash    bytea,
    submitted_hash   bytea,
    attempt          integer,
    age              interval,
    fence            bigint,
    lease_ends_at    timestamptz,
    takeover         boolean,
    recovery_point   text,
    recovery_state   jsonb
);
