-- stores.portable.sql: what the store does with a table as a whole (the
-- portable edition; stores.native.sql has the library's): the shape check
-- of a table a namespace is bound to, and the administration's reads and
-- writes of a store (purge, the request scrub, counts, statistics).

-- The store's columns, as idem_create_store makes them: name, type, NOT
-- NULL, and the definition an ALTER TABLE that adds one gives.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_columns(
    OUT attnum integer, OUT name text, OUT type regtype, OUT not_null boolean, OUT definition text)
RETURNS SETOF record
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT c.n, c.name, c.type::pg_catalog.regtype, c.not_null, c.definition
    FROM (VALUES (1, 'namespace', 'pg_catalog.text', true, 'text COLLATE "C" NOT NULL'),
                 (2, 'key_value', 'pg_catalog.text', true, 'text COLLATE "C" NOT NULL'),
                 (3, 'status', 'pg_catalog.text', true, 'text NOT NULL'),
                 (4, 'request_hash', 'pg_catalog.bytea', true, 'bytea NOT NULL'),
                 (5, 'request_payload', 'pg_catalog.jsonb', false, 'jsonb'),
                 (6, 'result_payload', 'pg_catalog.jsonb', false, 'jsonb'),
                 (7, 'error_payload', 'pg_catalog.jsonb', false, 'jsonb'),
                 (8, 'created_at', 'pg_catalog.timestamptz', true, 'timestamptz NOT NULL'),
                 (9, 'updated_at', 'pg_catalog.timestamptz', true, 'timestamptz NOT NULL'),
                 (10, 'expires_at', 'pg_catalog.timestamptz', true, 'timestamptz NOT NULL'),
                 (11, 'attempt', 'pg_catalog.int4', true, 'integer NOT NULL DEFAULT 1'),
                 (12, 'fence', 'pg_catalog.int8', false, 'bigint'),
                 (13, 'recovery_point', 'pg_catalog.text', false, 'text'),
                 (14, 'recovery_state', 'pg_catalog.jsonb', false, 'jsonb')) AS c(n, name, type, not_null, definition)
$$;

-- Whether a table has the recovery columns of 0.8.0's shape as its 13th
-- and 14th (named and typed so, nullable, not dropped).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_recovers(store regclass)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT pg_catalog.count(*) OPERATOR(pg_catalog.=) 2
    FROM pg_catalog.pg_attribute a
    JOIN idempotency_internal.idem_store_columns() e ON e.attnum OPERATOR(pg_catalog.=) a.attnum
    WHERE a.attrelid OPERATOR(pg_catalog.=) store AND a.attnum OPERATOR(pg_catalog.>=) 13 AND NOT a.attisdropped
      AND a.attname OPERATOR(pg_catalog.=) e.name AND a.atttypid OPERATOR(pg_catalog.=) e.type AND NOT a.attnotnull
$$;

-- A unique index of table on (namespace, key_value) that a store can use:
-- valid, ready, immediate, a plain btree on those two columns; the primary
-- key first. NULL when there is none.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_key_index(store regclass)
RETURNS regclass
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT i.indexrelid::pg_catalog.regclass FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid
    WHERE i.indrelid OPERATOR(pg_catalog.=) store AND i.indisunique AND i.indnatts OPERATOR(pg_catalog.=) 2
      AND i.indisvalid AND i.indisready AND NOT i.indisexclusion AND i.indimmediate
      AND i.indexprs IS NULL AND i.indpred IS NULL
      AND i.indkey[0] OPERATOR(pg_catalog.=) 1 AND i.indkey[1] OPERATOR(pg_catalog.=) 2
      AND c.relam OPERATOR(pg_catalog.=) (SELECT a.oid FROM pg_catalog.pg_am a WHERE a.amname OPERATOR(pg_catalog.=) 'btree')
    ORDER BY i.indisprimary DESC, i.indexrelid LIMIT 1
$$;

-- What of its owner's would run when the store writes a table owned by
-- another role than the extension's owner (NULL: nothing). The library
-- writes a store as its owner; PL/pgSQL cannot change roles inside the
-- owner's functions, so the portable edition writes every store as the
-- extension's owner, and a trigger, rule, row security policy, CHECK
-- constraint, column default or generated column, or index expression of
-- another role would run with the extension owner's rights. Such a table
-- is refused (docs/managed.md); the claim guard the edition adds is its own.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_owners_code(store regclass)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    t record;
    what text;
BEGIN
    SELECT c.relname, c.relowner::regrole AS owner, c.relrowsecurity, c.relhasrules INTO t FROM pg_class c WHERE c.oid = store;
    IF pg_has_role(current_user, t.owner, 'USAGE') AND pg_has_role(t.owner, current_user, 'USAGE') THEN
        RETURN NULL;   -- the extension's owner owns it: what runs, runs as the table's owner
    END IF;
    what := coalesce(
        (SELECT format('a trigger (%s)', g.tgname) FROM pg_trigger g
         WHERE g.tgrelid = store AND NOT g.tgisinternal AND g.tgname <> 'idem_claim_guard' ORDER BY g.tgname LIMIT 1),
        CASE WHEN t.relhasrules THEN 'a rule' END,
        CASE WHEN t.relrowsecurity THEN 'row security' END,
        (SELECT format('a CHECK constraint (%s)', k.conname) FROM pg_constraint k
         WHERE k.conrelid = store AND k.contype = 'c' ORDER BY k.conname LIMIT 1),
        (SELECT format('a column with a default or generated value (%s)', a.attname) FROM pg_attribute a
         WHERE a.attrelid = store AND a.attnum > 0 AND NOT a.attisdropped AND (a.atthasdef OR a.attgenerated <> '')
           AND NOT (a.attname = 'attempt'
                    AND (SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d WHERE d.adrelid = store AND d.adnum = a.attnum) = '1')
         ORDER BY a.attnum LIMIT 1),
        (SELECT format('an index on an expression (%s)', i.indexrelid::regclass) FROM pg_index i
         WHERE i.indrelid = store AND (i.indexprs IS NOT NULL OR i.indpred IS NOT NULL) ORDER BY 1 LIMIT 1));
    IF what IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN format('%s is owned by %s, not by the extension''s owner %s, and has %s: the portable edition writes a store as the extension''s owner, which would run it with that role''s rights.',
                  t.relname, t.owner, current_user, what);
END;
$$;

-- What is wrong with a table as a store (NULLs: nothing), and for an older
-- shape the ALTER TABLE that fixes it (idem_bind_store's detail and hint).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_problem(store regclass, OUT problem text, OUT fix text)
RETURNS record
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    t record;
    natts integer;
    e record;
    a record;
    key_index regclass;
BEGIN
    IF store IS NULL THEN
        RETURN;
    END IF;
    SELECT c.relname, c.relkind, c.relpersistence, quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS qualified
    INTO t FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = store;
    IF t.relkind <> 'r' THEN
        problem := format('%s is not a plain table.', t.relname);
        RETURN;
    ELSIF t.relpersistence <> 'p' THEN
        problem := format('%s is %s: a crash%s would lose records that were committed, and their retries would begin again.',
                          t.relname, CASE t.relpersistence WHEN 'u' THEN 'unlogged' ELSE 'temporary' END,
                          CASE t.relpersistence WHEN 'u' THEN '' ELSE ' or the end of its session' END);
        RETURN;
    ELSIF EXISTS (SELECT FROM pg_inherits i WHERE i.inhrelid = store OR i.inhparent = store) THEN
        problem := format('%s takes part in table inheritance: statements on it would reach other tables'' rows (or miss its own).',
                          t.relname);
        RETURN;
    END IF;
    natts := (SELECT coalesce(max(x.attnum), 0) FROM pg_attribute x WHERE x.attrelid = store AND x.attnum > 0);
    FOR e IN SELECT * FROM idempotency_internal.idem_store_columns() c ORDER BY c.attnum LOOP
        IF e.attnum > natts THEN   -- an older shape: every column so far is right
            problem := CASE WHEN e.attnum = 1 THEN format('%s has no columns; a store needs %s.', t.relname, (SELECT string_agg(c.name, ', ' ORDER BY c.attnum) FROM idempotency_internal.idem_store_columns() c))
                            ELSE format('%s has the columns of an older store''s shape, up to %s; this release needs %s too.',
                              t.relname, (SELECT c.name FROM idempotency_internal.idem_store_columns() c WHERE c.attnum = e.attnum - 1),
                              (SELECT string_agg(c.name, ', ' ORDER BY c.attnum) FROM idempotency_internal.idem_store_columns() c
                               WHERE c.attnum >= e.attnum)) END;
            fix := format('Add them: ALTER TABLE %s %s;', t.qualified,
                          (SELECT string_agg(format('ADD COLUMN %s %s', c.name, c.definition), ', ' ORDER BY c.attnum)
                           FROM idempotency_internal.idem_store_columns() c WHERE c.attnum >= e.attnum));
            RETURN;
        END IF;
        SELECT x.attname, x.atttypid, x.attnotnull, x.attisdropped, x.attcollation INTO a
        FROM pg_attribute x WHERE x.attrelid = store AND x.attnum = e.attnum;
        IF a.attisdropped THEN
            problem := format('Column %s of %s must be %s, and was dropped: a store''s columns are at fixed places, so one dropped cannot be added again. Copy the rows into a table idem_create_store makes.',
                              e.attnum, t.relname, e.name);
        ELSIF a.attname <> e.name THEN
            problem := format('Column %s of %s must be %s.', e.attnum, t.relname, e.name);
        ELSIF a.atttypid <> e.type THEN
            problem := format('Column %s of %s must be of type %s, not %s.', e.name, t.relname,
                              format_type(e.type, NULL), format_type(a.atttypid, NULL));
        ELSIF a.attnotnull <> e.not_null THEN
            problem := format('Column %s of %s must %sbe NOT NULL.', e.name, t.relname, CASE WHEN e.not_null THEN '' ELSE 'not ' END);
        ELSIF e.attnum <= 2 AND a.attcollation <> 0
              AND NOT (SELECT c.collisdeterministic FROM pg_collation c WHERE c.oid = a.attcollation) THEN
            problem := format('Column %s of %s has a nondeterministic collation: keys must compare by their bytes.', e.name, t.relname);
        END IF;
        IF problem IS NOT NULL THEN
            RETURN;
        END IF;
    END LOOP;
    key_index := idempotency_internal.idem_key_index(store);
    IF key_index IS NULL THEN
        problem := format('%s has no valid unique index on (namespace, key_value), such as its primary key.', t.relname);
    ELSIF EXISTS (SELECT FROM pg_index i, unnest(i.indcollation) u(coll) JOIN pg_collation c ON c.oid = u.coll
                  WHERE i.indexrelid = key_index AND NOT c.collisdeterministic) THEN
        problem := format('The unique index of %s on (namespace, key_value) has a nondeterministic collation: keys must compare by their bytes.',
                          t.relname);
    ELSE
        problem := idempotency_internal.idem_owners_code(store);
        IF problem IS NOT NULL THEN
            fix := format('Give the table to the extension''s owner (ALTER TABLE %s OWNER TO %s), or remove what its owner added (docs/managed.md).',
                          t.qualified, quote_ident(current_user));
        END IF;
    END IF;
END;
$$;

-- Why a store cannot keep recovery points (NULLs: it can), and the ALTER
-- TABLE that gives it the columns, where one can.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_recovery_columns_problem(store regclass, OUT problem text, OUT fix text)
RETURNS record
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    name text := (SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) FROM pg_class c
                  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = store);
    natts integer := (SELECT coalesce(max(x.attnum), 0) FROM pg_attribute x WHERE x.attrelid = store AND x.attnum > 0);
BEGIN
    IF idempotency_internal.idem_recovers(store) THEN
        RETURN;
    ELSIF natts <= 12 THEN
        problem := format('%s has no recovery_point and recovery_state columns (a store''s shape before 0.8.0).', name);
        fix := format('Add them: ALTER TABLE %s ADD COLUMN recovery_point text, ADD COLUMN recovery_state jsonb;', name);
    ELSIF natts = 13 AND EXISTS (SELECT FROM pg_attribute x WHERE x.attrelid = store AND x.attnum = 13 AND NOT x.attisdropped
                                   AND x.attname = 'recovery_point' AND x.atttypid = 'text'::regtype AND NOT x.attnotnull) THEN
        problem := format('%s has a recovery_point column but no recovery_state column.', name);
        fix := format('Add it: ALTER TABLE %s ADD COLUMN recovery_state jsonb;', name);
    ELSE
        problem := format('Columns 13 and 14 of %s must be recovery_point text and recovery_state jsonb (nullable); other columns hold their places.', name);
    END IF;
END;
$$;

-- The table a store argument names (NULL: the extension's table), which
-- must be a table some namespace is bound to (42809): the administration
-- functions act on stores, never on any other table.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_bound_table(store regclass)
RETURNS regclass
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
#variable_conflict use_variable
BEGIN
    IF store IS NULL THEN
        RETURN '@extschema@.idempotency_record'::pg_catalog.regclass;
    ELSIF NOT EXISTS (SELECT FROM @extschema@.idem_namespace_config c WHERE c.store OPERATOR(pg_catalog.=) store) THEN
        RAISE EXCEPTION 'relation with OID % is not an idempotency store', store::pg_catalog.oid
            USING ERRCODE = 'wrong_object_type', DETAIL = 'No idempotency namespace is bound to it.';
    END IF;
    RETURN store;
END;
$$;

-- How messages name a store.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_name(store regclass)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN store IS NULL THEN 'the extension''s table idempotency.idempotency_record'
                ELSE coalesce((SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname)
                               FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
                               WHERE c.oid OPERATOR(pg_catalog.=) store), 'relation with OID ' OPERATOR(pg_catalog.||) store::pg_catalog.oid) END
$$;

-- Whether an error a store's purge chunk or statistics read met is the
-- store's own (its triggers, row security, privileges: the store is
-- skipped) rather than the session's (a cancel or statement_timeout, a
-- read-only transaction, a serialization failure or deadlock under
-- REPEATABLE READ or SERIALIZABLE: raised again).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_stores_own(state text)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE state WHEN '57014' THEN false
                      WHEN '25006' THEN pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
                      WHEN '40001' THEN pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.=) 'read committed'
                      WHEN '40P01' THEN pg_catalog.current_setting('transaction_isolation') OPERATOR(pg_catalog.=) 'read committed'
                      ELSE true END
