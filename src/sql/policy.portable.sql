-- policy.portable.sql: what the portable store's functions share: the
-- namespace's policy read from the registry (and the access check), the
-- checks of their arguments, lock tags, fences, and whether a row is this
-- transaction's. Plumbing, in idempotency_internal. No function here is
-- SECURITY DEFINER: each runs as its caller, which is the extension's owner
-- when the store's entry points (store.portable.sql) call it, and a role
-- that calls one directly reads nothing it may not read.

-- What the store needs of a namespace: its settings (its own, else the
-- defaults'), its store (NULL: the extension's table) and whether that
-- store keeps recovery points, what its fingerprint ignores, and the lock
-- secret its lock tags are keyed with; and the snapshot it was read in
-- (a begin answers without the namespace's lock only versions committed
-- before it: idem_settled); own_table_ok: the namespace's records are in
-- the extension's table and it passes idem_store_table's check (so that
-- the store's calls need not ask again).
CREATE TYPE idempotency_internal.idem_policy AS (
    registered         boolean,
    hash_keys          boolean,
    store              regclass,
    recovers           boolean,
    store_request      boolean,
    replay_window      interval,
    has_replay_window  boolean,
    lease              interval,
    max_payload_bytes  integer,
    in_flight_wait     interval,
    ignore             text[],
    secret             bytea,
    seen               pg_catalog.pg_snapshot,
    own_table_ok       boolean
);

-- Whether a grant of the namespace (idem_grant) reaches role caller: a
-- function of its own, so that a call whose caller owns the store does
-- not set up the query (idem_authorize).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_granted(caller oid, namespace text)
RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
BEGIN
    RETURN EXISTS (SELECT FROM @extschema@.idem_namespace_grant g
                   JOIN pg_catalog.pg_roles o ON o.oid OPERATOR(pg_catalog.=) g.grantee::pg_catalog.oid
                   WHERE g.namespace OPERATOR(pg_catalog.=) namespace
                     AND pg_catalog.pg_has_role(caller, o.oid, 'USAGE'));
END;
$$;

-- The namespace's policy for role caller, whose proof (idem_caller) is
-- checked first: 42501 when it is not a proof of caller in this backend
-- and transaction, or when caller may not use the namespace (the owner and
-- its members always may, others by a grant, idem_grant); 42704 when the
-- defaults require registered namespaces and this one is not. Read with
-- the latest snapshot of the statement, so a revoke that committed holds
-- from the next call.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_authorize(caller oid, proof bytea, namespace text)
RETURNS idempotency_internal.idem_policy
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    p idempotency_internal.idem_policy;
BEGIN
    -- The usual case in one statement: the policy, with its secret only
    -- when every check passes; otherwise idem_authorize_checked reads it
    -- again and says what is wrong.
    SELECT c.namespace IS NOT NULL, coalesce(c.hash_keys, false), c.store,
           c.store IS NULL OR idempotency_internal.idem_recovers(c.store),
           coalesce(c.store_request, d.store_request, true),
           coalesce(c.replay_window, d.replay_window, interval '24 hours'),
           c.replay_window IS NOT NULL,
           coalesce(c.in_progress_lease, d.in_progress_lease, interval '0'),
           coalesce(c.max_payload_bytes, d.max_payload_bytes, 16777216),
           coalesce(d.in_flight_wait, interval '0'),
           c.fingerprint_ignore,
           CASE WHEN caller IS NOT NULL AND proof OPERATOR(pg_catalog.=) idempotency_internal.idem_proof(s.secret, caller)
                     AND (pg_catalog.pg_has_role(caller, current_user::pg_catalog.name, 'USAGE')
                          OR idempotency_internal.idem_granted(caller, namespace))
                     AND (d.require_registered IS NOT TRUE OR c.namespace IS NOT NULL)
                THEN s.secret END,
           pg_catalog.pg_current_snapshot(),
           c.store IS NULL AND EXISTS (SELECT FROM pg_catalog.pg_class t
                                       WHERE t.oid OPERATOR(pg_catalog.=) '@extschema@.idempotency_record'::pg_catalog.regclass
                                         AND t.relpersistence OPERATOR(pg_catalog.=) 'p')
    INTO p
    FROM idempotency_internal.idem_lock_secret s
    LEFT JOIN @extschema@.idem_namespace_config c ON c.namespace OPERATOR(pg_catalog.=) namespace
    LEFT JOIN (SELECT * FROM @extschema@.idem_defaults x LIMIT 1) d ON true;
    IF p.secret IS NULL THEN
        p := idempotency_internal.idem_authorize_checked(caller, proof, namespace);
    ELSIF p.ignore IS NOT NULL THEN   -- pointers written by hand that are not pointers fail every call, named
        PERFORM idempotency_internal.idem_pointer_tokens(p.ignore, namespace);
    END IF;
    IF pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.<>) 'read committed' THEN
        PERFORM idempotency_internal.idem_policy_current(namespace);
    END IF;
    RETURN p;
