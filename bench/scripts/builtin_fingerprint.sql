-- built-in, fingerprint: sha256 of jsonb's text form of the same payload.
SELECT sha256(convert_to(payload::text, 'UTF8')) FROM bench.payloads WHERE id = :id;
