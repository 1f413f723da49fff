-- store.native.sql: the store's functions, in the library (src/pg/begin.cpp,
-- transition.cpp, key_state.cpp, release.cpp).

-- Volatility of the store functions: VOLATILE (they read and write the
-- table and depend on the transaction), not STRICT (a NULL argument is an
-- error that says which), PARALLEL UNSAFE (they write). They check the
-- caller's namespace grant, then reach the table as its owner, through the
-- table access methods or through SQL that names every table, function and
-- operator with its schema: nothing on the caller's search_path can stand
-- in for one, and the per-call cost of pinning search_path is saved.

-- replay_window and in_flight_wait, when given, are this call's (the
-- settings of those names are never taken from a session: see
-- docs/api.md). Every claim (a fresh begin or a takeover) draws a fence at
-- random from [2^32, 2^63), so two claims of one key, in this database or
-- in any copy of it, have the same fence with negligible probability.
CREATE OR REPLACE FUNCTION idem_begin(namespace text, key text, request jsonb, replay_window interval DEFAULT NULL,
                           in_flight_wait interval DEFAULT NULL)
RETURNS @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin_1_0'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_begin(text, text, jsonb, interval, interval) IS
'Starts an idempotent operation: fresh (go ahead), in_flight, prior_result, prior_error or mismatch';

-- Many keys of one namespace in one call (a queue consumer's batch): each
-- key begun as idem_begin begins it, with the request at the same place in
-- requests, one outcome per key in the keys' order (use WITH ORDINALITY). A
-- key given twice is begun twice, the second time after the first. The keys
-- are begun in the order of their bytes, so two batches with keys in common
-- cannot deadlock; in_flight_wait bounds the whole call. At most 10000 keys.
CREATE OR REPLACE FUNCTION idem_begin_batch(namespace text, keys text[], requests jsonb[], replay_window interval DEFAULT NULL,
                                 in_flight_wait interval DEFAULT NULL)
RETURNS SETOF @extschema@.idem_outcome
AS 'MODULE_PATHNAME', 'idem_begin_batch_1_0'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 100;

COMMENT ON FUNCTION idem_begin_batch(text, text[], jsonb[], interval, interval) IS
'idem_begin for many keys of one namespace: one outcome per key, in the keys'' order';

-- The transitions may take the fence that idem_begin answered with fresh:
-- when given, they act only while the record is still that claim's, so a
-- caller whose lease ran out cannot finish or forget a record another has
-- taken over, or one begun again since, or one claimed in another copy of
-- the database. Fences are compared for equality only.
CREATE OR REPLACE FUNCTION idem_commit(namespace text, key text, result jsonb, fence bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_commit_1_0'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_commit(text, text, jsonb, bigint) IS
'Records the result of an in-progress operation for replay (only while it is still the claim that drew fence, when given)';

CREATE OR REPLACE FUNCTION idem_fail_permanent(namespace text, key text, error jsonb, fence bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_permanent_1_0'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_fail_permanent(text, text, jsonb, bigint) IS
'Records a permanent error ({"class_tag", "message", "cause"?}) of an in-progress operation for replay';

CREATE OR REPLACE FUNCTION idem_fail_transient(namespace text, key text, fence bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_fail_transient_1_0'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_fail_transient(text, text, bigint) IS
'Forgets an in-progress operation so that the next idem_begin is fresh';


-- What an operator sees of one key: its record, or a claim a transaction
-- holds by the key's lock alone (a namespace without a lease), which no
-- row shows. state: absent, held (by the lock, no row), in_flight (a
-- transaction is writing its row), in_progress (a row: a claim under a
-- lease, or abandoned), committed or failed; holder_pid: the backend of a
-- held or in_flight key (NULL for a prepared transaction). Reads the
-- server's lock table: for an operator, not for every request. It names
-- the backends working on a key, so only the extension's owner may run it
-- (and grant it).
CREATE OR REPLACE FUNCTION idem_key_state(namespace text, key text,
    OUT state text, OUT holder_pid integer, OUT attempt integer, OUT claimed_at timestamptz,
    OUT expires_at timestamptz, OUT request_hash bytea)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_key_state_1_0'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_key_state(text, text) IS
'One key''s state (absent, held, in_flight, in_progress, committed, failed) and the backend holding it';

-- An operator's release of one key: its record is deleted, so that the next
-- begin of the key answers fresh (a result a bug recorded), without waiting
-- for purge or writing to the table. Returns the status the record had
-- (NULL: the key had none). Refused (55006) while a transaction holds the
-- key (a claim held by its lock, a row being written, this transaction's
-- own claim) or while an in_progress record's lease runs; counted in
-- idem_stats.released_keys and logged with the roles that did it. Only the
-- extension's owner may run it (and grant it); the caller must also be
-- granted the namespace.
CREATE OR REPLACE FUNCTION idem_release_key(namespace text, key text)
RETURNS text
AS 'MODULE_PATHNAME', 'idem_release_key_1_0'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_release_key(text, text) IS
'Deletes one key''s record (refused while a transaction or a lease holds it); returns the status it had';

-- A holder's heartbeat: the lease of its claim (a namespace with an
-- in_progress_lease) runs again from now, so that a long operation is not
-- taken over while it still works. Fenced as the transitions are; returns
-- the new end of the lease.
CREATE OR REPLACE FUNCTION idem_extend_lease(namespace text, key text, fence bigint)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_extend_lease_1_0'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_extend_lease(text, text, bigint) IS
'A heartbeat of a claim under a lease: its lease runs again from now (fenced); returns the new end';

-- A holder's recovery point: the phase its work has completed (point) and
-- what a later attempt needs to resume after it (state, say the payment
-- provider's charge id), recorded with the claim in the caller's
-- transaction. A begin that takes the claim over answers them, so the new
-- attempt resumes after the point instead of doing the phase again. A
-- heartbeat too: the lease runs again from now. Fenced as the transitions
-- are, the fence last; returns the new end of the lease.
CREATE OR REPLACE FUNCTION idem_save_point(namespace text, key text, point text, state jsonb, fence bigint)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_save_point'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_save_point(text, text, text, jsonb, bigint) IS
'Records how far a claim''s work got (a phase and its state), answered to a begin that takes it over; a heartbeat too';

-- 0.9's name, the fence third: deprecated, removed in 2.0.
CREATE OR REPLACE FUNCTION idem_record_point(namespace text, key text, fence bigint, point text, state jsonb DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'idem_record_point_1_0'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idem_record_point(text, text, bigint, text, jsonb) IS
'Deprecated: use idem_save_point(namespace, key, point, state, fence), the fence last as everywhere; removed in 2.0';