END;
$$;

-- Under REPEATABLE READ or SERIALIZABLE the policy is read in the
-- transaction's snapshot, and a change committed since (hash_keys, the
-- store, the lease, a revoke, the defaults) must not be acted on: the
-- native edition reads the registry as committed. Locking the rows read
-- raises 40001 when one was changed or deleted since the snapshot; an
-- insert that is undone at once does when the namespace's or the defaults'
-- row was added since. A read-only transaction writes no record, so it
-- acts on nothing and is left alone.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_policy_current(namespace text)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    registered boolean;
    has_defaults boolean;
BEGIN
    IF pg_catalog.current_setting('transaction_read_only')::boolean THEN
        RETURN;
    END IF;
    PERFORM FROM @extschema@.idem_namespace_config c WHERE c.namespace OPERATOR(pg_catalog.=) namespace FOR SHARE;
    registered := FOUND;
    PERFORM FROM @extschema@.idem_namespace_grant g WHERE g.namespace OPERATOR(pg_catalog.=) namespace FOR SHARE;
    PERFORM FROM @extschema@.idem_defaults d FOR SHARE;
    has_defaults := FOUND;
    IF registered AND has_defaults THEN
        RETURN;
    END IF;
    BEGIN
        IF NOT registered THEN
            INSERT INTO @extschema@.idem_namespace_config (namespace) VALUES (namespace) ON CONFLICT DO NOTHING;
        END IF;
        IF NOT has_defaults THEN
            INSERT INTO @extschema@.idem_defaults DEFAULT VALUES ON CONFLICT DO NOTHING;
        END IF;
        RAISE EXCEPTION 'undone' USING ERRCODE = 'IDM00';
    EXCEPTION WHEN SQLSTATE 'IDM00' THEN
        NULL;
    END;
END;
$$;

-- idem_authorize step by step, each check raising its own error: what
-- idem_authorize runs when its one statement finds a check failing.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_authorize_checked(caller oid, proof bytea, namespace text)
RETURNS idempotency_internal.idem_policy
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    p idempotency_internal.idem_policy;
    r record;
BEGIN
    SELECT s.secret, c.namespace IS NOT NULL AS registered, c.hash_keys, c.store, c.store_request,
           c.replay_window, c.in_progress_lease, c.max_payload_bytes, c.fingerprint_ignore,
           d.require_registered, d.store_request AS d_store_request, d.replay_window AS d_replay_window,
           d.in_progress_lease AS d_lease, d.max_payload_bytes AS d_max_payload_bytes, d.in_flight_wait AS d_in_flight_wait,
           (pg_catalog.pg_has_role(caller, current_user::pg_catalog.name, 'USAGE')
            OR idempotency_internal.idem_granted(caller, namespace)) AS granted
    INTO r
    FROM idempotency_internal.idem_lock_secret s
    LEFT JOIN @extschema@.idem_namespace_config c ON c.namespace OPERATOR(pg_catalog.=) namespace
    LEFT JOIN (SELECT * FROM @extschema@.idem_defaults x LIMIT 1) d ON true;
    IF caller IS NULL OR proof IS DISTINCT FROM idempotency_internal.idem_proof(r.secret, caller) THEN
        RAISE EXCEPTION 'permission denied for idempotency namespace "%"', namespace
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'The call did not come through the idempotency API with its caller''s proof.';
    ELSIF NOT r.granted THEN
        RAISE EXCEPTION 'permission denied for idempotency namespace "%"', namespace
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'The namespace''s administrator grants it with idem_grant(namespace, role).';
    ELSIF r.require_registered AND NOT r.registered THEN
        RAISE EXCEPTION 'idempotency namespace "%" is not registered', namespace
            USING ERRCODE = 'undefined_object',
                  DETAIL = 'The defaults require registered namespaces (idem_namespace_defaults); register it with idem_namespace_configure.';
    END IF;
    p.secret := r.secret;
    p.registered := r.registered;
    p.hash_keys := coalesce(r.hash_keys, false);
    p.store := r.store;
    p.recovers := r.store IS NULL OR idempotency_internal.idem_recovers(r.store);
    p.store_request := coalesce(r.store_request, r.d_store_request, true);
    p.replay_window := coalesce(r.replay_window, r.d_replay_window, interval '24 hours');
    p.has_replay_window := r.replay_window IS NOT NULL;
    p.lease := coalesce(r.in_progress_lease, r.d_lease, interval '0');
    p.max_payload_bytes := coalesce(r.max_payload_bytes, r.d_max_payload_bytes, 16777216);
    p.in_flight_wait := coalesce(r.d_in_flight_wait, interval '0');
    p.ignore := r.fingerprint_ignore;
    p.seen := pg_catalog.pg_current_snapshot();
    IF p.ignore IS NOT NULL THEN   -- pointers written by hand that are not pointers fail every call, named
        PERFORM idempotency_internal.idem_pointer_tokens(p.ignore, namespace);
    END IF;
    RETURN p;
