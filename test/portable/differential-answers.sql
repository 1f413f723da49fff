-- differential-answers.sql: each corpus row's answers in one edition (run
-- by test/bin/portable's differential layer in both, then compared line
-- by line): the canonical text's MD5 and length, the fingerprint (with the
-- row's ignore pointers when it has them), the minted key; an error as its
-- SQLSTATE and message.
\pset format unaligned
\pset tuples_only on
CREATE FUNCTION pg_temp.try(statement text, c corpus) RETURNS text LANGUAGE plpgsql AS $$
DECLARE answer text;
BEGIN
    EXECUTE statement INTO answer USING c.doc, c.ignore, c.parts;
    RETURN coalesce(answer, 'NULL');
EXCEPTION WHEN others THEN
    RETURN SQLSTATE || ' ' || SQLERRM;
END;
$$;
SELECT c.id, c.what,
       CASE WHEN c.doc IS NOT NULL THEN pg_temp.try(CASE WHEN c.ignore IS NULL
           THEN 'SELECT md5(t) || '' '' || octet_length(t) FROM idempotency.idem_canonical($1) t'
           ELSE 'SELECT md5(t) || '' '' || octet_length(t) FROM idempotency.idem_canonical($1, $2) t' END, c) END AS canonical,
       CASE WHEN c.doc IS NOT NULL THEN pg_temp.try(CASE WHEN c.ignore IS NULL
           THEN 'SELECT encode(idempotency.idem_request_hash($1), ''hex'')'
           ELSE 'SELECT encode(idempotency.idem_request_hash($1, $2), ''hex'')' END, c) END AS fingerprint,
       CASE WHEN c.parts IS NOT NULL THEN pg_temp.try('SELECT idempotency.idem_mint(''diff'', $3)', c) END AS minted
FROM corpus c ORDER BY c.id;
