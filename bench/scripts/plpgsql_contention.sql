-- plpgsql, contention: many clients on 8 hot keys per round; a fresh answer
-- writes one business row and commits; every answer is tallied.
\set key :round * 1000 + random(1, 8)
BEGIN;
SELECT (kind = 'fresh')::int AS fresh, kind::text AS kind FROM plpgsql.idem_begin(:ns, :key, '{"amount": 100, "currency": "EUR", "customer": "c-42", "items": [{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}]}') \gset
\if :fresh
INSERT INTO bench.business VALUES ('plpgsql', :round, :key);
SELECT plpgsql.idem_commit(:ns, :key, '{"payment_id": 7, "status": "captured"}');
\endif
INSERT INTO bench.tally VALUES ('plpgsql', :round, :kind);
END;
