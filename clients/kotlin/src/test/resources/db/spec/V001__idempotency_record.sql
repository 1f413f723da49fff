-- The specification's library: each consuming service shipped this table
-- in its own migration (test-only: the seed's shape, as the extension's
-- 0.2.0 table mirrors it).
CREATE TABLE public.idempotency_record (
    namespace       text NOT NULL,
    key_value       text NOT NULL,
    status          text NOT NULL,
    request_hash    bytea NOT NULL,
    request_payload jsonb NOT NULL,
    result_payload  jsonb,
    error_payload   jsonb,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (namespace, key_value),
    CHECK (status IN ('in_progress', 'committed', 'failed')),
    CHECK (octet_length(request_hash) = 32),
    CHECK (CASE status
             WHEN 'in_progress' THEN result_payload IS NULL AND error_payload IS NULL
             WHEN 'committed'   THEN result_payload IS NOT NULL AND error_payload IS NULL
             WHEN 'failed'      THEN result_payload IS NULL AND error_payload IS NOT NULL
           END)
);
CREATE INDEX idempotency_record_expires_at_idx ON public.idempotency_record (expires_at);
