-- store.portable.sql: the store in PL/pgSQL (the portable edition;
-- store.native.sql declares the library's). How it works, and where it
-- differs from the library, is in docs/managed.md:
--   * A claim is a row written in progress, and the key's lock (an advisory
--     lock keyed with the lock secret, idem_tag) held by the claiming
--     transaction to its end: another transaction cannot see the row before
--     it commits, but it finds the lock taken, without waiting, and answers
--     in_flight (or waits for it, in_flight_wait).
--   * A finished record (committed or failed) is final, and is answered from
--     a first look without any lock, as the library does.
--   * The COMMIT of a transaction with a claim left in progress in a
--     namespace without a lease is refused by a deferred constraint trigger
--     on the claim's mark (idem_open_claims, idem_claim_guard).
-- The API's functions (below) run as their caller and pass who that is,
-- with its proof (caller.portable.sql), to the owner's functions here,
-- which alone read and write the store.

-- What a look at a key finds: the record's columns (the recovery columns
-- NULL in a store without them), whether this transaction wrote the
-- version seen, and the version's xmin.
CREATE TYPE idempotency_internal.idem_found AS (
    status          text,
    request_hash    bytea,
    request_payload jsonb,
    result_payload  jsonb,
    error_payload   jsonb,
    created_at      timestamptz,
    updated_at      timestamptz,
    expires_at      timestamptz,
    attempt         integer,
    fence           bigint,
    recovery_point  text,
    recovery_state  jsonb,
    mine            boolean,
    writer          xid
);

-- The open claims of this transaction in namespaces without a lease, for
-- the claim guard: a begin inserts one with its claim; at COMMIT the guard
-- removes those whose claim has ended and refuses the COMMIT while one is
-- open. No row outlives its transaction, so the table is unlogged; it is
-- the only table the guard's trigger is on, so that no DDL on a store ever
-- meets a pending trigger event.
CREATE UNLOGGED TABLE idempotency_internal.idem_open_claims (
    namespace text COLLATE "C" NOT NULL,
    key_value text COLLATE "C" NOT NULL,
    store     regclass NOT NULL,
    fence     bigint NOT NULL,
    CONSTRAINT idem_open_claims_pkey PRIMARY KEY (namespace, key_value)
);

-- The table a namespace's records are in (store: NULL for the extension's),
-- refused (55000) when it was dropped or can no longer be used. A store of
-- the service's is locked (idem_lock_store) before it is checked, so that
-- its owner can add no trigger, rule, policy or default between the check
-- and this transaction's writes (which run as the extension's owner).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_table(store regclass, namespace text)
RETURNS regclass
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    problem record;
BEGIN
    IF store IS NULL THEN
        -- The extension's own table, refused as a bound store is when it
        -- was made unlogged (its other checks hold by construction).
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                       WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.idempotency_record'::pg_catalog.regclass
                         AND c.relpersistence OPERATOR(pg_catalog.=) 'p') THEN
            problem := idempotency_internal.idem_store_problem('@extschema@.idempotency_record'::pg_catalog.regclass);
            RAISE EXCEPTION 'the store of idempotency namespace "%" cannot be used', namespace
                USING ERRCODE = 'object_not_in_prerequisite_state', DETAIL = problem.problem,
                      HINT = coalesce(problem.fix, 'docs/api.md gives the table a store needs; fix it, or bind the namespace to another store with idem_bind_store.');
        END IF;
        RETURN '@extschema@.idempotency_record'::pg_catalog.regclass;
    ELSIF NOT EXISTS (SELECT FROM pg_catalog.pg_class t WHERE t.oid OPERATOR(pg_catalog.=) store) THEN
        RAISE EXCEPTION 'the store of idempotency namespace "%" no longer exists', namespace
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'The table the namespace is bound to was dropped, and its records with it.',
                  HINT = 'Bind the namespace to another store with idem_bind_store, or to the extension''s table with idem_bind_store(namespace, NULL).';
    END IF;
    PERFORM idempotency_internal.idem_lock_store(store);
    problem := idempotency_internal.idem_store_problem(store);
    IF problem.problem IS NOT NULL THEN
        RAISE EXCEPTION 'the store of idempotency namespace "%" cannot be used', namespace
            USING ERRCODE = 'object_not_in_prerequisite_state', DETAIL = problem.problem,
                  HINT = coalesce(problem.fix, 'docs/api.md gives the table a store needs; fix it, or bind the namespace to another store with idem_bind_store.');
    END IF;
    RETURN store;
END;
$$;

-- The record of a key in store (NULL: the extension's table), as this
-- statement's snapshot sees it, or NULL.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_look(store regclass, recovers boolean, namespace text, key text)
RETURNS idempotency_internal.idem_found
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    found idempotency_internal.idem_found;
BEGIN
    IF store IS NULL THEN
        SELECT r.status, r.request_hash, r.request_payload, r.result_payload, r.error_payload, r.created_at,
               r.updated_at, r.expires_at, r.attempt, r.fence, r.recovery_point, r.recovery_state,
               idempotency_internal.idem_mine(r.xmin), r.xmin
        INTO found
        FROM @extschema@.idempotency_record r
        WHERE r.namespace OPERATOR(pg_catalog.=) namespace AND r.key_value OPERATOR(pg_catalog.=) key;
    ELSE
        EXECUTE pg_catalog.format(
            'SELECT r.status, r.request_hash, r.request_payload, r.result_payload, r.error_payload, r.created_at,'
            ' r.updated_at, r.expires_at, r.attempt, r.fence, %s, idempotency_internal.idem_mine(r.xmin), r.xmin'
            ' FROM %s r WHERE r.namespace OPERATOR(pg_catalog.=) $1 AND r.key_value OPERATOR(pg_catalog.=) $2',
            CASE WHEN recovers THEN 'r.recovery_point, r.recovery_state' ELSE 'NULL::pg_catalog.text, NULL::pg_catalog.jsonb' END,
            store)
        INTO found USING namespace, key;
    END IF;
    RETURN found;
END;
$$;

-- Under REPEATABLE READ or SERIALIZABLE, a record this transaction sees
-- but another changed since its snapshot was taken is a serialization
-- failure (40001), as INSERT ... ON CONFLICT makes it: a key share lock on
-- the version seen finds the change. (READ COMMITTED sees the latest.)
CREATE OR REPLACE FUNCTION idempotency_internal.idem_check_snapshot(store regclass, namespace text, key text,
                                                                    given_key text)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.=) 'read committed'
       OR pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
        RETURN;
    END IF;
    BEGIN
        EXECUTE pg_catalog.format('SELECT FROM %s r WHERE r.namespace OPERATOR(pg_catalog.=) $1'
                                  ' AND r.key_value OPERATOR(pg_catalog.=) $2 FOR KEY SHARE',
                                  idempotency_internal.idem_store_table(store, namespace))
            USING namespace, key;
    EXCEPTION WHEN serialization_failure THEN
        PERFORM idempotency_internal.idem_concurrent_change(given_key);
    END;
END;
$$;

-- Under REPEATABLE READ or SERIALIZABLE, whether a record of the key that
-- this transaction's snapshot does not see was committed since: the
-- insert of a placeholder finds it (ON CONFLICT raises 40001 for a row
-- the snapshot cannot see), and is undone either way.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_exists_unseen(store regclass, namespace text, key text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.=) 'read committed'
       OR pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
        RETURN false;
    END IF;
    BEGIN
        EXECUTE pg_catalog.format('INSERT INTO %s (namespace, key_value, status, request_hash, created_at, updated_at,'
                                  ' expires_at) VALUES ($1, $2, ''committed'', ''\x'', pg_catalog.now(), pg_catalog.now(),'
                                  ' pg_catalog.now()) ON CONFLICT DO NOTHING',
                                  coalesce(store, '@extschema@.idempotency_record'::pg_catalog.regclass))
            USING namespace, key;
        RAISE EXCEPTION USING ERRCODE = 'ZZ000';   -- nothing there: undo the placeholder
    EXCEPTION
        WHEN serialization_failure THEN
            RETURN true;
        WHEN SQLSTATE 'ZZ000' THEN
            RETURN false;
    END;
END;
$$;

-- Raises 40001 for a key whose record another transaction recorded or
-- changed after this transaction's snapshot was taken.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_concurrent_change(given_key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
BEGIN
    RAISE EXCEPTION 'could not serialize access to idempotency key % due to a concurrent change',
                    idempotency_internal.idem_label(given_key)
        USING ERRCODE = 'serialization_failure',
              DETAIL = 'Another transaction recorded or changed the key''s record after this transaction''s snapshot was taken (REPEATABLE READ or SERIALIZABLE).',
              HINT = 'Retry the transaction.';
END;
$$;

-- The answer to a record whose work is done (or an in_progress record of
-- another request): its replay, or a mismatch carrying the recorded
-- request (never with store_request off).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_finished(r idempotency_internal.idem_found, submitted bytea,
                                                              store_request boolean)
