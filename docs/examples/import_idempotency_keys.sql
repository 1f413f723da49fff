-- import_idempotency_keys.sql: moving in from a hand-written idempotency
-- table (docs/managed.md, "Moving in"). Run once, with psql, as the role
-- that owns the store (the extension's or the plain script's owner),
-- before the application switches to idem_begin:
--
--   psql -v ON_ERROR_STOP=1 -v ns=payments -v old=public.idempotency_keys -f import_idempotency_keys.sql
--
-- :ns is the namespace the application will use, :old the table, which has
-- (rename the columns below to yours):
--   key          text         the Idempotency-Key the client sent
--   request      jsonb        the request, when it was kept (else NULL)
--   request_hash bytea        a 32-byte SHA-256 of the request, when only that was kept
--   status       text         'succeeded', 'failed', or anything else for "still running"
--   response     jsonb        what a retry was answered (the result, or the error)
--   created_at   timestamptz
--   expires_at   timestamptz  until when a retry is answered from the row
--
-- Each row still inside its window becomes a record of the namespace, as
-- the store would have written it:
--   succeeded  -> committed, result = response: a retry with the same
--                 request replays it (prior_result), another request is a
--                 mismatch carrying the recorded one;
--   failed     -> failed, error = {"class_tag": "ImportedError",
--                 "message": response as text}: a retry answers prior_error;
--   otherwise  -> in_progress, a claim nobody holds: a retry answers
--                 in_flight until the row's window ends, then takes it over
--                 (fresh, attempt 2, takeover true: the work before the
--                 switch may or may not have run, as after any abandoned
--                 claim).
-- A row with the request is fingerprinted as idem_begin fingerprints it
-- (the namespace's fingerprint_ignore applied). A row with only its own
-- hash keeps that hash: no fingerprint of a retry equals it, so every retry
-- answers mismatch (never fresh), with recorded_hash = the old hash, which
-- the application can recognise. A key the store would refuse (blank,
-- over 255 characters, a control character) stops the import, named; the
-- namespace's hash_keys is honoured; a key already in the namespace is
-- kept as it is. Nothing is written unless every row can be.
\set ON_ERROR_STOP 1
-- The records go to the extension's table: a namespace bound to a store of
-- its own (idem_bind_store) is imported into that table instead (change the
-- INSERT's target).
SELECT NOT EXISTS (SELECT FROM idempotency.idem_namespace_config c WHERE c.namespace = :'ns' AND c.store IS NOT NULL)
       AS own_table \gset
\if :own_table
\else
\echo 'namespace' :ns 'is bound to a store of its own: change the INSERT below to write there'
\quit
\endif
BEGIN;
SELECT idempotency.idem_namespace_configure(:'ns') IS NOT NULL AS namespace_registered;
INSERT INTO idempotency.idempotency_record
    (namespace, key_value, status, request_hash, request_payload, result_payload, error_payload,
     created_at, updated_at, expires_at, attempt, fence)
SELECT :'ns',
       CASE WHEN c.hash_keys THEN pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(k.parsed, 'UTF8')), 'hex')
            ELSE k.parsed END,
       k.state,
       CASE WHEN k.request IS NOT NULL THEN idempotency.idem_request_hash(k.request, c.fingerprint_ignore)
            ELSE k.request_hash END,
       CASE WHEN coalesce(c.store_request, d.store_request, true) THEN k.request END,
       CASE WHEN k.state = 'committed' THEN coalesce(k.response, 'null'::jsonb) END,
       CASE WHEN k.state = 'failed'
            THEN pg_catalog.jsonb_build_object('class_tag', 'ImportedError', 'message', coalesce(k.response::text, '')) END,
       k.created_at, k.created_at, k.expires_at, 1,
       -- a claim's fence, drawn at random above 2^32 as the store draws one
       CASE WHEN k.state = 'in_progress'
            THEN ((('x' || pg_catalog.md5(pg_catalog.gen_random_uuid()::text))::bit(64)::bigint
                  & 9223372036854775807) | 4294967296) END
FROM (SELECT idempotency.idem_parse(:'ns', o.key) AS parsed, o.request, o.request_hash, o.response,
             o.created_at, o.expires_at,
             CASE o.status WHEN 'succeeded' THEN 'committed' WHEN 'failed' THEN 'failed' ELSE 'in_progress' END AS state
      FROM :old o
      WHERE o.expires_at > pg_catalog.now()) k
LEFT JOIN idempotency.idem_namespace_config c ON c.namespace = :'ns'
LEFT JOIN idempotency.idem_defaults d ON true
WHERE k.request IS NOT NULL OR pg_catalog.octet_length(k.request_hash) = 32
ON CONFLICT DO NOTHING;
-- Rows that could not be imported: neither the request nor a 32-byte hash.
SELECT count(*) AS rows_not_imported FROM :old o
WHERE o.expires_at > pg_catalog.now() AND o.request IS NULL AND pg_catalog.octet_length(o.request_hash) IS DISTINCT FROM 32;
COMMIT;
