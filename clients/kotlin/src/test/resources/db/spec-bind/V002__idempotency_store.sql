-- Moving in: the specification's table becomes the service's store. The
-- columns a store has beyond the seed's (the ALTER TABLE that
-- idem_bind_store's hint gives), request_payload nullable (its refusal's
-- detail), then the binding and the grants. The extension is installed.
ALTER TABLE public.idempotency_record
    ADD COLUMN attempt integer NOT NULL DEFAULT 1,
    ADD COLUMN fence bigint,
    ADD COLUMN recovery_point text,
    ADD COLUMN recovery_state jsonb;
ALTER TABLE public.idempotency_record ALTER COLUMN request_payload DROP NOT NULL;
SELECT idempotency.idem_bind_store('${namespace}', 'public.idempotency_record');
SELECT idempotency.idem_grant('${namespace}', '${app_role}');
GRANT EXECUTE ON FUNCTION idempotency.idem_purge(integer, integer) TO "${app_role}";