RETURNS @extschema@.idem_outcome
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    o @extschema@.idem_outcome;
BEGIN
    o.submitted_hash := submitted;
    IF r.request_hash OPERATOR(pg_catalog.<>) submitted THEN
        o.kind := 'mismatch';
        o.recorded_hash := r.request_hash;
        o.recorded_request := CASE WHEN store_request THEN r.request_payload END;
    ELSIF r.status OPERATOR(pg_catalog.=) 'committed' THEN
        o.kind := 'prior_result';
        o.result := r.result_payload;
    ELSE
        o.kind := 'prior_error';
        o.error := r.error_payload;
    END IF;
    RETURN o;
END;
$$;

-- in_flight: how long ago the holder claimed the key (or last extended its
-- lease), when known (updated_at), and, for a claim another transaction
-- committed in a namespace with a lease, when a begin may take it over.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_in_flight(submitted bytea, r idempotency_internal.idem_found,
                                                               lease interval)
RETURNS @extschema@.idem_outcome
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    o @extschema@.idem_outcome;
BEGIN
    o.kind := 'in_flight';
    o.submitted_hash := submitted;
    IF r.updated_at IS NOT NULL THEN
        o.age := pg_catalog.make_interval(secs => greatest(0, EXTRACT(epoch FROM pg_catalog.clock_timestamp()
                                                                                 OPERATOR(pg_catalog.-) r.updated_at)));
        IF lease OPERATOR(pg_catalog.>) interval '0' AND NOT r.mine THEN
            o.lease_ends_at := idempotency_internal.idem_takeover_from(r.updated_at, r.expires_at, lease);
        END IF;
    END IF;
    RETURN o;
END;
$$;

-- The in_progress record of a first claim, drawn with its fence, at the
-- clock when the key was claimed (not the transaction's start: a
-- transaction that waited before claiming must not start its lease half
-- spent). false: a row appeared since the look, nothing is written; NULL
-- (REPEATABLE READ, SERIALIZABLE): one committed after the snapshot.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_insert_claim(store regclass, recovers boolean, namespace text,
                                                                  key text, submitted bytea, request jsonb,
                                                                  claimed_at timestamptz, expires_at timestamptz,
                                                                  fence bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    n pg_catalog.int8;
BEGIN
    IF store IS NULL AND pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.=) 'read committed' THEN
        INSERT INTO @extschema@.idempotency_record
            (namespace, key_value, status, request_hash, request_payload, result_payload, error_payload,
             created_at, updated_at, expires_at, attempt, fence, recovery_point, recovery_state)
        VALUES (namespace, key, 'in_progress', submitted, request, NULL, NULL, claimed_at, claimed_at, expires_at,
                1, fence, NULL, NULL)
        ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS n = ROW_COUNT;
    ELSE
        BEGIN
            EXECUTE pg_catalog.format(
                'INSERT INTO %s (namespace, key_value, status, request_hash, request_payload, result_payload, error_payload,'
                ' created_at, updated_at, expires_at, attempt, fence%s)'
                ' VALUES ($1, $2, ''in_progress'', $3, $4, NULL, NULL, $5, $5, $6, 1, $7%s) ON CONFLICT DO NOTHING',
                coalesce(store, '@extschema@.idempotency_record'::pg_catalog.regclass),
                CASE WHEN recovers THEN ', recovery_point, recovery_state' ELSE '' END,
                CASE WHEN recovers THEN ', NULL, NULL' ELSE '' END)
            USING namespace, key, submitted, request, claimed_at, expires_at, fence;
            GET DIAGNOSTICS n = ROW_COUNT;
        EXCEPTION WHEN serialization_failure THEN
            RETURN NULL;
        END;
    END IF;
    IF n OPERATOR(pg_catalog.=) 0 THEN
        PERFORM idempotency_internal.idem_require_row(store, namespace, key);
    END IF;
    RETURN n OPERATOR(pg_catalog.>) 0;
END;
$$;

-- After a claim's INSERT ... ON CONFLICT DO NOTHING wrote no row: raises
-- 55000 unless the key's row is there (the conflict), that is when a
-- BEFORE INSERT trigger returned NULL or a rule replaced the INSERT. The
-- claim would otherwise be looked for again for ever, or answered fresh
-- without a record (the native edition's words).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_require_row(store regclass, namespace text, key text)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    found_row boolean;
BEGIN
    EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM %s r WHERE r.namespace OPERATOR(pg_catalog.=) $1'
                              ' AND r.key_value OPERATOR(pg_catalog.=) $2)',
                              coalesce(store, '@extschema@.idempotency_record'::pg_catalog.regclass))
        INTO found_row USING namespace, key;
    IF NOT found_row THEN
        RAISE EXCEPTION 'cannot begin an idempotency key: its store skipped the insert'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('The store of namespace "%s" inserted no row for the record: a BEFORE INSERT trigger on the table returned NULL, or a rule of its owner''s replaced the INSERT.', namespace),
                  HINT = 'A store''s BEFORE INSERT triggers must return the row (NEW) for the store''s own inserts.';
    END IF;
END;
$$;

-- Takes over the in_progress record the look saw (the version claimed at
-- seen_at): the next attempt, claimed at claimed_at with a new fence. The
-- row is locked with SKIP LOCKED, so a takeover never waits for another
-- transaction (a late worker finishing the record); it then takes
-- nothing, as when the record changed since the look. Returns the
-- attempt, and the recovery point and state the record keeps.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_take_over(store regclass, recovers boolean, namespace text,
                                                               key text, seen_at timestamptz, claimed_at timestamptz,
                                                               expires_at timestamptz, fence bigint,
                                                               OUT attempt integer, OUT recovery_point text,
                                                               OUT recovery_state jsonb)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
BEGIN
    EXECUTE pg_catalog.format(
        'UPDATE %1$s r SET attempt = r.attempt OPERATOR(pg_catalog.+) 1, updated_at = $4, expires_at = $5, fence = $6'
        ' WHERE r.ctid OPERATOR(pg_catalog.=) (SELECT s.ctid FROM %1$s s WHERE s.namespace OPERATOR(pg_catalog.=) $1'
        '   AND s.key_value OPERATOR(pg_catalog.=) $2 AND s.status OPERATOR(pg_catalog.=) ''in_progress'''
        '   AND s.updated_at OPERATOR(pg_catalog.=) $3 FOR UPDATE SKIP LOCKED)'
        ' RETURNING r.attempt, %2$s',
        coalesce(store, '@extschema@.idempotency_record'::pg_catalog.regclass),
        CASE WHEN recovers THEN 'r.recovery_point, r.recovery_state' ELSE 'NULL::pg_catalog.text, NULL::pg_catalog.jsonb' END)
    INTO attempt, recovery_point, recovery_state
    USING namespace, key, seen_at, claimed_at, expires_at, fence;
END;
$$;

-- Waits until another transaction that holds key tag lets it go (or the
-- deadline passes): an ordinary lock wait (in pg_locks, broken by the
-- deadlock detector, cancelled by statement_timeout), bounded by a
-- lock_timeout set for the wait alone; running out of time is caught, and
-- every other error goes on up. The lock, once granted, stays with this
-- transaction, as any begin's look at the key keeps it.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_wait(tag bigint, deadline timestamptz)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    remaining pg_catalog.int8 := pg_catalog.ceil(EXTRACT(epoch FROM deadline OPERATOR(pg_catalog.-)
                                                                               pg_catalog.clock_timestamp())
                                                 OPERATOR(pg_catalog.*) 1000);
    saved pg_catalog.text := pg_catalog.current_setting('lock_timeout');
BEGIN
    IF remaining OPERATOR(pg_catalog.<=) 0 THEN
        RETURN;
    END IF;
    BEGIN
        PERFORM pg_catalog.set_config('lock_timeout', remaining::pg_catalog.text, true);
        PERFORM pg_catalog.pg_advisory_xact_lock(tag);
        PERFORM pg_catalog.set_config('lock_timeout', saved, true);
    EXCEPTION WHEN lock_not_available THEN
        NULL;   -- still held: the begin answers in_flight
    END;
END;
$$;

-- Locks store as INSERT ... ON CONFLICT locks it (ROW EXCLUSIVE; ACCESS
-- SHARE in a read-only transaction) before a begin's first look: a lock
-- taken for the look and raised for the insert could deadlock with a
-- REINDEX, or with a change that holds the table in SHARE mode and then
-- waits for the namespace's lock.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_lock_store(store regclass)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
    IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
        EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS SHARE MODE', store);
    ELSIF store OPERATOR(pg_catalog.=) '@extschema@.idempotency_record'::pg_catalog.regclass THEN
        LOCK TABLE @extschema@.idempotency_record IN ROW EXCLUSIVE MODE;
    ELSE
        EXECUTE pg_catalog.format('LOCK TABLE %s IN ROW EXCLUSIVE MODE', store);
    END IF;
END;
$$;

-- The body of idem_begin for role caller (with its proof): fresh (a new
-- claim, or the takeover of an abandoned one), in_flight, prior_result,
-- prior_error or mismatch; with final_only (a batch's first pass), only a
-- finished record's answer, NULL otherwise. docs/internals.md describes
-- the library's; this one differs where docs/managed.md says.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_begin(caller oid, proof bytea, namespace text, key text,
                                                           request jsonb, replay_window interval,
                                                           in_flight_wait interval, function text DEFAULT 'idem_begin',
                                                           final_only boolean DEFAULT false)
