-- Moving in, with the recorded fingerprints computed again by the store. The
-- columns a store has beyond the seed's (the ALTER TABLE that
-- idem_bind_store's hint gives), request_payload nullable (its refusal's
-- detail), then the binding and the grants. The extension is installed.
ALTER TABLE public.idempotency_record
    ADD COLUMN attempt integer NOT NULL DEFAULT 1,
    ADD COLUMN fence bigint,
    ADD COLUMN recovery_point text,
    ADD COLUMN recovery_state jsonb;
ALTER TABLE public.idempotency_record ALTER COLUMN request_payload DROP NOT NULL;
-- The recorded fingerprints again, as the store computes them from the
-- recorded requests (jsonb keeps numbers as numbers): a retry whose JSON
-- text differs from its canonical form (1e2, -0) then replays too.
UPDATE public.idempotency_record SET request_hash = idempotency.idem_request_hash(request_payload);
SELECT idempotency.idem_bind_store('${namespace}', 'public.idempotency_record');
SELECT idempotency.idem_grant('${namespace}', '${app_role}');
GRANT EXECUTE ON FUNCTION idempotency.idem_purge(integer, integer) TO "${app_role}";
