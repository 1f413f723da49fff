-- portable.sql: what bench/portable measures, loaded into each edition's
-- scratch database after the store: the bench's PL/pgSQL store
-- (contenders.sql's, its fingerprint swapped for idem_request_hash when
-- the database has the portable edition), the committed keys that replay
-- and mismatch read, the fingerprint's payloads, and the cycles procedure
-- that callgrind counts in a single-user backend.
CREATE SCHEMA portable_bench;

-- The bench's PL/pgSQL store: its schema here; its table and functions are
-- taken from contenders.sql by bench/portable.
CREATE SCHEMA plpgsql;

-- Payloads of about 1 KiB, 64 KiB and 1 MiB: objects of the bench's
-- request shape (keys out of order, strings, numbers, a nested array).
CREATE TABLE portable_bench.payloads (label text PRIMARY KEY, payload jsonb NOT NULL);
INSERT INTO portable_bench.payloads
SELECT label, (SELECT jsonb_agg(jsonb_build_object('sku', 'item-' || i, 'qty', i % 7, 'price', (i * 1.25)::numeric,
                                                     'note', repeat('x', 20), 'tags', jsonb_build_array('a', i, true)))
               FROM generate_series(1, n) i)
FROM (VALUES ('1 KiB', 9), ('64 KiB', 560), ('1 MiB', 9000)) v(label, n);

-- The cycles: n of one contender and scenario, each its own transaction,
-- as each request is (bench.cycles' shape). fresh: begin + commit of a new
-- key; replay and mismatch: a begin of one of the 1,000 committed keys;
-- batch_fresh and batch_replay: one idem_begin_batch of 500 keys (and 500
-- commits); fingerprint_*: idem_request_hash of a payload.
CREATE PROCEDURE portable_bench.cycles(contender text, scenario text, n integer, base bigint)
LANGUAGE plpgsql AS $$
DECLARE
    request jsonb := '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}';
    other jsonb := '{"amount": 101, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}';
    result jsonb := '{"payment_id": 7, "status": "captured"}';
    payload jsonb;
    keys text[];
    k text;
BEGIN
    IF scenario LIKE 'fingerprint%' THEN
        SELECT p.payload INTO payload FROM portable_bench.payloads p WHERE p.label = substr(scenario, 13);
    END IF;
    FOR i IN 1..n LOOP
        k := CASE scenario WHEN 'fresh' THEN (base + i)::text ELSE (i % 1000 + 1)::text END;
        IF scenario LIKE 'fingerprint%' THEN
            PERFORM idempotency.idem_request_hash(payload);
        ELSIF contender = 'plpgsql' THEN
            IF scenario = 'fresh' THEN
                PERFORM plpgsql.idem_begin('inbackend', k, request);
                PERFORM plpgsql.idem_commit('inbackend', k, result);
            ELSE
                PERFORM plpgsql.idem_begin('replay', k, CASE scenario WHEN 'replay' THEN request ELSE other END);
            END IF;
        ELSIF scenario = 'fresh' THEN
            PERFORM idempotency.idem_begin('inbackend', k, request);
            PERFORM idempotency.idem_commit('inbackend', k, result);
        ELSIF scenario IN ('replay', 'mismatch') THEN
            PERFORM idempotency.idem_begin('replay', k, CASE scenario WHEN 'replay' THEN request ELSE other END);
        ELSIF scenario = 'batch_fresh' THEN
            keys := ARRAY(SELECT (base * 1000 + i * 500 + j)::text FROM generate_series(1, 500) j);
            PERFORM count(*) FROM idempotency.idem_begin_batch('inbackend', keys, array_fill(request, ARRAY[500]));
            PERFORM count(idempotency.idem_commit('inbackend', x, result)) FROM unnest(keys) x;
        ELSIF scenario = 'batch_replay' THEN
            PERFORM count(*) FROM idempotency.idem_begin_batch('replay', ARRAY(SELECT j::text FROM generate_series(1, 500) j),
                                                               array_fill(request, ARRAY[500]));
        ELSE
            RAISE EXCEPTION 'unknown scenario %', scenario;
        END IF;
        COMMIT;
    END LOOP;
END;
$$;

-- The committed keys 1..1000 of namespace 'replay', for the store and the
-- PL/pgSQL one (loaded by bench/portable once its functions are there).
SELECT count(*) FROM generate_series(1, 1000) i,
       LATERAL idempotency.idem_begin('replay', i::text, '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}') o,
       LATERAL idempotency.idem_commit('replay', i::text, '{"payment_id": 7, "status": "captured"}') c;