RETURNS @extschema@.idem_outcome
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    given_key text;
    p idempotency_internal.idem_policy;
    first idempotency_internal.idem_policy;
    w interval;
    submitted bytea;
    wait_ms double precision;
    stored text;
    r idempotency_internal.idem_found;
    o @extschema@.idem_outcome;
    deadline timestamptz;
    key_tag bigint;
    locked boolean;
    busy boolean;
    now timestamptz;
    fence bigint;
    taken record;
    locked_version timestamptz;
    looked record;
    claimed boolean;
BEGIN
    -- (Each check's usual case is tested here, the function that says what
    -- is wrong called only otherwise: a call costs as much as the test.)
    IF namespace IS NULL OR namespace OPERATOR(pg_catalog.!~) '^[a-z0-9_-]+$'
       OR pg_catalog.octet_length(namespace) OPERATOR(pg_catalog.>) 64 THEN   -- (a bound {1,64} costs ten times more)
        PERFORM idempotency_internal.idem_check_namespace(namespace);
    END IF;
    IF key IS NULL THEN
        RAISE EXCEPTION 'idempotency key must not be null'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Pass the key that idem_parse or idem_mint produced.';
    ELSIF key OPERATOR(pg_catalog.~) '^[!-~]([ -~]*[!-~])?$' AND pg_catalog.octet_length(key) OPERATOR(pg_catalog.<=) 255 THEN
        given_key := key;   -- printable ASCII, nothing to trim (idem_key_check's quick path)
    ELSE
        given_key := idempotency_internal.idem_key_of(key);
    END IF;
    IF request IS NULL THEN
        RAISE EXCEPTION 'idempotency request must not be null'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Pass a jsonb value; use ''null''::jsonb for a JSON null.';
    END IF;
    -- The first look, in a subtransaction: a begin that must wait for the
    -- namespace's lock gives back the table locks the look took, since the
    -- change holding it may go on to drop or alter that table.
    BEGIN
        p := idempotency_internal.idem_authorize(caller, proof, namespace);
        IF replay_window IS NULL AND NOT p.has_replay_window THEN
            w := p.replay_window;   -- the defaults' (their table keeps it valid)
        ELSE
            w := idempotency_internal.idem_window(replay_window, p, namespace);
        END IF;
        IF idempotency_internal.idem_compressed(request)
           OR pg_catalog.pg_column_size(request) OPERATOR(pg_catalog.>) p.max_payload_bytes THEN
            PERFORM idempotency_internal.idem_check_size(request, 'request', namespace, p.max_payload_bytes);
        END IF;
        IF p.ignore IS NULL THEN
            submitted := @extschema@.idem_request_hash(request);   -- the same hash, without idem_without's call
        ELSE
            submitted := @extschema@.idem_request_hash(request, p.ignore);
        END IF;
        IF in_flight_wait IS NULL AND p.in_flight_wait OPERATOR(pg_catalog.=) interval '0' THEN
            wait_ms := 0;
        ELSE
            wait_ms := idempotency_internal.idem_wait_ms(in_flight_wait, p);
        END IF;
        IF p.own_table_ok AND pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off' THEN
            LOCK TABLE @extschema@.idempotency_record IN ROW EXCLUSIVE MODE;   -- idem_lock_store's (idem_authorize checked the table)
        ELSE
            PERFORM idempotency_internal.idem_lock_store(idempotency_internal.idem_store_table(p.store, namespace));
        END IF;
        stored := idempotency_internal.idem_stored_key(given_key, p.hash_keys);
        r := idempotency_internal.idem_look(p.store, p.recovers, namespace, stored);
        -- A finished record is final: answered without the namespace's
        -- lock, when it was there before the policy was read.
        IF r.status OPERATOR(pg_catalog.<>) 'in_progress'
           AND (r.mine OR idempotency_internal.idem_settled(r.writer, p.seen)) THEN
            IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' THEN
                PERFORM idempotency_internal.idem_check_snapshot(p.store, namespace, stored, given_key);
            END IF;
            RETURN idempotency_internal.idem_finished(r, submitted, p.store_request);
        ELSIF final_only THEN
            RETURN NULL;
        END IF;
        -- Anything else is decided under the namespace's lock, with its
        -- policy read again under it (a change of how keys are stored waits
        -- for the namespace's begins), and then under the key's lock.
        IF NOT idempotency_internal.idem_try_lock(p.secret, namespace) THEN
            RAISE EXCEPTION USING ERRCODE = 'ZZ000';   -- to wait holding none of the look's locks
        END IF;
    EXCEPTION WHEN SQLSTATE 'ZZ000' THEN
        PERFORM idempotency_internal.idem_lock(p.secret, namespace, false);
    END;
    first := p;
    p := idempotency_internal.idem_authorize(caller, proof, namespace);
    IF replay_window IS NULL AND NOT p.has_replay_window THEN
        w := p.replay_window;
    ELSE
        w := idempotency_internal.idem_window(replay_window, p, namespace);
    END IF;
    IF p.max_payload_bytes IS DISTINCT FROM first.max_payload_bytes THEN
        PERFORM idempotency_internal.idem_check_size(request, 'request', namespace, p.max_payload_bytes);
    END IF;
    IF p.ignore IS DISTINCT FROM first.ignore THEN
        submitted := @extschema@.idem_request_hash(request, p.ignore);
    END IF;
    stored := idempotency_internal.idem_stored_key(given_key, p.hash_keys);
    IF p.own_table_ok IS NOT TRUE THEN
        PERFORM idempotency_internal.idem_store_table(p.store, namespace);
    END IF;
    key_tag := idempotency_internal.idem_tag(p.secret, 'k', namespace, stored);
    IF wait_ms OPERATOR(pg_catalog.>) 0 THEN
        deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) pg_catalog.make_interval(secs => wait_ms OPERATOR(pg_catalog./) 1000);
    END IF;
    LOOP
        locked := pg_catalog.pg_try_advisory_xact_lock(key_tag);
        r := idempotency_internal.idem_look(p.store, p.recovers, namespace, stored);
        now := pg_catalog.clock_timestamp();
        -- Held by another transaction: its claim, whose row this one cannot
        -- see before it commits, or a begin between its look and its write.
        -- (A record of another request is a mismatch whoever holds the key.)
        busy := NOT locked AND (r.status IS NULL OR (r.status OPERATOR(pg_catalog.=) 'in_progress'
                                                     AND r.request_hash OPERATOR(pg_catalog.=) submitted));
        IF busy THEN
            IF deadline IS NOT NULL AND now OPERATOR(pg_catalog.<) deadline THEN
                PERFORM idempotency_internal.idem_wait(key_tag, deadline);
                CONTINUE;   -- the holder ended (or time is up): look again
            END IF;
            r.updated_at := NULL;   -- since when is not known
            RETURN idempotency_internal.idem_in_flight(submitted, r, p.lease);
        END IF;
        IF r.status IS NULL THEN
            IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.<>) 'off' THEN
                PERFORM idempotency_internal.idem_require_write(given_key, function, 'begin');
            END IF;
            fence := idempotency_internal.idem_draw_fence();
            claimed := idempotency_internal.idem_insert_claim(p.store, p.recovers, namespace, stored, submitted,
                                                              CASE WHEN p.store_request THEN request END, now,
                                                              now OPERATOR(pg_catalog.+) w, fence);
            CASE claimed
            WHEN false THEN
                CONTINUE;   -- a row appeared since the look: look again
            WHEN true THEN
                NULL;
            ELSE   -- a row committed after this transaction's snapshot
                PERFORM idempotency_internal.idem_concurrent_change(given_key);
            END CASE;
            PERFORM idempotency_internal.idem_open_claim(p, namespace, stored, fence);
            o.kind := 'fresh';
            o.submitted_hash := submitted;
            o.attempt := 1;
            o.fence := fence;
            o.takeover := false;
            IF p.lease OPERATOR(pg_catalog.>) interval '0' THEN
                o.lease_ends_at := now OPERATOR(pg_catalog.+) idempotency_internal.idem_length(p.lease);
            END IF;
            RETURN o;
        END IF;
        PERFORM idempotency_internal.idem_check_snapshot(p.store, namespace, stored, given_key);
        IF r.status OPERATOR(pg_catalog.=) 'in_progress' AND r.request_hash OPERATOR(pg_catalog.=) submitted THEN
            IF NOT r.mine AND now OPERATOR(pg_catalog.>=) idempotency_internal.idem_takeover_from(r.updated_at, r.expires_at, p.lease)
               AND r.updated_at IS DISTINCT FROM locked_version THEN
                IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.<>) 'off' THEN
                    PERFORM idempotency_internal.idem_require_write(given_key, function, 'begin');
                END IF;
                fence := idempotency_internal.idem_draw_fence();
                taken := idempotency_internal.idem_take_over(p.store, p.recovers, namespace, stored, r.updated_at, now,
                                                             now OPERATOR(pg_catalog.+) w, fence);
                IF taken.attempt IS NULL THEN
                    -- Changed meanwhile, or locked by a late worker: look again,
                    -- and the same version still there is in flight.
                    locked_version := r.updated_at;
                    CONTINUE;
                END IF;
                PERFORM idempotency_internal.idem_open_claim(p, namespace, stored, fence);
                o.kind := 'fresh';
                o.submitted_hash := submitted;
                o.attempt := taken.attempt;
                o.fence := fence;
                o.takeover := true;
                o.recovery_point := taken.recovery_point;
                o.recovery_state := taken.recovery_state;
                IF p.lease OPERATOR(pg_catalog.>) interval '0' THEN
                    o.lease_ends_at := now OPERATOR(pg_catalog.+) idempotency_internal.idem_length(p.lease);
                END IF;
                RETURN o;
            END IF;
            RETURN idempotency_internal.idem_in_flight(submitted, r, p.lease);
        END IF;
        RETURN idempotency_internal.idem_finished(r, submitted, p.store_request);
    END LOOP;
