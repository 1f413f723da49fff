-- purge.sql: deleting expired records from every store, in chunks, with
-- one store's failure kept to itself (idempotency_internal.idem_store_purge).

-- Deletes expired rows, batch_size at a time (at most max_batches chunks
-- that deleted something, when given), inside the caller's transaction,
-- from the extension's table and every store a namespace is bound to.
-- SKIP LOCKED: a row another transaction holds is neither waited for nor
-- deleted; rows that other transactions have not committed are invisible
-- here, so untouched too. An in_progress record whose lease still runs is
-- never deleted. Purging crosses namespaces: it runs as the owner, for the
-- roles the owner grants it to (the pg_cron job's, an operator's), not for
-- PUBLIC.
CREATE OR REPLACE FUNCTION idem_purge(batch_size integer DEFAULT 10000, max_batches integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    total bigint := 0;
    batches integer := 0;
    n bigint;
    store regclass;
    problem text;
BEGIN
    IF batch_size IS NULL OR batch_size < 1 THEN
        RAISE EXCEPTION 'invalid purge batch size'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('batch_size must be a positive integer, not %s.', coalesce(batch_size::text, 'NULL'));
    END IF;
    IF max_batches < 1 THEN
        RAISE EXCEPTION 'invalid purge batch count'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('max_batches must be a positive integer or NULL, not %s.', max_batches);
    END IF;
    -- The extension's table first, then every table a namespace is bound to
    -- (one that was dropped has nothing left to purge). Each chunk is deleted
    -- by idem_store_purge, as its table's owner, under the server's lease
    -- and each namespace's, in a subtransaction of its own: a store whose
    -- chunk fails or runs past idempotency.maintenance_timeout answers NULL
    -- (reported in a WARNING), and the others are still purged.
    FOR store IN
        SELECT NULL::regclass
        UNION ALL
        (SELECT DISTINCT c.store FROM @extschema@.idem_namespace_config c
         WHERE c.store IS NOT NULL AND EXISTS (SELECT FROM pg_class t WHERE t.oid = c.store) ORDER BY 1)
    LOOP
        -- A store that can no longer be used (its shape changed) is
        -- skipped, so that the others are still purged.
        problem := (SELECT p.problem FROM idempotency_internal.idem_store_problem(store) p);
        IF problem IS NOT NULL THEN
            RAISE WARNING 'idempotency: cannot purge %: %', store, problem;
            CONTINUE;
        END IF;
        LOOP
            n := idempotency_internal.idem_store_purge(store, batch_size);
            EXIT WHEN n IS NULL;
            total := total + n;
            IF n > 0 THEN
                batches := batches + 1;   -- max_batches counts the chunks that deleted something
            END IF;
            EXIT WHEN n < batch_size OR batches = max_batches;
        END LOOP;
        EXIT WHEN batches = max_batches;
    END LOOP;
    PERFORM idempotency_internal.idem_stats_count_purged(total);
    RETURN total;
END;
$$;

COMMENT ON FUNCTION idem_purge(integer, integer) IS
'Deletes expired records in chunks inside the current transaction; returns how many';

-- The same, committing after every chunk, for pg_cron and operators purging
-- millions of rows: no lock is held longer than one chunk, nor a snapshot
-- longer than a chunk or a pause, and idempotency.purge_pause (at most 10 s)
-- spaces the chunks out so that requests running meanwhile keep the cores
-- and the WAL. CALL it outside an explicit transaction block. A procedure that commits
-- cannot pin search_path with SET, so its operators are schema-qualified.
CREATE OR REPLACE PROCEDURE idem_purge_batches(batch_size integer DEFAULT 10000)
LANGUAGE plpgsql
AS $$
DECLARE
    n bigint;
    batches integer := 0;
    total bigint := 0;
    pause text;
BEGIN
    LOOP
        n := @extschema@.idem_purge(batch_size, 1);
        COMMIT;
        EXIT WHEN n OPERATOR(pg_catalog.=) 0;   -- every store is purged (one chunk may end a store, not all)
        total := total OPERATOR(pg_catalog.+) n;
        batches := batches OPERATOR(pg_catalog.+) 1;
        -- idempotency.purge_pause (read after the chunk: the library that
        -- defines it is loaded by then), e.g. '10ms'.
        -- The portable edition reads it as a placeholder: capped here too.
        pause := pg_catalog.current_setting('idempotency.purge_pause', true);
        IF pause OPERATOR(pg_catalog.<>) '0' THEN
            PERFORM pg_catalog.pg_sleep(LEAST(pg_catalog.date_part('epoch', pause::pg_catalog.interval), 10));
        END IF;
    END LOOP;
    RAISE NOTICE 'idempotency: purged % expired records in % batches', total, batches;
END;
$$;

COMMENT ON PROCEDURE idem_purge_batches(integer) IS
'Deletes expired records, committing after every chunk (for pg_cron); CALL outside a transaction block';