$$;

-- Before a maintenance write to a store of the service's (NULL: the
-- extension's table, nothing to do): the table locked as a write locks it,
-- then refused (55000) if its owner, another role, has put code on it that
-- the write would run as the extension's owner (idem_owners_code). Locked
-- first, so that no such code is added between the check and the write.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_lock_writable(store regclass)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
DECLARE
    code text;
BEGIN
    IF store IS NULL THEN
        RETURN;
    END IF;
    EXECUTE pg_catalog.format('LOCK TABLE %s IN ROW EXCLUSIVE MODE', store);
    code := idempotency_internal.idem_owners_code(store);
    IF code IS NOT NULL THEN
        RAISE EXCEPTION '% cannot be written', store USING ERRCODE = 'object_not_in_prerequisite_state', DETAIL = code;
    END IF;
END;
$$;

-- One chunk of purge from a store (NULL: the extension's table): up to
-- batch_size expired records, oldest first, but for an in_progress record
-- whose lease (its namespace's, else the defaults') still runs; SKIP
-- LOCKED: a row another transaction holds is neither waited for nor
-- deleted. Returns how many, or NULL when the store failed (reported in a
-- WARNING, its chunk undone): purge goes on with the next store. (No time
-- limit of its own: idempotency.maintenance_timeout is the library's.)
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_purge(store regclass, batch_size integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    purged bigint;
    state text;
    message text;
    default_lease double precision := coalesce((SELECT date_part('epoch', d.in_progress_lease) FROM @extschema@.idem_defaults d), 0);
    target regclass;
BEGIN
    IF batch_size IS NULL OR batch_size < 1 THEN
        RAISE EXCEPTION 'invalid purge batch size'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = 'batch_size must be a positive integer.';
    END IF;
    target := idempotency_internal.idem_bound_table(store);
    BEGIN
        PERFORM idempotency_internal.idem_lock_writable(store);
        EXECUTE format('WITH doomed AS ('
                       ' SELECT r.ctid FROM %1$s r'
                       ' WHERE r.expires_at < pg_catalog.now()'
                       '   AND (r.status <> ''in_progress'''
                       '        OR pg_catalog.date_part(''epoch'', pg_catalog.now() - r.updated_at)'
                       '           >= coalesce((SELECT pg_catalog.date_part(''epoch'', c.in_progress_lease)'
                       '                        FROM @extschema@.idem_namespace_config c'
                       '                        WHERE c.namespace = r.namespace AND c.in_progress_lease IS NOT NULL), $2))'
                       ' ORDER BY r.expires_at LIMIT $1 FOR UPDATE OF r SKIP LOCKED)'
                       ' DELETE FROM %1$s r USING doomed d WHERE r.ctid = d.ctid', target)
        USING batch_size, default_lease;
        GET DIAGNOSTICS purged = ROW_COUNT;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
        IF NOT idempotency_internal.idem_stores_own(state) THEN
            RAISE;
        END IF;
        RAISE WARNING 'idempotency: skipped store %: its purge failed', idempotency_internal.idem_store_name(store)
            USING DETAIL = format('SQLSTATE %s: %s', state, message),
                  HINT = 'The other stores are not affected. The table''s owner can fix its triggers, row security or privileges; idem_stats.stores_skipped counts the stores skipped.';
        RETURN NULL;
    END;
    RETURN purged;
END;
$$;

-- Removes the requests a namespace's records kept in a store (NULL: the
-- extension's table); returns how many records had one.
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_forget_requests(store regclass, namespace text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    n bigint;
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace);
    PERFORM idempotency_internal.idem_lock_writable(store);
    EXECUTE format('UPDATE %s r SET request_payload = NULL WHERE r.namespace = $1 AND r.request_payload IS NOT NULL',
                   idempotency_internal.idem_bound_table(store))
    USING namespace;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END;
$$;

-- How many records (or, with in_progress_only, records in progress) a
-- namespace has in a store (NULL: the extension's table; 0 for one that
-- was dropped; by the namespace column, or every row, for a table no
-- longer of a store's shape).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_count(store regclass, namespace text, in_progress_only boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET row_security = off
AS $$
#variable_conflict use_variable
DECLARE
    n bigint;
BEGIN
    PERFORM idempotency_internal.idem_check_namespace(namespace);
    IF store IS NOT NULL AND NOT EXISTS (SELECT FROM pg_class t WHERE t.oid = store) THEN
        RETURN 0;
    ELSIF store IS NOT NULL AND EXISTS (SELECT FROM pg_class t WHERE t.oid = store AND t.relforcerowsecurity)
          AND idempotency_internal.idem_owners_code(store) IS NOT NULL THEN
        -- Its owner's row security would run as the extension's owner.
        RAISE EXCEPTION 'the store of idempotency namespace "%" cannot be used', namespace
            USING ERRCODE = 'object_not_in_prerequisite_state', DETAIL = idempotency_internal.idem_owners_code(store),
                  HINT = (idempotency_internal.idem_store_problem(store)).fix;
    END IF;
    IF store IS NOT NULL AND (idempotency_internal.idem_store_problem(store)).problem IS NOT NULL THEN
        IF EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = store AND a.attname = 'namespace' AND NOT a.attisdropped) THEN
            EXECUTE format('SELECT count(*) FROM %s r WHERE r.namespace::pg_catalog.text = $1', idempotency_internal.idem_bound_table(store))
            INTO n USING namespace;
        ELSE
            EXECUTE format('SELECT count(*) FROM %s r', idempotency_internal.idem_bound_table(store)) INTO n;
        END IF;
        RETURN n;
    END IF;
    EXECUTE format('SELECT count(*) FROM %s r WHERE r.namespace = $1 AND ($2 IS FALSE OR r.status = ''in_progress'')',
                   idempotency_internal.idem_bound_table(store))
    INTO n USING namespace, coalesce(in_progress_only, false);
    RETURN n;
END;
$$;

-- idem_namespace_stats's figures for each namespace in a store (NULL: the
-- extension's table), as a jsonb array; NULL when it has no records, or
-- when the read failed (reported in a WARNING).
CREATE OR REPLACE FUNCTION idempotency_internal.idem_store_stats(store regclass)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
    figures jsonb;
    state text;
    message text;
    target regclass := idempotency_internal.idem_bound_table(store);
BEGIN
    BEGIN
        EXECUTE format('SELECT jsonb_agg(s) FROM (SELECT r.namespace,'
                       ' count(*) FILTER (WHERE r.status = ''in_progress'') AS in_progress,'
                       ' count(*) FILTER (WHERE r.status = ''committed'') AS committed,'
                       ' count(*) FILTER (WHERE r.status = ''failed'') AS failed,'
                       ' now() - min(r.created_at) FILTER (WHERE r.status = ''in_progress'') AS oldest_in_progress_age,'
                       ' count(*) FILTER (WHERE r.expires_at < now()) AS expired,'
                       ' now() - min(r.expires_at) FILTER (WHERE r.expires_at < now()) AS oldest_expired_age,'
                       ' sum(pg_column_size(r.*))::int8 AS row_bytes,'
                       ' now() - min(r.updated_at) FILTER (WHERE r.status = ''in_progress'') AS oldest_in_progress_idle,'
                       ' count(*) FILTER (WHERE r.attempt > 1) AS taken_over'
                       ' FROM %s r GROUP BY r.namespace) s', target)
        INTO figures;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
        IF NOT idempotency_internal.idem_stores_own(state) THEN
            RAISE;
        END IF;
        RAISE WARNING 'idempotency: skipped store %: its statistics read failed', idempotency_internal.idem_store_name(store)
            USING DETAIL = format('SQLSTATE %s: %s', state, message),
                  HINT = 'The other stores are not affected. The table''s owner can fix its triggers, row security or privileges; idem_stats.stores_skipped counts the stores skipped.';
        RETURN NULL;
    END;
    RETURN figures;
END;
$$;