END;
$$;

CREATE OR REPLACE FUNCTION idem_begin(namespace text, key text, request jsonb, replay_window interval DEFAULT NULL,
                                      in_flight_wait interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idempotency_internal.idem_caller;
    RETURN idempotency_internal.idem_begin(c.caller, c.proof, namespace COLLATE "C", key COLLATE "C", request, replay_window, in_flight_wait);
END;
$$;

COMMENT ON FUNCTION idem_begin(text, text, jsonb, interval, interval) IS
'Starts an idempotent operation: fresh (go ahead), in_flight, prior_result, prior_error or mismatch';


-- Batches ---------------------------------------------------------------------

-- The body of idem_begin_batch for role caller: each key begun as
-- idem_begin begins it, in the order of the keys' bytes (so that two
-- batches take their common keys' locks in one order and cannot deadlock),
-- the i-th request with the i-th key, the answers in the input's order. A
-- key given twice is begun twice, the second after the first. Everything
-- the keys need is checked before any is begun; the in-flight wait bounds
-- the whole call.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_begin_batch(caller oid, proof bytea, namespace text, keys text[],
                                                                 requests jsonb[], replay_window interval,
                                                                 in_flight_wait interval)
RETURNS SETOF @extschema@.idem_outcome
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
ROWS 100
AS $$
#variable_conflict use_variable
DECLARE
    n integer;
    given text[];
    p idempotency_internal.idem_policy;
    answers @extschema@.idem_outcome[];
    wait_ms double precision;
    deadline timestamptz;
    i integer;
    checked record;
    size bigint;
    order_ integer[];
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace);
    FOR i IN 1..2 LOOP
        IF (CASE i WHEN 1 THEN keys IS NULL ELSE requests IS NULL END) THEN
            RAISE EXCEPTION 'idempotency % must not be null', CASE i WHEN 1 THEN 'keys' ELSE 'requests' END
                USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Pass an array, one element per key.';
        END IF;
        IF (CASE i WHEN 1 THEN array_ndims(keys) ELSE array_ndims(requests) END) > 1 THEN
            RAISE EXCEPTION 'idempotency % must be a one-dimensional array', CASE i WHEN 1 THEN 'keys' ELSE 'requests' END
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('It has %s dimensions.', CASE i WHEN 1 THEN array_ndims(keys) ELSE array_ndims(requests) END);
        END IF;
        n := CASE i WHEN 1 THEN cardinality(keys) ELSE cardinality(requests) END;
        IF n > 10000 THEN
            RAISE EXCEPTION 'too many idempotency keys in one batch'
                USING ERRCODE = 'program_limit_exceeded',
                      DETAIL = format('The batch has %s %s; at most 10000 keys are begun in one call.', n,
                                      CASE i WHEN 1 THEN 'keys' ELSE 'requests' END),
                      HINT = 'Split it into several calls.';
        END IF;
    END LOOP;
    n := cardinality(keys);
    IF n <> cardinality(requests) THEN
        RAISE EXCEPTION 'idempotency keys and requests differ in length'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('There are %s keys and %s requests; pass one request per key, in the same order.',
                                  n, cardinality(requests));
    END IF;
    given := ARRAY(SELECT k FROM unnest(keys) WITH ORDINALITY u(k, o) ORDER BY o);
    FOR i IN 1..n LOOP
        IF given[i] IS NULL THEN
            RAISE EXCEPTION 'idempotency key must not be null'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('Element %s of keys is NULL; pass the keys that idem_parse or idem_mint produced.', i);
        END IF;
        checked := idempotency_internal.idem_key_check(given[i]);
        IF checked.problem IS NOT NULL THEN
            RAISE EXCEPTION 'invalid idempotency key'
                USING ERRCODE = 'invalid_parameter_value', DETAIL = format('Element %s of keys: %s', i, checked.problem);
        END IF;
        given[i] := checked.key;
    END LOOP;
    requests := ARRAY(SELECT r FROM unnest(requests) WITH ORDINALITY u(r, o) ORDER BY o);
    FOR i IN 1..n LOOP
        IF requests[i] IS NULL THEN
            RAISE EXCEPTION 'idempotency request must not be null'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('Element %s of requests is NULL; use ''null''::jsonb for a JSON null.', i);
        END IF;
    END LOOP;
    p := idempotency_internal.idem_authorize(caller, proof, namespace);
    PERFORM idempotency_internal.idem_window(replay_window, p, namespace);
    FOR i IN 1..n LOOP
        size := idempotency_internal.idem_oversize(requests[i], p.max_payload_bytes);
        IF size IS NOT NULL THEN
            RAISE EXCEPTION 'idempotency request is too large'
                USING ERRCODE = 'program_limit_exceeded',
                      DETAIL = format('Element %s of requests: It is %s bytes as jsonb; namespace "%s" allows at most %s (its max_payload_bytes, or the defaults'').',
                                      i, size, namespace, p.max_payload_bytes);
        END IF;
    END LOOP;
    wait_ms := idempotency_internal.idem_wait_ms(in_flight_wait, p);
    -- One deadline for the whole call: each key waits at most what is left.
    IF wait_ms > 0 THEN
        deadline := clock_timestamp() + make_interval(secs => wait_ms / 1000);
    END IF;
    answers := array_fill(NULL::@extschema@.idem_outcome, ARRAY[greatest(n, 1)]);
    order_ := ARRAY(SELECT o FROM unnest(given) WITH ORDINALITY u(k, o) ORDER BY convert_to(u.k, 'UTF8'), o);
    -- The first pass, in a subtransaction: the finished records' answers;
    -- if keys are left and the namespace's lock is not free, the pass's
    -- table locks are given back before the wait for it (as a single
    -- begin's first look's are).
    BEGIN
        FOREACH i IN ARRAY order_ LOOP
            answers[i] := idempotency_internal.idem_begin(caller, proof, namespace, given[i], requests[i], replay_window,
                                                          interval '0', 'idem_begin_batch', true);
        END LOOP;
        IF EXISTS (SELECT FROM unnest(answers[1:n]) a WHERE a.kind IS NULL)
           AND NOT idempotency_internal.idem_try_lock(p.secret, namespace) THEN
            RAISE EXCEPTION USING ERRCODE = 'ZZ000';
        END IF;
    EXCEPTION WHEN SQLSTATE 'ZZ000' THEN
        PERFORM idempotency_internal.idem_lock(p.secret, namespace, false);
    END;
    -- The second: the keys left, as idem_begin begins them.
    FOREACH i IN ARRAY order_ LOOP
        CONTINUE WHEN (answers[i]).kind IS NOT NULL;
        answers[i] := idempotency_internal.idem_begin(caller, proof, namespace, given[i], requests[i], replay_window,
                                                      CASE WHEN deadline IS NULL THEN interval '0'
                                                           ELSE greatest(deadline - clock_timestamp(), interval '0') END,
                                                      'idem_begin_batch');
    END LOOP;
    RETURN QUERY SELECT (a).* FROM unnest(answers[1:n]) a;
END;
$$;

CREATE OR REPLACE FUNCTION idem_begin_batch(namespace text, keys text[], requests jsonb[], replay_window interval DEFAULT NULL,
                                            in_flight_wait interval DEFAULT NULL)
RETURNS SETOF @extschema@.idem_outcome
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 100
AS $$
#variable_conflict use_variable
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idempotency_internal.idem_caller;
    RETURN QUERY SELECT * FROM idempotency_internal.idem_begin_batch(c.caller, c.proof, namespace COLLATE "C", keys COLLATE "C", requests,
                                                                     replay_window, in_flight_wait);
END;
$$;

COMMENT ON FUNCTION idem_begin_batch(text, text[], jsonb[], interval, interval) IS
'idem_begin for many keys of one namespace: one outcome per key, in the keys'' order';


-- Transitions -----------------------------------------------------------------