END;
$$;

-- The lowercase hex SHA-256 of key's UTF-8 bytes: the stored key of a
-- hash_keys namespace, and (its first 12 digits) how messages name a key.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_key_hex(key text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(key, 'UTF8')), 'hex') $$;

-- How messages name a key: sha256: and 12 hex digits, never the key.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_label(key text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT 'sha256:' OPERATOR(pg_catalog.||) pg_catalog.left(idempotency_internal.idem_key_hex(key), 12) OPERATOR(pg_catalog.||) '...' $$;

-- The key as the store keeps it: the key, or with hash_keys its hex SHA-256.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_stored_key(key text, hash_keys boolean)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT CASE WHEN hash_keys THEN idempotency_internal.idem_key_hex(key) ELSE key END $$;

-- A lock tag: 64 bits of SHA-256 over the secret, a kind ('k' a key, 'n' a
-- namespace) and the length-prefixed namespace and key. A role that reads
-- pg_locks can test no guessed key against it, nor make two keys collide.
-- (An advisory lock from SQL has objsubid 1; an application's advisory
-- lock on the same 64 bits would be taken for the key's, with odds of
-- 2^-64 a pair.)
CREATE OR REPLACE FUNCTION idempotency_internal.idem_tag(secret bytea, kind text, namespace text, key text DEFAULT NULL)
RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT ('x' OPERATOR(pg_catalog.||) pg_catalog.encode(pg_catalog.substr(pg_catalog.sha256(
               secret OPERATOR(pg_catalog.||) pg_catalog.convert_to(kind, 'UTF8')
               OPERATOR(pg_catalog.||) pg_catalog.int4send(pg_catalog.octet_length(pg_catalog.convert_to(namespace, 'UTF8')))
               OPERATOR(pg_catalog.||) pg_catalog.convert_to(namespace, 'UTF8')
               OPERATOR(pg_catalog.||) CASE WHEN key IS NULL THEN '\x'::pg_catalog.bytea
                    ELSE pg_catalog.int4send(pg_catalog.octet_length(pg_catalog.convert_to(key, 'UTF8')))
                         OPERATOR(pg_catalog.||) pg_catalog.convert_to(key, 'UTF8') END), 1, 8), 'hex'))::pg_catalog.bit(64)::pg_catalog.int8
$$;

-- A new claim's fence: 63 random bits from the server's strong random
-- source (the random hex digits of two version-4 UUIDs), drawn again below
-- 2^32, so a bigint in [2^32, 2^63) that no other claim of the key, in this
-- database or any copy of it, shares but by chance (2^-62 a pair).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_draw_fence()
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    fence pg_catalog.int8;
BEGIN
    LOOP
        fence := ('x' OPERATOR(pg_catalog.||) pg_catalog.left(pg_catalog.gen_random_uuid()::pg_catalog.text, 8)
                  OPERATOR(pg_catalog.||) pg_catalog.right(pg_catalog.gen_random_uuid()::pg_catalog.text, 8)
                 )::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.&) 9223372036854775807;
        EXIT WHEN fence OPERATOR(pg_catalog.>=) 4294967296;
    END LOOP;
    RETURN fence;
