-- lean, replay: one SELECT of a committed key on the ceiling's table, for a
-- caller who reads first; no fingerprint, so it cannot tell a replay from a
-- mismatch (request_hash.sql measures that part alone).
\set k random(1, :nkeys)
SELECT status, request_hash, request_payload, result_payload, error_payload FROM ceiling.record WHERE namespace = :ns AND key_value = :k;
