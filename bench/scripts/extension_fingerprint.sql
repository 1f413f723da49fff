-- extension, fingerprint: idem_request_hash of one stored payload.
SELECT idempotency.idem_request_hash(payload) FROM bench.payloads WHERE id = :id;