END;
$$;

-- idem_mine step by step (the version's id placed in the transaction's
-- epoch, and its status asked).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_mine_slow(x xid)
RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
AS $$
DECLARE
    top pg_catalog.int8 := pg_catalog.pg_current_xact_id_if_assigned()::pg_catalog.text::pg_catalog.int8;
    low pg_catalog.int8 := x::pg_catalog.text::pg_catalog.int8;
    candidate pg_catalog.int8;
BEGIN
    IF top IS NULL OR low OPERATOR(pg_catalog.<) 3 THEN
        RETURN false;
    END IF;
    candidate := top OPERATOR(pg_catalog.+)
                 ((low OPERATOR(pg_catalog.-) (top OPERATOR(pg_catalog.&) 4294967295)) OPERATOR(pg_catalog.+) 4294967296)
                 OPERATOR(pg_catalog.%) 4294967296;   -- the first id from top on with these low bits
    IF candidate OPERATOR(pg_catalog.=) top THEN
        RETURN true;
    ELSIF candidate OPERATOR(pg_catalog.<) pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())::pg_catalog.text::pg_catalog.int8 THEN
        RETURN pg_catalog.pg_xact_status(candidate::pg_catalog.text::pg_catalog.xid8) OPERATOR(pg_catalog.=) 'in progress';
    END IF;
    BEGIN
        RETURN pg_catalog.pg_xact_status(candidate::pg_catalog.text::pg_catalog.xid8) OPERATOR(pg_catalog.=) 'in progress';
    EXCEPTION WHEN invalid_parameter_value THEN   -- "transaction ID ... is in the future"
        RETURN false;
    END;
END;
$$;