-- Raises 55000 for a transition whose fence is not that of the claim in
-- progress under attempt holder (0: not known).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_wrong_fence(action text, label text, holder integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
BEGIN
    RAISE EXCEPTION 'cannot % an idempotency record held under another fence', action
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = pg_catalog.format('The record for key %s is in progress under attempt %s%s, with a fence other than the one given: the claim that drew that fence is over (its lease ran out and a later begin took the record over, or the record was forgotten or purged and begun again), or it is another key''s, or another copy of the database''s. Only the claim holding the record may finish it.',
                                         label, holder,
                                         CASE WHEN holder OPERATOR(pg_catalog.>) 1
                                              THEN pg_catalog.format(' (taken over %s time%s)', holder OPERATOR(pg_catalog.-) 1,
                                                                     CASE WHEN holder OPERATOR(pg_catalog.>) 2 THEN 's' ELSE '' END)
                                              ELSE '' END),
              HINT = 'Pass the fence that idem_begin answered with fresh for this key.';
END;
$$;

-- Says why a transition (action: commit, fail, extend the lease of, record
-- a recovery point of) matched no in_progress record, with 55000, or 40001
-- when the record changed after the transaction's snapshot.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_not_in_progress(p idempotency_internal.idem_policy, namespace text,
                                                                     stored text, given_key text, action text,
                                                                     fence bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    label pg_catalog.text := idempotency_internal.idem_label(given_key);
    r idempotency_internal.idem_found := idempotency_internal.idem_look(p.store, p.recovers, namespace, stored);
BEGIN
    IF r.status IS NOT NULL AND NOT r.mine THEN
        PERFORM idempotency_internal.idem_check_snapshot(p.store, namespace, stored, given_key);
    END IF;
    IF r.status IS NULL AND idempotency_internal.idem_exists_unseen(p.store, namespace, stored) THEN
        PERFORM idempotency_internal.idem_concurrent_change(given_key);
    END IF;
    IF r.status IS NULL THEN
        IF NOT pg_catalog.pg_try_advisory_xact_lock(idempotency_internal.idem_tag(p.secret, 'k', namespace, stored)) THEN
            RAISE EXCEPTION 'cannot % idempotency key %: this transaction holds no claim on it', action, label
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = pg_catalog.format('Another transaction began the key in namespace "%s" and has not ended (idem_begin answered in_flight here). Only the transaction whose idem_begin answered fresh may finish it.', namespace);
        END IF;
        RAISE EXCEPTION 'cannot % an idempotency record that is not in progress', action
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('No record exists for key %s in namespace "%s"; idem_begin must answer fresh first.', label, namespace);
    END IF;
    IF r.status OPERATOR(pg_catalog.=) 'in_progress'
       AND (CASE WHEN fence IS NULL THEN r.mine ELSE fence OPERATOR(pg_catalog.=) r.fence END) THEN
        RAISE EXCEPTION 'cannot % idempotency key %: its store skipped the change', action, label
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('The record of the key in namespace "%s" is this claim''s and in progress, but the store''s statement changed no row: a BEFORE trigger on the table returned NULL, or a rule or row security policy of its owner''s left the row out.', namespace),
                  HINT = 'A store''s BEFORE UPDATE and BEFORE DELETE triggers must return the row (NEW, or OLD) for the store''s own changes.';
    END IF;
    IF r.status OPERATOR(pg_catalog.=) 'in_progress' AND fence IS NOT NULL THEN
        PERFORM idempotency_internal.idem_wrong_fence(action, label, r.attempt);
    END IF;
    IF r.status OPERATOR(pg_catalog.=) 'in_progress' THEN
        RAISE EXCEPTION 'cannot % an idempotency record another transaction claimed', action
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = pg_catalog.format('The record for key %s in namespace "%s" is in progress, claimed by another transaction that committed its claim (a namespace with an in_progress_lease lets a claim outlive its transaction). Without a fence, a transition acts only on a claim of its own transaction.', label, namespace),
                  HINT = 'The claim''s holder finishes it with the fence idem_begin answered with fresh.';
    END IF;
    RAISE EXCEPTION 'cannot % an idempotency record that is not in progress', action
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = pg_catalog.format('The record for key %s is already %s; committed and failed records are final.', label, r.status);
END;
$$;

-- A stored error (docs/api/store.md): an object with string "class_tag", string
-- "message" and an optional string "cause", nothing else (22023).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_check_error_payload(error jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    what pg_catalog.text;
    member record;
BEGIN
    IF pg_catalog.jsonb_typeof(error) OPERATOR(pg_catalog.<>) 'object' THEN
        what := 'It is not an object.';
    ELSE
        FOR member IN SELECT e.k, e.v FROM pg_catalog.jsonb_each(error) e(k, v)
                      ORDER BY pg_catalog.length(e.k), e.k COLLATE "C" LOOP   -- jsonb's own order, as the library walks it
            IF member.k OPERATOR(pg_catalog.<>) ALL ('{class_tag,message,cause}'::pg_catalog.text[]) THEN
                what := pg_catalog.format('Key "%s" is not allowed.',
                                          pg_catalog.convert_from(idempotency_internal.idem_clip(member.k, 64), 'UTF8'));
                EXIT;
            ELSIF pg_catalog.jsonb_typeof(member.v) OPERATOR(pg_catalog.<>) 'string' THEN
                what := pg_catalog.format('"%s" is not a string.', member.k);
                EXIT;
            END IF;
        END LOOP;
        IF what IS NULL AND NOT error ? 'class_tag' THEN
            what := '"class_tag" is missing.';
        ELSIF what IS NULL AND NOT error ? 'message' THEN
            what := '"message" is missing.';
        END IF;
    END IF;
    IF what IS NOT NULL THEN
        RAISE EXCEPTION 'invalid idempotency error payload'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = what OPERATOR(pg_catalog.||) ' An error payload is a JSON object with string "class_tag" and "message" and an optional string "cause", and no other keys.';
    END IF;
END;
$$;

-- At most max_bytes of s's UTF-8 bytes, cut between characters.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_clip(s text, max_bytes integer)
RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT pg_catalog.convert_to(pg_catalog.string_agg(c.c, '' ORDER BY c.n), 'UTF8')
    FROM (SELECT c.c, c.n, pg_catalog.sum(pg_catalog.octet_length(pg_catalog.convert_to(c.c, 'UTF8'))) OVER (ORDER BY c.n) AS upto
          FROM pg_catalog.regexp_split_to_table(s COLLATE "C", '') WITH ORDINALITY c(c, n)) c
    WHERE c.upto OPERATOR(pg_catalog.<=) max_bytes
$$;

-- The body of idem_commit (committing) and idem_fail_permanent for role
-- caller: the in_progress record, this transaction's own claim (fence
-- NULL) or the claim that drew fence, moved to committed with result, or
-- failed with error.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_finish(caller oid, proof bytea, namespace text, key text,
                                                            payload jsonb, fence bigint, committing boolean)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    given_key text;
    p idempotency_internal.idem_policy;
    stored text;
    store regclass;
    done boolean;
    n bigint;
BEGIN
    IF namespace IS NULL OR namespace OPERATOR(pg_catalog.!~) '^[a-z0-9_-]+$'
       OR pg_catalog.octet_length(namespace) OPERATOR(pg_catalog.>) 64 THEN   -- (a bound {1,64} costs ten times more)
        PERFORM idempotency_internal.idem_check_namespace(namespace);
    END IF;
    IF key IS NULL THEN
        RAISE EXCEPTION 'idempotency key must not be null'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Pass the key that idem_parse or idem_mint produced.';
    ELSIF key OPERATOR(pg_catalog.~) '^[!-~]([ -~]*[!-~])?$' AND pg_catalog.octet_length(key) OPERATOR(pg_catalog.<=) 255 THEN
        given_key := key;
    ELSE
        given_key := idempotency_internal.idem_key_of(key);
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'idempotency % must not be null', CASE WHEN committing THEN 'result' ELSE 'error' END
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Pass a jsonb value; use ''null''::jsonb for a JSON null.';
    END IF;
    IF fence IS NOT NULL THEN
        PERFORM idempotency_internal.idem_check_fence(fence);
    END IF;
    p := idempotency_internal.idem_authorize(caller, proof, namespace);
    IF idempotency_internal.idem_compressed(payload)
       OR pg_catalog.pg_column_size(payload) OPERATOR(pg_catalog.>) p.max_payload_bytes THEN
        PERFORM idempotency_internal.idem_check_size(payload, CASE WHEN committing THEN 'result' ELSE 'error' END,
                                                     namespace, p.max_payload_bytes);
    END IF;
    IF pg_catalog.getdatabaseencoding() = 'SQL_ASCII' THEN
        PERFORM convert_to(payload::text, 'UTF8');   -- the store keeps nothing it could not hash (22021)
    END IF;
    IF NOT committing THEN
        PERFORM idempotency_internal.idem_check_error_payload(payload);
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
        PERFORM idempotency_internal.idem_require_write(given_key, CASE WHEN committing THEN 'idem_commit' ELSE 'idem_fail_permanent' END,
                                                        CASE WHEN committing THEN 'commit' ELSE 'fail' END);
    END IF;
    stored := idempotency_internal.idem_stored_key(given_key, p.hash_keys);
    IF p.own_table_ok THEN
        store := '@extschema@.idempotency_record'::pg_catalog.regclass;   -- idem_authorize checked it
    ELSE
        store := idempotency_internal.idem_store_table(p.store, namespace);
    END IF;
    IF p.store IS NULL AND current_setting('transaction_isolation') = 'read committed' THEN
        UPDATE @extschema@.idempotency_record r
        SET status = CASE WHEN committing THEN 'committed' ELSE 'failed' END,
            result_payload = CASE WHEN committing THEN payload END,
            error_payload = CASE WHEN committing THEN NULL ELSE payload END,
            updated_at = clock_timestamp()
        WHERE r.namespace = idem_finish.namespace AND r.key_value = stored AND r.status = 'in_progress'
          AND CASE WHEN idem_finish.fence IS NULL THEN idempotency_internal.idem_mine(r.xmin)
                   ELSE r.fence = idem_finish.fence END;
        done := FOUND;
    ELSE
        EXECUTE format('UPDATE %s r SET status = $3, result_payload = $4, error_payload = $5,'
                       ' updated_at = pg_catalog.clock_timestamp()'
                       ' WHERE r.namespace OPERATOR(pg_catalog.=) $1 AND r.key_value OPERATOR(pg_catalog.=) $2'
                       ' AND r.status OPERATOR(pg_catalog.=) ''in_progress'''
                       ' AND CASE WHEN $6 IS NULL THEN idempotency_internal.idem_mine(r.xmin)'
                       '          ELSE r.fence OPERATOR(pg_catalog.=) $6 END', store)
        USING namespace, stored, CASE WHEN committing THEN 'committed' ELSE 'failed' END,
              CASE WHEN committing THEN payload END, CASE WHEN committing THEN NULL ELSE payload END, fence;
        GET DIAGNOSTICS n = ROW_COUNT;
        done := n > 0;
    END IF;
    IF NOT done THEN
        PERFORM idempotency_internal.idem_not_in_progress(p, namespace, stored, given_key,
                                                          CASE WHEN committing THEN 'commit' ELSE 'fail' END, fence);
    END IF;
END;
$$;

-- The body of idem_fail_transient for role caller: the in_progress record
-- deleted, so that the next begin is fresh; never a finished record, nor
-- one whose work may have had effects (taken over, or with a recovery
-- point): a retry that started over would repeat them.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_forget(caller oid, proof bytea, namespace text, key text,
                                                            fence bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    given_key text;
    p idempotency_internal.idem_policy;
    stored text;
    store regclass;
    r idempotency_internal.idem_found;
    done boolean;
    n bigint;
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace);
    IF key IS NULL THEN
        RAISE EXCEPTION 'idempotency key must not be null'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Pass the key that idem_parse or idem_mint produced.';
    END IF;
    given_key := idempotency_internal.idem_key_of(key);
    PERFORM idempotency_internal.idem_check_fence(fence);
    p := idempotency_internal.idem_authorize(caller, proof, namespace);
    PERFORM idempotency_internal.idem_require_write(given_key, 'idem_fail_transient', 'fail');
    stored := idempotency_internal.idem_stored_key(given_key, p.hash_keys);
    store := idempotency_internal.idem_store_table(p.store, namespace);
    EXECUTE format('DELETE FROM %s r WHERE r.namespace OPERATOR(pg_catalog.=) $1 AND r.key_value OPERATOR(pg_catalog.=) $2'
                       ' AND r.status OPERATOR(pg_catalog.=) ''in_progress'' AND r.attempt OPERATOR(pg_catalog.=) 1%s'
                       ' AND CASE WHEN $3 IS NULL THEN idempotency_internal.idem_mine(r.xmin)'
                       '          ELSE r.fence OPERATOR(pg_catalog.=) $3 END',
                       store, CASE WHEN p.recovers THEN ' AND r.recovery_point IS NULL' ELSE '' END)
    USING namespace, stored, fence;
    GET DIAGNOSTICS n = ROW_COUNT;
    done := n > 0;
    IF NOT done THEN
        r := idempotency_internal.idem_look(p.store, p.recovers, namespace, stored);
        IF r.status = 'in_progress' AND (CASE WHEN fence IS NULL THEN r.mine ELSE r.fence = fence END)
           AND r.recovery_point IS NOT NULL THEN
            RAISE EXCEPTION 'cannot forget idempotency key %: it has a recovery point', idempotency_internal.idem_label(given_key)
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('Its holder recorded the recovery point "%s": the work has had effects that a retry must resume after, and forgetting the record would lose them (the retry would start over).', r.recovery_point),
                      HINT = 'Roll back instead and leave the claim to its lease: a retry takes it over and resumes from the point. Or finish it with idem_commit or idem_fail_permanent.';
        ELSIF r.status = 'in_progress' AND (CASE WHEN fence IS NULL THEN r.mine ELSE r.fence = fence END)
              AND r.attempt > 1 THEN
            RAISE EXCEPTION 'cannot forget idempotency key %: it was taken over', idempotency_internal.idem_label(given_key)
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = format('The record is at attempt %s: an earlier attempt''s lease ran out and a begin took the claim over, and that attempt may have acted before it stopped (its outcome is unknown). Forgetting the record would let a retry start over, or another request take the key.', r.attempt),
                      HINT = 'Roll back instead and leave the claim to its lease, or finish it with idem_commit or idem_fail_permanent once you know what the earlier attempt did.';
        END IF;
        PERFORM idempotency_internal.idem_not_in_progress(p, namespace, stored, given_key, 'fail', fence);
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION idem_commit(namespace text, key text, result jsonb, fence bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idempotency_internal.idem_caller;
    PERFORM idempotency_internal.idem_finish(c.caller, c.proof, namespace COLLATE "C", key COLLATE "C", result, fence, true);
END;
$$;

COMMENT ON FUNCTION idem_commit(text, text, jsonb, bigint) IS
'Records the result of an in-progress operation for replay (only while it is still the claim that drew fence, when given)';

CREATE OR REPLACE FUNCTION idem_fail_permanent(namespace text, key text, error jsonb, fence bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idempotency_internal.idem_caller;
    PERFORM idempotency_internal.idem_finish(c.caller, c.proof, namespace COLLATE "C", key COLLATE "C", error, fence, false);
END;
$$;

COMMENT ON FUNCTION idem_fail_permanent(text, text, jsonb, bigint) IS
'Records a permanent error ({"class_tag", "message", "cause"?}) of an in-progress operation for replay';

CREATE OR REPLACE FUNCTION idem_fail_transient(namespace text, key text, fence bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idempotency_internal.idem_caller;
    PERFORM idempotency_internal.idem_forget(c.caller, c.proof, namespace COLLATE "C", key COLLATE "C", fence);
END;
$$;

COMMENT ON FUNCTION idem_fail_transient(text, text, bigint) IS
'Forgets an in-progress operation so that the next idem_begin is fresh';


-- Heartbeats and recovery points ------------------------------------------------

-- The body of idem_extend_lease (recording false) and of idem_save_point
-- and idem_record_point for role caller: the in_progress record of the
-- claim that drew fence keeps its fence and attempt, its lease runs again
-- from now and its replay window moves with it (the claim's window from
-- now, if that ends later); with recording, the recovery point and its
-- state are recorded too. Returns the new end of the lease. function names
-- the call in messages.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_extend(caller oid, proof bytea, namespace text, key text,
                                                            fence bigint, recording boolean, point text, state jsonb,
                                                            function text)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    given_key text;
    p idempotency_internal.idem_policy;
    stored text;
    store regclass;
    extended timestamptz;
    characters integer;
    problem record;
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace);
    IF key IS NULL THEN
        RAISE EXCEPTION 'idempotency key must not be null'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Pass the key that idem_parse or idem_mint produced.';
    END IF;
    given_key := idempotency_internal.idem_key_of(key);
    IF fence IS NULL THEN
        RAISE EXCEPTION 'idempotency fence must not be null'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = function || ' acts for the claim that drew the fence: pass the fence idem_begin answered with fresh.';
    END IF;
    PERFORM idempotency_internal.idem_check_fence(fence);
    IF recording THEN
        IF point IS NULL THEN
            RAISE EXCEPTION 'idempotency recovery point must not be null'
                USING ERRCODE = 'invalid_parameter_value', DETAIL = 'Name the phase the work has completed, such as ''charged''.';
        END IF;
        characters := length(point);
        IF characters = 0 OR characters > 255 OR point COLLATE "C" ~ '[\x01-\x1f\x7f]' THEN
            RAISE EXCEPTION 'invalid idempotency recovery point'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = format('A recovery point is 1 to 255 characters with no control characters; the one given has %s characters%s.',
                                      characters, CASE WHEN point COLLATE "C" ~ '[\x01-\x1f\x7f]' THEN ', some of them control' ELSE '' END);
        END IF;
    END IF;
    p := idempotency_internal.idem_authorize(caller, proof, namespace);
    IF state IS NOT NULL THEN
        PERFORM idempotency_internal.idem_check_size(state, 'recovery state', namespace, p.max_payload_bytes);
        IF getdatabaseencoding() = 'SQL_ASCII' THEN
            PERFORM convert_to(state::text, 'UTF8');
        END IF;
    END IF;
    PERFORM idempotency_internal.idem_require_write(given_key, function,
        CASE WHEN recording THEN 'record a recovery point of' ELSE 'extend the lease of' END);
    IF p.lease <= interval '0' THEN
        RAISE EXCEPTION 'idempotency namespace "%" has no in_progress_lease', namespace
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN recording
                                THEN 'Without a lease a claim is held by its transaction and ends with it: a retry never resumes it, so it has no recovery points.'
                                ELSE 'Without a lease a claim is held by its transaction and ends with it: there is no lease to extend.' END,
                  HINT = 'Give the namespace one with idem_namespace_configure(namespace, in_progress_lease => ...).';
    END IF;
    stored := idempotency_internal.idem_stored_key(given_key, p.hash_keys);
    store := idempotency_internal.idem_store_table(p.store, namespace);
    IF recording AND NOT p.recovers THEN
        problem := idempotency_internal.idem_recovery_columns_problem(store);
        RAISE EXCEPTION 'the store of idempotency namespace "%" cannot keep recovery points', namespace
            USING ERRCODE = 'object_not_in_prerequisite_state', DETAIL = coalesce(problem.problem, ''),
                  HINT = coalesce(problem.fix, 'Copy the rows into a table idem_create_store makes, and bind the namespace to it.');
    END IF;
    EXECUTE format('UPDATE %s r SET updated_at = pg_catalog.clock_timestamp(),%s'
                       ' expires_at = GREATEST(r.expires_at, pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)'
                       '                      (r.expires_at OPERATOR(pg_catalog.-) r.updated_at))'
                       ' WHERE r.namespace OPERATOR(pg_catalog.=) $1 AND r.key_value OPERATOR(pg_catalog.=) $2'
                       ' AND r.status OPERATOR(pg_catalog.=) ''in_progress'' AND r.fence OPERATOR(pg_catalog.=) $3'
                       ' RETURNING r.updated_at',
                       store, CASE WHEN recording THEN ' recovery_point = $4, recovery_state = $5,' ELSE '' END)
    INTO extended USING namespace, stored, fence, point, state;
    IF extended IS NULL THEN
        PERFORM idempotency_internal.idem_not_in_progress(p, namespace, stored, given_key,
            CASE WHEN recording THEN 'record a recovery point of' ELSE 'extend the lease of' END, fence);
    END IF;
    RETURN extended + idempotency_internal.idem_length(p.lease);
END;
$$;

CREATE OR REPLACE FUNCTION idem_extend_lease(namespace text, key text, fence bigint)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idempotency_internal.idem_caller;
    RETURN idempotency_internal.idem_extend(c.caller, c.proof, namespace COLLATE "C", key COLLATE "C", fence, false, NULL, NULL, 'idem_extend_lease');
END;
$$;

COMMENT ON FUNCTION idem_extend_lease(text, text, bigint) IS
'A heartbeat of a claim under a lease: its lease runs again from now (fenced); returns the new end';

CREATE OR REPLACE FUNCTION idem_save_point(namespace text, key text, point text, state jsonb, fence bigint)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idempotency_internal.idem_caller;
    RETURN idempotency_internal.idem_extend(c.caller, c.proof, namespace COLLATE "C", key COLLATE "C", fence, true, point COLLATE "C", state, 'idem_save_point');
END;
$$;

COMMENT ON FUNCTION idem_save_point(text, text, text, jsonb, bigint) IS
'Records how far a claim''s work got (a phase and its state), answered to a begin that takes it over; a heartbeat too';

-- 0.9's name, the fence third: deprecated, removed in 2.0.
CREATE OR REPLACE FUNCTION idem_record_point(namespace text, key text, fence bigint, point text, state jsonb DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idempotency_internal.idem_caller;
    RETURN idempotency_internal.idem_extend(c.caller, c.proof, namespace COLLATE "C", key COLLATE "C", fence, true, point COLLATE "C", state, 'idem_record_point');
END;
$$;

COMMENT ON FUNCTION idem_record_point(text, text, bigint, text, jsonb) IS
'Deprecated: use idem_save_point(namespace, key, point, state, fence), the fence last as everywhere; removed in 2.0';


-- Operators' functions -----------------------------------------------------------

-- The backend of a transaction that holds key tag, when one does (NULL:
-- none, or a prepared transaction).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_holder(tag bigint)
RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.min(l.pid) FROM pg_catalog.pg_locks l
    WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory' AND l.granted AND l.objsubid OPERATOR(pg_catalog.=) 1
      AND l.mode OPERATOR(pg_catalog.=) 'ExclusiveLock'
      AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d
                                             WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
      AND l.classid::pg_catalog.int8 OPERATOR(pg_catalog.=) ((tag OPERATOR(pg_catalog.>>) 32) OPERATOR(pg_catalog.&) 4294967295)
      AND l.objid::pg_catalog.int8 OPERATOR(pg_catalog.=) (tag OPERATOR(pg_catalog.&) 4294967295)
$$;

-- The body of idem_key_state for role caller. The lock table is read
-- first, then the record (a holder that finishes meanwhile has written its
-- row before it lets the lock go): held (another transaction holds the
-- key's lock and this one sees no row: its claim, whose row it cannot see
-- yet), in_progress, committed, failed, or absent. This transaction's own
-- claim is its in_progress row.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_key_state(caller oid, proof bytea, namespace text, key text,
    OUT state text, OUT holder_pid integer, OUT attempt integer, OUT claimed_at timestamptz,
    OUT expires_at timestamptz, OUT request_hash bytea)
RETURNS record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    given_key text;
    p idempotency_internal.idem_policy;
    stored text;
    r idempotency_internal.idem_found;
    holder integer;
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace);
    given_key := idempotency_internal.idem_key_of(key);
    p := idempotency_internal.idem_authorize(caller, proof, namespace);
    PERFORM idempotency_internal.idem_require_execute(caller, '@extschema@.idem_key_state(text, text)');
    stored := idempotency_internal.idem_stored_key(given_key, p.hash_keys);
    holder := idempotency_internal.idem_holder(idempotency_internal.idem_tag(p.secret, 'k', namespace, stored));
    PERFORM idempotency_internal.idem_store_table(p.store, namespace);
    r := idempotency_internal.idem_look(p.store, p.recovers, namespace, stored);
    IF r.status IS NOT NULL THEN
        state := r.status;
        attempt := r.attempt;
        claimed_at := r.updated_at;
        expires_at := r.expires_at;
        request_hash := r.request_hash;
    ELSIF holder IS NOT NULL AND holder <> pg_backend_pid() THEN
        state := 'held';
        holder_pid := holder;
    ELSE
        state := 'absent';
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION idem_key_state(namespace text, key text,
    OUT state text, OUT holder_pid integer, OUT attempt integer, OUT claimed_at timestamptz,
    OUT expires_at timestamptz, OUT request_hash bytea)
RETURNS record
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idempotency_internal.idem_caller;
    SELECT * INTO state, holder_pid, attempt, claimed_at, expires_at, request_hash
    FROM idempotency_internal.idem_key_state(c.caller, c.proof, namespace COLLATE "C", key COLLATE "C");
END;
$$;

COMMENT ON FUNCTION idem_key_state(text, text) IS
'One key''s state (absent, held, in_flight, in_progress, committed, failed) and the backend holding it';

-- Raises 55006 for a key that a transaction holds (own: this one).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_in_use(namespace text, label text, own boolean)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
BEGIN
    RAISE EXCEPTION 'cannot release idempotency key %: a transaction holds it', label
        USING ERRCODE = 'object_in_use',
              DETAIL = pg_catalog.format('%s transaction holds the key in namespace "%s" and has not ended: releasing it now could let a retry begin a second attempt beside the first.',
                                         CASE WHEN own THEN 'This' ELSE 'Another' END, namespace),
              HINT = CASE WHEN own
                          THEN 'End this transaction first (finishing its attempt with idem_commit, idem_fail_permanent or idem_fail_transient if it is open); release the key after that.'
                          ELSE 'Let that transaction end (idem_key_state names its backend), then release the key.' END;
END;
$$;

-- The body of idem_release_key for role caller: the key's record deleted,
-- and the status it had returned (NULL: none). The key's lock is taken
-- without waiting and kept to the end of the transaction, so no begin
-- claims the key while the release is undecided. Refused (55006) while a
-- transaction holds the key, for a record this transaction wrote, and for
-- an in_progress record that a begin would not take over yet.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_release_key(caller oid, proof bytea, namespace text, key text)
RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    given_key text;
    label text;
    p idempotency_internal.idem_policy;
    stored text;
    store regclass;
    r idempotency_internal.idem_found;
    until timestamptz;
    deleted integer;
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace);
    given_key := idempotency_internal.idem_key_of(key);
    label := idempotency_internal.idem_label(given_key);
    p := idempotency_internal.idem_authorize(caller, proof, namespace);
    PERFORM idempotency_internal.idem_require_execute(caller, '@extschema@.idem_release_key(text, text)');
    PERFORM idempotency_internal.idem_require_write(given_key, 'idem_release_key', 'release');
    PERFORM idempotency_internal.idem_lock(p.secret, namespace, false);
    p := idempotency_internal.idem_authorize(caller, proof, namespace);
    stored := idempotency_internal.idem_stored_key(given_key, p.hash_keys);
    IF NOT pg_try_advisory_xact_lock(idempotency_internal.idem_tag(p.secret, 'k', namespace, stored)) THEN
        PERFORM idempotency_internal.idem_in_use(namespace, label, false);
    END IF;
    store := idempotency_internal.idem_store_table(p.store, namespace);
    r := idempotency_internal.idem_look(p.store, p.recovers, namespace, stored);
    IF r.status IS NULL THEN
        RETURN NULL;
    ELSIF r.mine THEN
        PERFORM idempotency_internal.idem_in_use(namespace, label, true);
    END IF;
    IF r.status = 'in_progress' THEN
        until := idempotency_internal.idem_takeover_from(r.updated_at, r.expires_at, p.lease);
        IF clock_timestamp() < until THEN
            RAISE EXCEPTION 'cannot release idempotency key %: its claim may still be worked on', label
                USING ERRCODE = 'object_in_use',
                      DETAIL = format('The key''s in_progress record in namespace "%s" %s: until %s its holder may still be working, and a retry answers in_flight.',
                                      namespace, CASE WHEN p.lease > interval '0' THEN 'was claimed under an in_progress_lease' ELSE 'has no lease' END,
                                      until),
                      HINT = 'Release the key after that, or let a retry take it over then.';
        END IF;
    END IF;
    EXECUTE format('DELETE FROM %1$s r WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY('
                   'SELECT s.ctid FROM %1$s s WHERE s.namespace OPERATOR(pg_catalog.=) $1'
                   ' AND s.key_value OPERATOR(pg_catalog.=) $2 AND s.status OPERATOR(pg_catalog.=) $3'
                   ' AND s.updated_at OPERATOR(pg_catalog.=) $4 FOR UPDATE SKIP LOCKED))', store)
    USING namespace, stored, r.status, r.updated_at;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    IF deleted = 0 THEN
        RAISE EXCEPTION 'cannot release idempotency key %: its record was not deleted', label
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('Between the look and the delete, another transaction changed or locked the key''s record in namespace "%s" (a late transition of its claim) or deleted it (a purge), or a trigger, rule or row security policy of its store kept the delete from it.', namespace),
                  HINT = 'Look at the key again (idem_key_state) and release it if it still needs it.';
    END IF;
    RAISE LOG 'idempotency: key % of namespace "%" released by role "%" (session role "%"), effective if its transaction commits; its record was %',
        label, namespace, caller::regrole, session_user, r.status;
    RETURN r.status;
END;
$$;

CREATE OR REPLACE FUNCTION idem_release_key(namespace text, key text)
RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idempotency_internal.idem_caller;
    RETURN idempotency_internal.idem_release_key(c.caller, c.proof, namespace COLLATE "C", key COLLATE "C");
END;
$$;

COMMENT ON FUNCTION idem_release_key(text, text) IS
'Deletes one key''s record (refused while a transaction or a lease holds it); returns the status it had';


-- Marks a claim in a namespace without a lease for the claim guard: a row
-- of idempotency_internal.idem_open_claims, written in the claiming
-- (sub)transaction and undone with it.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_open_claim(p idempotency_internal.idem_policy, namespace text,
                                                                key text, fence bigint)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
BEGIN
    IF p.lease OPERATOR(pg_catalog.<=) interval '0' THEN
        INSERT INTO idempotency_internal.idem_open_claims AS o (namespace, key_value, store, fence)
        VALUES (namespace, key, coalesce(p.store, '@extschema@.idempotency_record'::pg_catalog.regclass), fence)
        ON CONFLICT ON CONSTRAINT idem_open_claims_pkey DO UPDATE SET store = excluded.store, fence = excluded.fence;
    END IF;
END;
$$;

-- The claim guard -------------------------------------------------------------

-- Whether the claim a mark stands for is still open: its record in
-- progress, under the mark's fence, written by this transaction.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_claim_open(o idempotency_internal.idem_open_claims)
RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
AS $$
DECLARE
    open boolean;
BEGIN
    IF o.store OPERATOR(pg_catalog.=) '@extschema@.idempotency_record'::pg_catalog.regclass THEN
        RETURN EXISTS (SELECT FROM @extschema@.idempotency_record r
                       WHERE r.namespace OPERATOR(pg_catalog.=) o.namespace AND r.key_value OPERATOR(pg_catalog.=) o.key_value
                         AND r.status OPERATOR(pg_catalog.=) 'in_progress' AND r.fence OPERATOR(pg_catalog.=) o.fence
                         AND idempotency_internal.idem_mine(r.xmin));
    ELSIF NOT EXISTS (SELECT FROM pg_catalog.pg_class t WHERE t.oid OPERATOR(pg_catalog.=) o.store) THEN
        RETURN false;   -- its store was dropped, and the record with it
    END IF;
    EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM %s r WHERE r.namespace OPERATOR(pg_catalog.=) $1'
                              ' AND r.key_value OPERATOR(pg_catalog.=) $2 AND r.status OPERATOR(pg_catalog.=) ''in_progress'''
                              ' AND r.fence OPERATOR(pg_catalog.=) $3 AND idempotency_internal.idem_mine(r.xmin))', o.store)
        INTO open USING o.namespace, o.key_value, o.fence;
    RETURN open;
END;
$$;

-- At COMMIT (or PREPARE TRANSACTION), for each claim this transaction
-- marked (a deferred constraint trigger on idem_open_claims,
-- triggers.portable.sql): refused (25000), and the transaction rolled
-- back, while the claim is still open: committed, its record would answer
-- in_flight to every retry with no work behind it. A finished claim's mark
-- is removed.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_claim_guard()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    mark idempotency_internal.idem_open_claims;
    others bigint;
    autocommit boolean := statement_timestamp() = transaction_timestamp();
    cursors boolean := false;
    name text;
BEGIN
    -- The usual case in one statement: the mark of a claim in the
    -- extension's table that has ended, removed (idem_claim_open's test).
    DELETE FROM idempotency_internal.idem_open_claims o
    WHERE o.namespace = NEW.namespace AND o.key_value = NEW.key_value
      AND o.store = '@extschema@.idempotency_record'::regclass
      AND NOT EXISTS (SELECT FROM @extschema@.idempotency_record r
                      WHERE r.namespace = o.namespace AND r.key_value = o.key_value
                        AND r.status = 'in_progress' AND r.fence = o.fence
                        AND idempotency_internal.idem_mine(r.xmin));
    IF FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO mark FROM idempotency_internal.idem_open_claims o
    WHERE o.namespace = NEW.namespace AND o.key_value = NEW.key_value;
    IF mark.namespace IS NULL THEN
        RETURN NULL;   -- seen already
    ELSIF NOT idempotency_internal.idem_claim_open(mark) THEN
        DELETE FROM idempotency_internal.idem_open_claims o WHERE o.namespace = NEW.namespace AND o.key_value = NEW.key_value;
        RETURN NULL;
    END IF;
    others := (SELECT count(*) FROM idempotency_internal.idem_open_claims o WHERE idempotency_internal.idem_claim_open(o)) - 1;
    -- COMMIT has run this transaction's WITH HOLD cursors to their end and
    -- kept their rows before this trigger fires again for the claims they
    -- made; the rollback would keep them: they are closed, as the library
    -- closes them, and no row survives to report a claim rolled back.
    FOR name IN SELECT c.name FROM pg_cursors c WHERE c.is_holdable AND c.creation_time >= transaction_timestamp() LOOP
        EXECUTE format('CLOSE %I', name);
        cursors := true;
    END LOOP;
    RAISE EXCEPTION 'cannot % while idempotency key % is in progress%',
        CASE WHEN current_query() ~* '^\s*prepare\s' THEN 'prepare' ELSE 'commit' END,
        CASE WHEN EXISTS (SELECT FROM @extschema@.idem_namespace_config c WHERE c.namespace = NEW.namespace AND c.hash_keys)
             THEN 'sha256:' || left(NEW.key_value, 12) || '...'   -- the stored key is the hex SHA-256 labels start with
             ELSE idempotency_internal.idem_label(NEW.key_value) END,
        CASE WHEN others > 0 THEN format(' (and %s more)', others) ELSE '' END
        USING ERRCODE = 'invalid_transaction_state',
              DETAIL = CASE WHEN autocommit
                            THEN format('idem_begin answered fresh for the key in namespace "%s" outside a transaction block (autocommit), so its own statement would have committed the record with no work done', NEW.namespace)
                            ELSE format('This transaction''s idem_begin answered fresh for the key in namespace "%s", and no idem_commit, idem_fail_permanent or idem_fail_transient ended the attempt', NEW.namespace) END
                       || ': every retry would answer in_flight. The transaction was rolled back'
                       || CASE WHEN cursors THEN ', and the WITH HOLD cursors it declared were closed (their rows came from it).' ELSE '.' END,
              HINT = 'Finish every fresh attempt before COMMIT with idem_commit, idem_fail_permanent or idem_fail_transient; in autocommit mode, put begin, work and finish in one BEGIN ... COMMIT block or one function. An operation that spans transactions needs an in_progress_lease on its namespace.';
END;
$$;