-- Whether a row version this transaction can see was written by it (its
-- xmin an id of this transaction or of one of its subtransactions): a
-- version another transaction has not committed is invisible, so a visible
-- version whose writer is still in progress is this transaction's. A
-- transaction without an id wrote nothing; its ids are its top-level id or
-- later ones, which places the 32-bit xmin in its 64-bit epoch. A version
-- old enough to have been frozen can read as an id not yet given out:
-- asking its status is an error then, which says it is not this
-- transaction's.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_mine(x xid)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL UNSAFE
AS $$
    -- Inlined where it is called: the usual cases (no id yet; the
    -- top-level id's version) without a call; the others in idem_mine_slow.
    SELECT CASE WHEN pg_catalog.pg_current_xact_id_if_assigned() IS NULL
                     OR x::pg_catalog.text::pg_catalog.int8 OPERATOR(pg_catalog.<) 3 THEN false
                WHEN x::pg_catalog.text::pg_catalog.int8 OPERATOR(pg_catalog.=)
                     (pg_catalog.pg_current_xact_id_if_assigned()::pg_catalog.text::pg_catalog.int8
                      OPERATOR(pg_catalog.&) 4294967295) THEN true
                ELSE idempotency_internal.idem_mine_slow(x) END
$$;

-- Whether a finished version written by writer may be answered from a
-- look taken without the namespace's lock: its writer committed before
-- snapshot seen (the policy's read) was taken, so that the version, and a
-- record of its namespace, existed from that read until the look (while a
-- namespace has records its policy cannot change). A frozen version keeps
-- its raw xmin: one that reads as running at the snapshot or begun since
-- is not answered (it may have been loaded frozen meanwhile, COPY ...
-- FREEZE), unless it reads as later than every transaction begun yet: it
-- is 2^31 transactions old or more then.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_settled(writer xid, seen pg_catalog.pg_snapshot)
RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
AS $$
DECLARE
    xmax pg_catalog.int8 := pg_catalog.pg_snapshot_xmax(seen)::pg_catalog.text::pg_catalog.int8;
    back pg_catalog.int8;   -- how far before xmax the raw xmin is, modulo 2^32
BEGIN
    IF writer::pg_catalog.text::pg_catalog.int8 OPERATOR(pg_catalog.<) 3 THEN
        RETURN true;   -- frozen as before 9.4
    END IF;
    back := ((xmax OPERATOR(pg_catalog.&) 4294967295) OPERATOR(pg_catalog.-) writer::pg_catalog.text::pg_catalog.int8
             OPERATOR(pg_catalog.+) 4294967296) OPERATOR(pg_catalog.%) 4294967296;
    IF back OPERATOR(pg_catalog.>) 0 AND back OPERATOR(pg_catalog.<) 2147483648
       AND xmax OPERATOR(pg_catalog.-) back OPERATOR(pg_catalog.>=) 3 THEN
        RETURN pg_catalog.pg_visible_in_snapshot((xmax OPERATOR(pg_catalog.-) back)::pg_catalog.text::pg_catalog.xid8, seen);
    END IF;
    BEGIN   -- reads as begun at the snapshot or later: has that id been given out?
        PERFORM pg_catalog.pg_xact_status((xmax OPERATOR(pg_catalog.+) (4294967296 OPERATOR(pg_catalog.-) back)
                                           OPERATOR(pg_catalog.%) 4294967296)::pg_catalog.text::pg_catalog.xid8);
        RETURN false;
    EXCEPTION WHEN invalid_parameter_value THEN   -- "transaction ID ... is in the future"
        RETURN true;
    END;
END;
$$;

-- A length of time in seconds, as extract(epoch) counts an interval (days
-- of 24 hours, months of 30 days, years of 365.25 days), as an interval of
-- time alone: a lease never moves by a calendar step in some time zone.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_length(i interval)
RETURNS interval
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT pg_catalog.make_interval(secs => pg_catalog.date_part('epoch', i)) $$;

-- When an in_progress record claimed (or last extended) at updated_at
-- may be taken over: once its namespace's lease has run out, or, without a
-- lease, once its replay window has passed.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_takeover_from(updated_at timestamptz, expires_at timestamptz,
                                                                   lease interval)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN lease OPERATOR(pg_catalog.>) interval '0'
                THEN updated_at OPERATOR(pg_catalog.+) idempotency_internal.idem_length(lease)
                ELSE expires_at END
$$;

-- An interval's three fields, as the library reads them: months, days and
-- the time in seconds (exact: extract() is numeric).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_interval_parts(i interval, OUT months bigint, OUT days bigint,
                                                                    OUT secs numeric)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
    months := (EXTRACT(year FROM i) OPERATOR(pg_catalog.*) 12 OPERATOR(pg_catalog.+) EXTRACT(month FROM i))::pg_catalog.int8;
    days := EXTRACT(day FROM i)::pg_catalog.int8;
    secs := EXTRACT(epoch FROM i) OPERATOR(pg_catalog.-) (EXTRACT(year FROM i) OPERATOR(pg_catalog.*) 31557600)
            OPERATOR(pg_catalog.-) (EXTRACT(month FROM i) OPERATOR(pg_catalog.*) 2592000)
            OPERATOR(pg_catalog.-) (EXTRACT(day FROM i) OPERATOR(pg_catalog.*) 86400);
END;
$$;

-- An interval as the library's messages print it (interval_out, in the
-- session's IntervalStyle).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_interval_text(i interval)
RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE
AS $$ SELECT i::pg_catalog.text $$;

-- The replay window of a begin: the argument, else the namespace's, else
-- the defaults'. An argument is positive, with no field negative, under
-- 10,000 years, and no longer than the namespace's window, a limit the
-- caller cannot lift (22023).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_window(replay_window interval, p idempotency_internal.idem_policy,
                                                            namespace text)
RETURNS interval
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    f record;
BEGIN
    IF replay_window IS NULL THEN
        IF p.has_replay_window AND p.replay_window OPERATOR(pg_catalog.>=) interval '10000 years' THEN
            RAISE EXCEPTION 'invalid idempotency replay window'
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'The namespace''s replay_window is 10000 years or more; configure one under 10000 years.';
        END IF;
        RETURN p.replay_window;
    END IF;
    f := idempotency_internal.idem_interval_parts(replay_window);
    IF f.months OPERATOR(pg_catalog.<) 0 OR f.days OPERATOR(pg_catalog.<) 0 OR f.secs OPERATOR(pg_catalog.<) 0
       OR replay_window OPERATOR(pg_catalog.=) interval '0'
       OR replay_window OPERATOR(pg_catalog.>=) interval '10000 years' THEN
        RAISE EXCEPTION 'invalid idempotency replay window'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('The replay window must be positive and under 10000 years, and no part of it (months, days, time) negative, not %s.',
                                             idempotency_internal.idem_interval_text(replay_window));
    END IF;
    IF p.has_replay_window AND replay_window OPERATOR(pg_catalog.>) p.replay_window THEN
        RAISE EXCEPTION 'idempotency replay window exceeds the namespace''s'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('Namespace "%s" keeps records for at most %s (its replay_window); the call asked for %s.',
                                             namespace, idempotency_internal.idem_interval_text(p.replay_window),
                                             idempotency_internal.idem_interval_text(replay_window)),
                  HINT = 'Pass a shorter replay_window or none; the namespace''s administrator sets the limit with idem_namespace_configure.';
    END IF;
    RETURN replay_window;
END;
$$;

-- How long a begin waits for a concurrent holder, in milliseconds: the
-- argument, else the defaults'. Zero or more in every field, at most
-- 2147483647 ms; days count 24 hours and months 30 days (22023).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_wait_ms(in_flight_wait interval, p idempotency_internal.idem_policy)
RETURNS double precision
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    f record;
    ms pg_catalog.numeric;
BEGIN
    IF in_flight_wait IS NULL AND p.in_flight_wait OPERATOR(pg_catalog.=) interval '0' THEN
        RETURN 0;   -- the usual case
    ELSIF in_flight_wait IS NULL THEN
        f := idempotency_internal.idem_interval_parts(p.in_flight_wait);
    ELSE
        f := idempotency_internal.idem_interval_parts(in_flight_wait);
    END IF;
    ms := ((f.months OPERATOR(pg_catalog.*) 30 OPERATOR(pg_catalog.+) f.days) OPERATOR(pg_catalog.*) 86400000)
          OPERATOR(pg_catalog.+) (f.secs OPERATOR(pg_catalog.*) 1000);
    IF in_flight_wait IS NOT NULL
       AND (f.months OPERATOR(pg_catalog.<) 0 OR f.days OPERATOR(pg_catalog.<) 0 OR f.secs OPERATOR(pg_catalog.<) 0
            OR ms OPERATOR(pg_catalog.>) 2147483647) THEN
        RAISE EXCEPTION 'invalid idempotency in-flight wait'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('in_flight_wait must be zero or positive, at most 2147483647 ms (about 24.8 days), and no part of it (months, days, time) negative, not %s.',
                                             idempotency_internal.idem_interval_text(in_flight_wait));
    END IF;
    RETURN ms;
END;
$$;

-- The size of a jsonb value as the library measures it (its bytes, not
-- compressed, without the length word): a value stored compressed, or
-- near the limit, is copied once to be measured.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_jsonb_bytes(payload jsonb)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT pg_catalog.pg_column_size(pg_catalog.jsonb_build_array(payload) OPERATOR(pg_catalog.->) 0)::pg_catalog.int8 OPERATOR(pg_catalog.-) 4 $$;

-- Whether payload may be stored compressed, so that pg_column_size does
-- not tell its size: pg_column_compression says on 14 and later (inlined
-- where it is called); 13 has no way to tell from SQL, so there every
-- payload is measured (idem_jsonb_bytes) before it is compared with its
-- limit (the portable edition runs on RDS 13.12 and later: docs/managed.md).
DO $compat$
BEGIN
    IF pg_catalog.current_setting('server_version_num')::pg_catalog.int4 OPERATOR(pg_catalog.>=) 140000 THEN
        CREATE OR REPLACE FUNCTION idempotency_internal.idem_compressed(payload jsonb)
        RETURNS boolean
        LANGUAGE sql STABLE PARALLEL SAFE
        AS $$ SELECT pg_catalog.pg_column_compression(payload) IS NOT NULL $$;
    ELSE
        CREATE OR REPLACE FUNCTION idempotency_internal.idem_compressed(payload jsonb)
        RETURNS boolean
        LANGUAGE sql STABLE PARALLEL SAFE
        AS $$ SELECT true $$;
    END IF;
END
$compat$;

-- The size of payload when it is larger than max_bytes, else NULL.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_oversize(payload jsonb, max_bytes integer)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    size pg_catalog.int8;
BEGIN
    IF NOT idempotency_internal.idem_compressed(payload)
       AND pg_catalog.pg_column_size(payload) OPERATOR(pg_catalog.<=) max_bytes THEN
        RETURN NULL;   -- uncompressed, its size as stored is its size
    END IF;
    size := idempotency_internal.idem_jsonb_bytes(payload);
    RETURN CASE WHEN size OPERATOR(pg_catalog.>) max_bytes THEN size END;
END;
$$;

-- Raises 54000 when payload (what: request, result, error, recovery
-- state) is larger than max_bytes, its namespace's max_payload_bytes.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_check_size(payload jsonb, what text, namespace text, max_bytes integer)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    size pg_catalog.int8 := idempotency_internal.idem_oversize(payload, max_bytes);
BEGIN
    IF size IS NOT NULL THEN
        RAISE EXCEPTION 'idempotency % is too large', what
            USING ERRCODE = 'program_limit_exceeded',
                  DETAIL = pg_catalog.format('It is %s bytes as jsonb; namespace "%s" allows at most %s (its max_payload_bytes, or the defaults'').',
                                             size, namespace, max_bytes);
    END IF;
END;
$$;

-- Raises 25006 in a read-only transaction, or on a standby, for a call
-- (function) that would write (action: begin, commit, fail, ...).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_require_write(key text, function text, action text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
DECLARE
    standby boolean;
BEGIN
    IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off' THEN
        RETURN;
    END IF;
    standby := pg_catalog.pg_is_in_recovery();
    RAISE EXCEPTION 'cannot % idempotency key % in a read-only transaction', action, idempotency_internal.idem_label(key)
        USING ERRCODE = 'read_only_sql_transaction',
              DETAIL = CASE WHEN standby
                            THEN 'The server is a standby in recovery: it replays recorded outcomes but records no new attempt.'
                            ELSE 'The transaction is read-only (SET TRANSACTION READ ONLY, or default_transaction_read_only): it replays recorded outcomes but records no new attempt.' END,
              HINT = 'Call ' OPERATOR(pg_catalog.||) function OPERATOR(pg_catalog.||)
                     CASE WHEN standby THEN ' on the primary.' ELSE ' in a read-write transaction.' END;
END;
$$;

-- A fence argument: NULL, or at least 2^32 (22023: an attempt number
-- passed by mistake, as 0.4 took it, is refused).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_check_fence(fence bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
BEGIN
    IF fence OPERATOR(pg_catalog.>=) 1 AND fence OPERATOR(pg_catalog.<) 4294967296 THEN
        RAISE EXCEPTION 'invalid idempotency fence'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('fence is the value idem_begin answered with fresh (its fence column), or NULL, not %s.', fence),
                  HINT = 'An attempt number is not a fence; pass the outcome''s fence.';
    ELSIF fence OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'invalid idempotency fence'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('fence is the value idem_begin answered with fresh (its fence column), or NULL, not %s.', fence);
    END IF;
END;
$$;

-- The namespace's lock, shared (a begin) or exclusive (a change that must
-- see every record of the namespace), held to the end of the transaction.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_lock(secret bytea, namespace text, exclusive boolean)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_variable
DECLARE
    tag pg_catalog.int8 := idempotency_internal.idem_tag(secret, 'n', namespace);
BEGIN
    IF exclusive THEN
        PERFORM pg_catalog.pg_advisory_xact_lock(tag);
    ELSIF NOT pg_catalog.pg_try_advisory_xact_lock_shared(tag) THEN
        PERFORM pg_catalog.pg_advisory_xact_lock_shared(tag);
    END IF;
END;
$$;

-- Takes the namespace's lock in share mode, as a begin does, if it is free
-- (or this transaction holds it already): whether it did.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_try_lock(secret bytea, namespace text)
RETURNS boolean
LANGUAGE sql VOLATILE PARALLEL UNSAFE
AS $$
    SELECT pg_catalog.pg_try_advisory_xact_lock_shared(idempotency_internal.idem_tag(secret, 'n', namespace))
$$;

-- Raises PostgreSQL's 42501 unless caller may execute function: an
-- operator's function whose owner's body runs here (idem_key_state,
-- idem_release_key) is for the roles the extension's owner grants the
-- API function to, as in the library.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_require_execute(caller oid, function regprocedure)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
BEGIN
    IF NOT pg_catalog.has_function_privilege(caller, function, 'EXECUTE') THEN
        RAISE EXCEPTION 'permission denied for function %', (SELECT p.proname FROM pg_catalog.pg_proc p
                                                             WHERE p.oid OPERATOR(pg_catalog.=) function)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END;
$$;
