# 005_dump_restore_and_upgrade.pl: the records outlive the two things an
# operator does to a database besides running it. ALTER EXTENSION UPDATE
# from every released version keeps every row, column for column, and the
# current API replays them; pg_dump and pg_restore (custom and plain format)
# keep every record, namespace setting, grant and fence byte for byte, and
# the restored store answers and enforces its grants as the original did.
# An update under open sessions: statements they prepared with explicit
# columns keep working, SELECT * fails once (docs/operations.md says so).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('durability');
$node->init(extra => ['--encoding=UTF8', '--locale=C']);
$node->start;

# The release this build installs.
my $current = $node->safe_psql('postgres',
	q{SELECT default_version FROM pg_available_extensions WHERE name = 'idempotency'});

# The columns every release since 0.2.0 has, in the order of the table.
my $v2_columns = 'namespace, key_value, status, request_hash, request_payload, result_payload, '
  . 'error_payload, created_at, updated_at, expires_at';

# Every row of a query in COPY's text format (NULL as \N, bytea as hex,
# every character escaped unambiguously), so two results are equal exactly
# when their rows are equal value for value.
sub rows
{
	my ($db, $query) = @_;
	return $node->safe_psql($db, "COPY ($query) TO STDOUT");
}

# The records as every release wrote them, in key order.
sub record_rows
{
	my ($db, $columns) = @_;
	return rows($db, "SELECT $columns FROM idempotency.idempotency_record ORDER BY namespace, key_value");
}

# Keys that need care: non-ASCII characters in three UTF-8 lengths, and the
# longest key there may be (255 characters, 382 bytes).
my $multibyte_key = q{U&'Gr\00FC\00DFe-\65E5\672C\8A9E-\+01F600'};
my $longest_key   = q{repeat(U&'\00E9', 127) || repeat('k', 128)};

# A store filled through the API (the same store functions since 0.2.0:
# idem_commit, idem_fail_permanent, idem_fail_transient without a fence,
# the typed wrappers): committed records with results, one of them stored
# out of line (TOAST), permanently failed ones with error payloads, an
# in_progress record whose transaction committed, a forgotten (transiently
# failed) attempt, five namespaces and 300 generated records. Releases
# before 0.9 let an autocommit caller commit a claim; this library refuses
# to, so the in_progress records are written as they left them. This
# library serves 0.9.0's schema and later (docs/compatibility.md): an older
# release's database gets the same rows, their columns of 0.2.0, copied in
# as that release wrote them (older_store).
sub abandoned
{
	my ($ns, $key, $request) = @_;
	return qq{INSERT INTO idempotency.idempotency_record
		(namespace, key_value, status, request_hash, request_payload, created_at, updated_at, expires_at)
		VALUES ($ns, $key, 'in_progress', idempotency.idem_request_hash($request), $request,
		        now(), now(), now() + interval '1 day')};
}
my $populate_v2 = qq{
	SET search_path = idempotency, public;
	BEGIN;
	SELECT idem_begin('orders', 'o-1', '{"sku": "A", "qty": 1}');
	SELECT idem_commit('orders', 'o-1', '{"order_id": 1, "total": 9.90}');
	COMMIT;
	BEGIN;
	SELECT idem_begin('orders', 'o-2', '{"sku": "B", "qty": 5}', '30 days');
	SELECT idem_fail_permanent('orders', 'o-2', '{"class_tag": "OutOfStock", "message": "no stock", "cause": "sku B sold out"}');
	COMMIT;
	BEGIN;
	SELECT idem_begin('payments', $multibyte_key, '{"amount": 12.50, "currency": "EUR"}');
	SELECT idem_commit('payments', $multibyte_key, '{"status": 201, "headers": {"Location": "/p/1"}, "body": {"id": 1}}');
	COMMIT;
	BEGIN;
	SELECT idem_begin('payments', $longest_key, '{"amount": 1}');
	SELECT idem_commit('payments', $longest_key,
		jsonb_build_object('blob', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 3000) i)));
	COMMIT;
	BEGIN;
	SELECT idem_begin('refunds-v2', 'r-1', '{"refund": 1}');
	SELECT idem_fail_permanent('refunds-v2', 'r-1', '{"class_tag": "Declined", "message": "card declined"}');
	COMMIT;
	@{[ abandoned(q{'refunds-v2'}, q{'r-2'}, q{'{"refund": 2}'}) ]};
	BEGIN;
	SELECT idem_begin('refunds-v2', 'r-3', '{"refund": 3}');
	SELECT idem_fail_transient('refunds-v2', 'r-3');
	COMMIT;
	BEGIN;
	SELECT idem_begin_typed('typed', 't-1', 42);
	SELECT idem_commit_typed('typed', 't-1', 'done'::text);
	COMMIT;
	DO \$\$
	BEGIN
		FOR i IN 1..300 LOOP
			IF i % 3 = 2 THEN
				@{[ abandoned(q{'bulk'}, q{'b-' || i}, q{jsonb_build_object('i', i)}) ]};
				CONTINUE;
			END IF;
			PERFORM idempotency.idem_begin('bulk', 'b-' || i, jsonb_build_object('i', i));
			IF i % 3 = 0 THEN
				PERFORM idempotency.idem_fail_permanent('bulk', 'b-' || i,
					jsonb_build_object('class_tag', 'E' || i, 'message', 'failed ' || i));
			ELSE
				PERFORM idempotency.idem_commit('bulk', 'b-' || i, jsonb_build_object('n', i, 'pad', repeat('x', i)));
			END IF;
		END LOOP;
	END
	\$\$;
};

# The current API over every record that where selects (after an update or a
# restore): a committed one replays its stored result, a failed one its
# stored error, an in_progress one is in flight (its lease, if any, has not
# run out), and a different request on any of them is a mismatch that
# shows the stored request. Returns how many records answered wrongly and
# how many there were.
sub replay_all
{
	my ($db, $where) = @_;
	return $node->safe_psql($db, qq{
		SELECT count(*) FILTER (WHERE NOT (CASE r.status
		           WHEN 'committed' THEN o.kind = 'prior_result' AND o.result = r.result_payload
		           WHEN 'failed' THEN o.kind = 'prior_error' AND o.error = r.error_payload
		           ELSE o.kind = 'in_flight' END))
		       + count(*) FILTER (WHERE m.kind IS DISTINCT FROM 'mismatch'
		                          OR m.recorded_request IS DISTINCT FROM r.request_payload)
		       || ' wrong of ' || count(*)
		FROM idempotency.idempotency_record r
		CROSS JOIN LATERAL idempotency.idem_begin(r.namespace, r.key_value, r.request_payload) o
		CROSS JOIN LATERAL idempotency.idem_begin(r.namespace, r.key_value, '{"another": "request"}') m
		WHERE $where});
}

# The rows of $populate_v2, as a 0.9.0 store holds them, in 0.2.0's
# columns: made once, in a database of their own.
my $v2_rows;

# Fills the store of db (a release older than 0.9.0) with those rows.
sub older_store
{
	my ($db) = @_;
	if (!defined $v2_rows)
	{
		$node->safe_psql('postgres', 'CREATE DATABASE v2source');
		$node->safe_psql('v2source', "CREATE EXTENSION idempotency VERSION '0.9.0'");
		$node->safe_psql('v2source', $populate_v2);
		$v2_rows = record_rows('v2source', $v2_columns);
	}
	$node->safe_psql($db, "COPY idempotency.idempotency_record ($v2_columns) FROM STDIN;\n$v2_rows\n\\.\n");
}

# ---------------------------------------------------------------------------
# 1. ALTER EXTENSION idempotency UPDATE from every release

# 0.1.0 had no store: nothing to keep but its functions' answers, and the
# store the update creates must work from its first call.
$node->safe_psql('postgres', 'CREATE DATABASE v010');
$node->safe_psql('v010', q{CREATE EXTENSION idempotency VERSION '0.1.0'});
my $pure = q{SELECT idempotency.idem_mint('n', ARRAY['a', U&'\00E9']) || ' '
	|| encode(idempotency.idem_request_hash('{"b": [1.50, null], "a": "x"}'), 'hex') || ' '
	|| idempotency.idem_parse('n', '  k  ') || ' ' || idempotency.idem_canonical('{"b": 1, "a": 2}')};
my $pure_010 = $node->safe_psql('v010', $pure);
like($pure_010, qr/^[0-9a-f]{64} [0-9a-f]{64} k \{"a":2,"b":1\}$/, '0.1.0 mints, fingerprints, parses and canonicalizes');
is($node->safe_psql('v010', q{SELECT to_regclass('idempotency.idempotency_record') IS NULL}), 't',
	'0.1.0 has no store to populate');
$node->safe_psql('v010', 'ALTER EXTENSION idempotency UPDATE');
is($node->safe_psql('v010', q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}), $current,
	"0.1.0 updates to $current");
is($node->safe_psql('v010', $pure), $pure_010, '0.1.0 keys, fingerprints and canonical text are unchanged by the update');
is($node->safe_psql('v010', q{
	BEGIN;
	SELECT (idempotency.idem_begin('n', 'k', '{"a": 1}')).kind;
	SELECT idempotency.idem_commit('n', 'k', '{"ok": true}');
	COMMIT;
	SELECT o.kind || ' ' || o.result FROM idempotency.idem_begin('n', 'k', '{"a": 1}') o;}),
	"fresh\n\nprior_result {\"ok\": true}", 'the store the update created records and replays');

# Every release with a store (0.2.0 to 0.9.0): the same population, the
# update, then every row checked.
for my $version ('0.2.0', '0.3.0', '0.4.0', '0.4.1', '0.5.0', '0.6.0', '0.7.0', '0.8.0', '0.9.0')
{
	(my $db = "v$version") =~ s/\.//g;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION idempotency VERSION '$version'");
	if ($version lt '0.9.0') { older_store($db) } else { $node->safe_psql($db, $populate_v2) }

	if ($version eq '0.3.0')
	{
		# A 0.3.0 deployment as its docs said: the application role has the
		# table's privileges and writes its own records through the functions.
		$node->safe_psql($db, q{
			CREATE ROLE app03 LOGIN;
			GRANT USAGE ON SCHEMA idempotency TO app03;
			GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.idempotency_record TO app03;
			SET ROLE app03;
			INSERT INTO idempotency.idempotency_record
				(namespace, key_value, status, request_hash, request_payload, result_payload, error_payload,
				 created_at, updated_at, expires_at)
			VALUES ('legacy', 'l-1', 'committed', idempotency.idem_request_hash('{"n": 1}'), '{"n": 1}',
			        '{"legacy": true}', NULL, now(), now(), now() + interval '1 day'),
			       ('legacy', 'l-2', 'failed', idempotency.idem_request_hash('{"n": 2}'), '{"n": 2}',
			        NULL, '{"class_tag": "Old", "message": "old failure"}', now(), now(), now() + interval '1 day');
			} . abandoned(q{'legacy'}, q{'l-3'}, q{'{"n": 3}'}));
	}
	my $legacy = $version eq '0.3.0' ? 3 : 0;
	# 0.7.0 makes idem_namespace_stats again: a role granted SELECT on it
	# keeps it, and not as one of the extension's initial privileges.
	$node->safe_psql($db, q{
		CREATE ROLE stats_reader;
		GRANT USAGE ON SCHEMA idempotency TO stats_reader;
		GRANT SELECT ON idempotency.idem_namespace_stats TO stats_reader;}) if $version eq '0.6.0';
	# 0.8.0's idem_stats calls a new function: a role granted the view and
	# the functions behind it (not through pg_monitor) still reads it.
	$node->safe_psql($db, q{
		CREATE ROLE stats_exec;
		GRANT USAGE ON SCHEMA idempotency TO stats_exec;
		GRANT SELECT ON idempotency.idem_stats TO stats_exec;
		GRANT EXECUTE ON FUNCTION idempotency.idem_stats_counters(), idempotency.idem_stats_released_keys()
		TO stats_exec;}) if $version eq '0.7.0';
	# 0.9.0's idem_namespace_fingerprint: a role the owner let configure
	# namespaces may set pointers too.
	$node->safe_psql($db, q{
		CREATE ROLE configurer;
		GRANT EXECUTE ON FUNCTION idempotency.idem_namespace_configure(text, interval, interval, boolean, boolean, integer)
		TO configurer;}) if $version eq '0.8.0';

	my $before = record_rows($db, $v2_columns);
	is($node->safe_psql($db, q{
		SELECT string_agg(status || '=' || n, ' ' ORDER BY status)
		FROM (SELECT status, count(*) n FROM idempotency.idempotency_record GROUP BY status) s}),
		'committed=' . (104 + $legacy / 3) . ' failed=' . (102 + $legacy / 3) . ' in_progress=' . (101 + $legacy / 3),
		"$version: the population is there, every status (the forgotten attempt is not)");
	is($node->safe_psql($db, q{
		SELECT count(DISTINCT namespace) || ' ' || max(char_length(key_value)) || ' '
		       || max(octet_length(key_value)) || ' ' || bool_or(pg_column_size(result_payload) > 8000)
		FROM idempotency.idempotency_record}),
		($version eq '0.3.0' ? '6' : '5') . ' 255 382 true',
		"$version: several namespaces, a 255-character multibyte key, a large result");

	my ($ret, $out, $err) = $node->psql($db, 'ALTER EXTENSION idempotency UPDATE', on_error_stop => 1);
	is($ret, 0, "$version: ALTER EXTENSION idempotency UPDATE succeeds");
	is($node->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}), $current,
		"$version: extversion is $current");

	is(record_rows($db, $v2_columns), $before, "$version: every column of every record is unchanged by the update");
	if ($version eq '0.6.0')
	{
		is($node->safe_psql($db, q{
			SELECT has_table_privilege('stats_reader', 'idempotency.idem_namespace_stats', 'SELECT')
			       || ' ' || (SELECT i.initprivs::text LIKE '%stats_reader%' FROM pg_init_privs i
			                  WHERE i.objoid = 'idempotency.idem_namespace_stats'::regclass)
			       || ' ' || (SELECT count(*) FROM idempotency.idem_namespace_stats)}),
			'true false 5', "$version: a grant on idem_namespace_stats outlives its remaking, not as an initial privilege");
	}
	if ($version eq '0.7.0')
	{
		is($node->safe_psql($db, q{SET ROLE stats_exec; SELECT count(*) FROM idempotency.idem_stats}), '1',
			"$version: a role granted idem_stats and its functions still reads it");
	}
	if ($version eq '0.8.0')
	{
		is($node->safe_psql($db, q{
			SELECT has_function_privilege('configurer', 'idempotency.idem_namespace_fingerprint(text, text[])', 'EXECUTE')
			       || ' ' || (SELECT count(*) FROM pg_init_privs i, aclexplode(i.initprivs) x
			                  WHERE i.objoid = 'idempotency.idem_namespace_fingerprint(text, text[])'::regprocedure
			                    AND x.grantee = 'configurer'::regrole)}),
			'true 0', "$version: a role granted idem_namespace_configure may call idem_namespace_fingerprint, not as an initial privilege");
	}
	# 0.9.0's pointers: every namespace the update carried fingerprints whole
	# requests; one with records refuses pointers; a new one takes them.
	is($node->safe_psql($db, q{
		SELECT count(*) FILTER (WHERE fingerprint_ignore IS NULL) || ' of ' || count(*) FROM idempotency.idem_namespaces}),
		$node->safe_psql($db, q{SELECT count(*) || ' of ' || count(*) FROM idempotency.idem_namespace_config}),
		"$version: no namespace ignores anything after the update");
	($ret, $out, $err) = $node->psql($db, q{SELECT idempotency.idem_namespace_fingerprint('orders', ARRAY['/sku'])});
	like($err, qr/cannot change what the fingerprint of idempotency namespace "orders" ignores/,
		"$version: pointers for a namespace with records are refused");
	is($node->safe_psql($db, q{
		SELECT fingerprint_ignore FROM idempotency.idem_namespace_fingerprint('fp-new', ARRAY['/trace']);
		BEGIN;
		SELECT kind FROM idempotency.idem_begin('fp-new', 'k', '{"a": 1, "trace": 1}');
		SELECT idempotency.idem_commit('fp-new', 'k', '{"ok": true}');
		COMMIT;
		SELECT kind FROM idempotency.idem_begin('fp-new', 'k', '{"a": 1, "trace": 2}');
		DELETE FROM idempotency.idempotency_record WHERE namespace = 'fp-new';
		SELECT idempotency.idem_namespace_drop('fp-new');}),
		"{/trace}\nfresh\n\nprior_result\nt", "$version: a new namespace's pointers work after the update");
	is($node->safe_psql($db, q{
		SELECT count(*) FILTER (WHERE attempt = 1) || ' of ' || count(*) FROM idempotency.idempotency_record}),
		(307 + $legacy) . ' of ' . (307 + $legacy), "$version: every record is the first attempt");

	# The current API, one record of each kind, then all of them.
	is($node->safe_psql($db, q{
		SELECT o.kind || ' ' || o.result || ' ' || (o.attempt IS NULL)
		FROM idempotency.idem_begin('orders', 'o-1', '{"qty": 1, "sku": "A"}') o}),
		'prior_result {"total": 9.90, "order_id": 1} true', "$version: a committed key replays its result");
	is($node->safe_psql($db, qq{
		SELECT o.kind || ' ' || o.result
		FROM idempotency.idem_begin('payments', $multibyte_key, '{"currency": "EUR", "amount": 12.50}') o}),
		'prior_result {"body": {"id": 1}, "status": 201, "headers": {"Location": "/p/1"}}',
		"$version: the multibyte key replays its result");
	is($node->safe_psql($db, qq{
		SELECT o.kind || ' ' || md5(o.result ->> 'blob')
		FROM idempotency.idem_begin('payments', $longest_key, '{"amount": 1}') o}),
		'prior_result ' . $node->safe_psql($db,
			q{SELECT md5(string_agg(md5(i::text), '')) FROM generate_series(1, 3000) i}),
		"$version: the 255-character key replays its large result");
	is($node->safe_psql($db, q{
		SELECT o.kind || ' ' || o.error FROM idempotency.idem_begin('orders', 'o-2', '{"sku": "B", "qty": 5}') o}),
		'prior_error {"cause": "sku B sold out", "message": "no stock", "class_tag": "OutOfStock"}',
		"$version: a failed key replays its error");
	is($node->safe_psql($db, q{
		SELECT o.kind || ' ' || o.recorded_request
		FROM idempotency.idem_begin('orders', 'o-1', '{"sku": "A", "qty": 2}') o}),
		'mismatch {"qty": 1, "sku": "A"}', "$version: a different request is a mismatch");
	is($node->safe_psql($db, q{
		SELECT o.kind || ' ' || (o.age IS NOT NULL) FROM idempotency.idem_begin('refunds-v2', 'r-2', '{"refund": 2}') o}),
		'in_flight true', "$version: the in_progress record is in flight");
	is($node->safe_psql($db, q{
		SELECT idempotency.idem_result(idempotency.idem_begin_typed('typed', 't-1', 42), NULL::text)}),
		'done', "$version: a typed result decodes");
	is(replay_all($db, "r.namespace <> 'legacy'"), '0 wrong of 307',
		"$version: every record replays its result or error, or is in flight, and is a mismatch for another request");
	is($node->safe_psql($db, q{
		BEGIN;
		SELECT o.kind || ' ' || o.attempt || ' ' || (o.fence > 4294967295) FROM idempotency.idem_begin('refunds-v2', 'r-3', '{"refund": 3}') o;
		SELECT o.kind || ' ' || o.attempt || ' ' || (o.fence > 4294967295) FROM idempotency.idem_begin('orders', 'o-new', '{}') o;
		ROLLBACK;}),
		"fresh 1 true\nfresh 1 true", "$version: the forgotten key and a new key are fresh, with fences");
	# 0.8.0's recovery columns: NULL on every record the update carried; an
	# abandoned record is taken over as a takeover, and its new holder records
	# a recovery point.
	is($node->safe_psql($db, q{
		SELECT count(*) FILTER (WHERE recovery_point IS NULL AND recovery_state IS NULL) || ' of ' || count(*)
		FROM idempotency.idempotency_record}),
		(307 + $legacy) . ' of ' . (307 + $legacy), "$version: no record has a recovery point after the update");
	is($node->safe_psql($db, q{
		SELECT namespace FROM idempotency.idem_namespace_configure('refunds-v2', in_progress_lease => '1 hour');
		UPDATE idempotency.idempotency_record SET updated_at = now() - interval '2 hours'
		WHERE namespace = 'refunds-v2' AND key_value = 'r-2';
		BEGIN;
		SELECT o.kind || ' ' || o.attempt || ' ' || o.takeover || ' ' || (o.recovery_point IS NULL) || ' '
		       || (idempotency.idem_record_point('refunds-v2', 'r-2', o.fence, 'refunded', '{"id": 1}') > now())
		FROM idempotency.idem_begin('refunds-v2', 'r-2', '{"refund": 2}') o;
		ROLLBACK;}),
		"refunds-v2\nfresh 2 true true true", "$version: an abandoned record is taken over as one, and takes a point");

	if ($version eq '0.3.0')
	{
		# The update moved app03 from the table's privileges to namespace
		# grants (sql/update.sql checks how); its records must still be its own.
		is($node->safe_psql($db, q{
			SET ROLE app03;
			SELECT o.kind || ' ' || coalesce(o.result, o.error)::text
			FROM unnest(ARRAY['l-1', 'l-2'], ARRAY['{"n": 1}', '{"n": 2}']::jsonb[]) AS k(key, request),
			     idempotency.idem_begin('legacy', k.key, k.request) o ORDER BY k.key;}),
			"prior_result {\"legacy\": true}\nprior_error {\"message\": \"old failure\", \"class_tag\": \"Old\"}",
			'0.3.0: the role that wrote records through its table grants replays them after the update');
		is(replay_all($db, "r.namespace = 'legacy'"), '0 wrong of 3', '0.3.0: every record the role wrote replays');
	}
}

# ---------------------------------------------------------------------------
# 2. pg_dump and pg_restore

# Roles live in the cluster, outside any dump; one of them needs quoting.
$node->safe_psql('postgres', q{
	CREATE ROLE svc_orders LOGIN;
	CREATE ROLE "Svc Refunds" LOGIN;
	CREATE ROLE outsider LOGIN;
	CREATE DATABASE src;});
# The registry: three namespaces with settings other than the defaults
# (one with hashed keys), a fourth registered by its grant, grants to two
# roles, a purge grant, and outsider, who may call the functions (USAGE on
# the schema) but holds no namespace.
$node->safe_psql('src', q{
	CREATE EXTENSION idempotency;
	SET search_path = idempotency, public;
	SELECT idem_namespace_configure('orders', replay_window => '7 days', in_progress_lease => '5 minutes',
	                                store_request => true, max_payload_bytes => 65536);
	SELECT idem_namespace_configure('secrets', replay_window => '2 days 3 hours', store_request => false,
	                                hash_keys => true, max_payload_bytes => 4096);
	SELECT idem_namespace_configure('jobs', in_progress_lease => '1 millisecond');
	SELECT idem_grant('orders', 'svc_orders');
	SELECT idem_grant('secrets', 'svc_orders');
	SELECT idem_grant('refunds', '"Svc Refunds"');
	SELECT idem_namespace_configure('bulk', in_progress_lease => '1 day');
	GRANT USAGE ON SCHEMA idempotency TO outsider;
	GRANT EXECUTE ON FUNCTION idem_purge(integer, integer) TO svc_orders;});

# Records of every status, written by the roles that hold the namespaces.
$node->safe_psql('src', q{
	SET search_path = idempotency, public;
	BEGIN;
	SELECT idem_begin('orders', 'o-1', '{"sku": "A"}');
	SELECT idem_commit('orders', 'o-1', '{"order_id": 1}');
	COMMIT;
	BEGIN;
	SELECT idem_begin('orders', 'o-2', '{"sku": "B"}');
	SELECT idem_fail_permanent('orders', 'o-2', '{"class_tag": "OutOfStock", "message": "no stock"}');
	COMMIT;
	SELECT idem_begin('orders', 'o-3', '{"sku": "C"}');
	BEGIN;
	SELECT idem_begin('secrets', 'card-4242', '{"pan": "4242"}');
	SELECT idem_commit('secrets', 'card-4242', '{"token": "tok_1"}');
	COMMIT;
	BEGIN;
	SELECT idem_begin('secrets', 'card-0000', '{"pan": "0000"}');
	SELECT idem_fail_permanent('secrets', 'card-0000', '{"class_tag": "Declined", "message": "declined"}');
	COMMIT;}, extra_params => ['-U', 'svc_orders']);
$node->safe_psql('src', q{
	BEGIN;
	SELECT idempotency.idem_begin('refunds', 'r-1', '{"refund": 1}');
	SELECT idempotency.idem_commit('refunds', 'r-1', '{"refunded": true}');
	COMMIT;}, extra_params => ['-U', 'Svc Refunds']);
# As the owner: a record taken over after its lease ran out (attempt 2),
# an unregistered namespace, and 300 generated records with a large one.
$node->safe_psql('src', q{
	SET search_path = idempotency, public;
	SELECT idem_begin('jobs', 'j-1', '{"job": 1}');
	SELECT pg_sleep(0.01);
	DO $$
	DECLARE
		o idempotency.idem_outcome := idempotency.idem_begin('jobs', 'j-1', '{"job": 1}');
	BEGIN
		PERFORM idempotency.idem_commit('jobs', 'j-1', jsonb_build_object('ran', o.attempt), o.fence);
	END
	$$;
	BEGIN;
	SELECT idem_begin('misc', U&'\65E5\672C-\+01F600', '{}');
	SELECT idem_commit('misc', U&'\65E5\672C-\+01F600',
		jsonb_build_object('blob', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 3000) i)));
	COMMIT;
	DO $$
	BEGIN
		FOR i IN 1..300 LOOP
			PERFORM idempotency.idem_begin('bulk', 'b-' || i, jsonb_build_object('i', i));
			IF i % 3 = 0 THEN
				PERFORM idempotency.idem_fail_permanent('bulk', 'b-' || i,
					jsonb_build_object('class_tag', 'E' || i, 'message', 'failed ' || i));
			ELSIF i % 3 = 1 THEN
				PERFORM idempotency.idem_commit('bulk', 'b-' || i, jsonb_build_object('n', i));
			END IF;
		END LOOP;
	END
	$$;});

# A namespace bound to a table the service owns (0.6.0), with a record;
# and a grant to a role that was dropped since, which names an OID no role
# has: a dump must leave it out, so that a restore cannot give it to
# whichever role takes that OID.
$node->safe_psql('src', q{
	SET search_path = idempotency, public;
	CREATE SCHEMA app AUTHORIZATION svc_orders;
	SELECT idem_create_store('app.order_store');
	ALTER TABLE app.order_store OWNER TO svc_orders;
	SELECT idem_bind_store('bound', 'app.order_store');
	SELECT idem_grant('bound', 'svc_orders');
	CREATE ROLE gone;
	SELECT idem_grant('orders', 'gone');
	REVOKE USAGE ON SCHEMA idempotency FROM gone;
	DROP ROLE gone;});
$node->safe_psql('src', q{
	BEGIN;
	SELECT idempotency.idem_begin('bound', 'b-1', '{"sku": "D"}');
	SELECT idempotency.idem_commit('bound', 'b-1', '{"order_id": 4}');
	COMMIT;}, extra_params => ['-U', 'svc_orders']);
is($node->safe_psql('src', q{SELECT count(*) FROM idempotency.idem_namespace_grant WHERE grantee::text ~ '^[0-9]+$'}),
	'1', 'the source has a grant to a dropped role');

# What must survive: every column of the tables pg_dump is told to keep
# (and of the bound store), each grantee also as its OID (the same role in
# the same cluster), but the grant to the dropped role.
my %tables = (
	idempotency_record    => 'SELECT * FROM idempotency.idempotency_record ORDER BY namespace, key_value',
	idem_namespace_config => 'SELECT * FROM idempotency.idem_namespace_config ORDER BY namespace',
	idem_namespace_grant  => q{SELECT g.*, g.grantee::oid FROM idempotency.idem_namespace_grant g
	                           WHERE g.grantee::text !~ '^[0-9]+$' ORDER BY namespace, grantee::text},
);
my %original = map { $_ => rows('src', $tables{$_}) } keys %tables;
my $bound_store = 'SELECT * FROM app.order_store ORDER BY namespace, key_value';
my $bound_rows = rows('src', $bound_store);

# Every privilege on the extension's schema, tables, views, functions and
# procedures, one entry per object, its ACL items sorted ("default" when it
# has none): what the roles may do must come back with the rows. A list, so
# that a failing is_deeply names the first object that differs.
sub privileges
{
	my ($db) = @_;
	return split /\n/, $node->safe_psql($db, q{
		SELECT kind || ' ' || name || ' '
		       || coalesce((SELECT string_agg(a::text, ',' ORDER BY a::text) FROM unnest(acl) a), 'default')
		FROM (SELECT 'schema' AS kind, nspname::text AS name, nspacl AS acl
		      FROM pg_namespace WHERE nspname = 'idempotency'
		      UNION ALL
		      SELECT 'relation', c.oid::regclass::text, c.relacl
		      FROM pg_class c WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind IN ('r', 'v')
		      UNION ALL
		      SELECT 'routine', p.oid::regprocedure::text, p.proacl
		      FROM pg_proc p WHERE p.pronamespace = 'idempotency'::regnamespace) o
		ORDER BY 1});
}

is($node->safe_psql('src', q{
	SELECT string_agg(namespace || ':' || status || '=' || n, ' ' ORDER BY namespace, status)
	FROM (SELECT namespace, status, count(*) n FROM idempotency.idempotency_record GROUP BY 1, 2) s}),
	'bulk:committed=100 bulk:failed=100 bulk:in_progress=100 jobs:committed=1 misc:committed=1 '
	  . 'orders:committed=1 orders:failed=1 orders:in_progress=1 refunds:committed=1 secrets:committed=1 secrets:failed=1',
	'the source holds records of every status in six namespaces');
is($node->safe_psql('src', q{
	SELECT string_agg(namespace || ' ' || (key_value ~ '^[0-9a-f]{64}$') || ' ' || (request_payload IS NULL)
	                  || ' ' || attempt, ', ' ORDER BY namespace, key_value)
	FROM idempotency.idempotency_record WHERE namespace IN ('secrets', 'jobs')}),
	'jobs false false 2, secrets true true 1, secrets true true 1',
	'the source has a taken-over record and hashed keys without requests');
is($node->safe_psql('src', q{
	SELECT string_agg(namespace || ' ' || coalesce(replay_window::text, '-') || ' ' || coalesce(in_progress_lease::text, '-')
	                  || ' ' || coalesce(store_request::text, '-') || ' ' || hash_keys || ' '
	                  || coalesce(max_payload_bytes::text, '-') || ' ' || grantees::text, '; ' ORDER BY namespace)
	FROM idempotency.idem_namespaces}) =~ s/\{([0-9]+),/{NNN,/r,
	'bound - - - false - {svc_orders}; bulk - 1 day - false - {}; jobs - 00:00:00.001 - false - {}; '
	  . 'orders 7 days 00:05:00 true false 65536 {NNN,svc_orders}; '
	  . 'refunds - - - false - {"\"Svc Refunds\""}; secrets 2 days 03:00:00 - false true 4096 {svc_orders}',
	'the source registry has five namespaces with their settings and grants (one to a dropped role)');

# What psql prints for sql run as role in db: its output, then any error
# with its SQLSTATE. Never dies, so a refused call is reported as what the
# test got and the checks after it still run.
sub as_role
{
	my ($db, $role, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, $sql, extra_params => ['-U', $role, '-v', 'VERBOSITY=verbose']);
	return join("\n", grep { $_ ne '' } $out, $err);
}

# Whether the restored database db holds what the source held, table by
# table, and whether its store answers and enforces grants as before.
sub check_restored
{
	my ($db, $how) = @_;
	for my $table (sort keys %tables)
	{
		is(rows($db, $tables{$table}), $original{$table}, "$how: every row of $table is restored byte for byte");
	}
	is($node->safe_psql($db, q{SELECT extversion FROM pg_extension WHERE extname = 'idempotency'}), $current,
		"$how: the extension is $current");
	# (Restored by another superuser, that role installed the extension:
	# the installer's own privileges are in its name, and come first.)
	my $same = sub {
		map { my ($object, $acl) = (s/\bother_admin\b/postgres/gr) =~ /^(.*) (\S+)$/; "$object " . join(',', sort split /,/, $acl) } @_;
	};
	is_deeply([ $same->(privileges($db)) ], [ $same->(privileges('src')) ],
		"$how: every privilege on the extension's objects is restored");
	isnt($node->safe_psql($db, 'SELECT secret FROM idempotency_internal.idem_lock_secret'),
		$node->safe_psql('src', 'SELECT secret FROM idempotency_internal.idem_lock_secret'),
		"$how: the lock secret is not copied: the restored database drew its own");
	is(replay_all($db, "r.namespace <> 'secrets'"), '0 wrong of 306',
		"$how: every record outside the hashed-key namespace replays, is in flight or is a mismatch as before");

	is(as_role($db, 'svc_orders', q{
		SET search_path = idempotency, public;
		SELECT o.kind || ' ' || o.result FROM idem_begin('orders', 'o-1', '{"sku": "A"}') o;
		SELECT o.kind || ' ' || o.error FROM idem_begin('orders', 'o-2', '{"sku": "B"}') o;
		SELECT o.kind::text FROM idem_begin('orders', 'o-3', '{"sku": "C"}') o;
		SELECT o.kind || ' ' || o.result FROM idem_begin('secrets', 'card-4242', '{"pan": "4242"}') o;
		SELECT o.kind || ' ' || o.error FROM idem_begin('secrets', 'card-0000', '{"pan": "0000"}') o;
		SELECT o.kind || ' ' || (o.recorded_request IS NULL) FROM idem_begin('secrets', 'card-4242', '{"pan": "1"}') o;
		SELECT o.kind::text FROM idem_begin('orders', 'o-new', '{}') o;}),
		join("\n",
			'prior_result {"order_id": 1}',
			'prior_error {"message": "no stock", "class_tag": "OutOfStock"}',
			'in_flight',
			'prior_result {"token": "tok_1"}',
			'prior_error {"message": "declined", "class_tag": "Declined"}',
			'mismatch true',
			'fresh'),
		"$how: the granted role replays its records, the hashed-key namespace finds its own, and begins a new one");
	is($node->safe_psql($db, q{
		SELECT expires_at - created_at FROM idempotency.idempotency_record WHERE namespace = 'orders' AND key_value = 'o-new'}),
		'7 days', "$how: the new record got the namespace's replay window");

	like(as_role($db, 'svc_orders', q{
		SELECT kind FROM idempotency.idem_begin('secrets', 'big', jsonb_build_object('x', repeat('y', 5000)))}),
		qr/^psql:\S+ ERROR:  54000: idempotency request is too large/,
		"$how: the hashed-key namespace keeps its payload limit");
	is(as_role($db, 'Svc Refunds', q{
		SELECT o.kind || ' ' || o.result FROM idempotency.idem_begin('refunds', 'r-1', '{"refund": 1}') o}),
		'prior_result {"refunded": true}', "$how: the role whose name needs quoting keeps its grant");
	like(as_role($db, 'outsider', q{SELECT kind FROM idempotency.idem_begin('orders', 'o-1', '{"sku": "A"}')}),
		qr/^psql:\S+ ERROR:  42501: permission denied for idempotency namespace "orders"/,
		"$how: a role with the schema but no namespace grant is refused with 42501");
	like(as_role($db, 'svc_orders', q{SELECT kind FROM idempotency.idem_begin('refunds', 'r-1', '{"refund": 1}')}),
		qr/^psql:\S+ ERROR:  42501: permission denied for idempotency namespace "refunds"/,
		"$how: a granted role is refused another role's namespace");
	is($node->safe_psql($db, q{SELECT count(*) FROM idempotency.idem_namespace_grant WHERE grantee::text ~ '^[0-9]+$'}),
		'0', "$how: the grant to the dropped role is not restored");
	is(rows($db, $bound_store), $bound_rows, "$how: every row of the bound store is restored byte for byte");
	is($node->safe_psql($db, q{SELECT store FROM idempotency.idem_namespaces WHERE namespace = 'bound'}),
		'app.order_store', "$how: the namespace is bound to the restored store, by name");
	is(as_role($db, 'svc_orders', q{
		SELECT o.kind || ' ' || o.result FROM idempotency.idem_begin('bound', 'b-1', '{"sku": "D"}') o}),
		'prior_result {"order_id": 4}', "$how: and replays from it");
	return;
}

# Custom format, restored into a fresh database.
my $dir = PostgreSQL::Test::Utils::tempdir;
$node->command_ok(['pg_dump', '-Fc', '-d', 'src', '-f', "$dir/src.dump"], 'pg_dump -Fc of the source');
$node->safe_psql('postgres', 'CREATE DATABASE restored_custom');
$node->command_checks_all(['pg_restore', '--exit-on-error', '-d', 'restored_custom', "$dir/src.dump"],
	0, [qr/^$/], [qr/^$/], 'pg_restore of it into a fresh database, without a warning');
check_restored('restored_custom', 'pg_restore');

# Plain format through psql.
$node->command_ok(['pg_dump', '-Fp', '-d', 'src', '-f', "$dir/src.sql"], 'pg_dump -Fp of the source');
$node->safe_psql('postgres', 'CREATE DATABASE restored_plain');
$node->command_checks_all(['psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', 'restored_plain', '-f', "$dir/src.sql"],
	0, [qr/set_config/], [qr/^$/], 'psql runs the plain dump without an error or warning');
check_restored('restored_plain', 'plain dump');

# Restored by another superuser (a new cluster's or a managed service's
# administrator): the dump hands the schema to its old owner before CREATE
# EXTENSION, and the extension installs into it all the same.
$node->safe_psql('postgres', 'CREATE ROLE other_admin SUPERUSER LOGIN; CREATE DATABASE restored_other OWNER other_admin');
$node->command_checks_all(['pg_restore', '--exit-on-error', '-U', 'other_admin', '-d', 'restored_other', "$dir/src.dump"],
	0, [qr/^$/], [qr/^$/], 'pg_restore of it by another superuser, without an error');
check_restored('restored_other', 'restored by another superuser');

# A database that reached 0.4.0 by ALTER EXTENSION UPDATE (0.3.0's, with the
# grants its update migrated) dumps and restores the same way.
my %updated = map { $_ => rows('v030', $tables{$_}) } keys %tables;
is($node->safe_psql('v030', q{
	SELECT (SELECT count(*) FROM idempotency.idempotency_record) || ' '
	       || (SELECT string_agg(namespace || '=' || grantee::text, ' ' ORDER BY namespace)
	           FROM idempotency.idem_namespace_grant)}),
	'310 bulk=app03 legacy=app03 orders=app03 payments=app03 refunds-v2=app03 typed=app03',
	'the updated 0.3.0 database has its records and the grants its update migrated');
$node->command_ok(['pg_dump', '-Fc', '-d', 'v030', '-f', "$dir/v030.dump"], 'pg_dump -Fc of the updated database');
$node->safe_psql('postgres', 'CREATE DATABASE restored_v030');
$node->command_checks_all(['pg_restore', '--exit-on-error', '-d', 'restored_v030', "$dir/v030.dump"],
	0, [qr/^$/], [qr/^$/], 'pg_restore of it, without a warning');
for my $table (sort keys %tables)
{
	is(rows('restored_v030', $tables{$table}), $updated{$table},
		"updated database: every row of $table is restored byte for byte");
}
is_deeply([ privileges('restored_v030') ], [ privileges('v030') ],
	"updated database: every privilege on the extension's objects is restored");
is(as_role('restored_v030', 'app03', q{
	SELECT o.kind || ' ' || o.result FROM idempotency.idem_begin('legacy', 'l-1', '{"n": 1}') o}),
	'prior_result {"legacy": true}', 'updated database: the migrated role replays its record after the restore');

# ---------------------------------------------------------------------------
# 3. An update while sessions are open

# A pool's session prepared its statements against 0.9.2; the extension is
# then updated under it. They are planned again and go on working: 1.0.0's
# idem_outcome has 0.9's columns. (A type that grows makes SELECT * fail
# with 0A000 until the session prepares it again, and a session that
# loaded the previous library must reconnect: docs/operations.md.)
$node->safe_psql('postgres', 'CREATE DATABASE live');
$node->safe_psql('live', q{CREATE EXTENSION idempotency VERSION '0.9.2'});
$node->safe_psql('live', q{
	BEGIN;
	SELECT idempotency.idem_begin('n', 'k', '{}');
	SELECT idempotency.idem_commit('n', 'k', '{"ok": true}');
	COMMIT;});
my $pool = $node->background_psql('live', on_error_stop => 0);
$pool->query_safe(q{
	PREPARE named_columns AS SELECT kind, result FROM idempotency.idem_begin('n', 'k', '{}');
	PREPARE star AS SELECT * FROM idempotency.idem_begin('n', 'k', '{}');});
is($pool->query_safe('EXECUTE named_columns'), 'prior_result|{"ok": true}', 'live: a prepared statement with columns');
like($pool->query_safe('EXECUTE star'), qr/^prior_result\|\{"ok": true\}\|/, 'live: and one with SELECT *');
$node->safe_psql('live', 'ALTER EXTENSION idempotency UPDATE');
is($pool->query_safe('EXECUTE named_columns'), 'prior_result|{"ok": true}',
	'live: after the update, the statement with columns still works');
like($pool->query_safe('EXECUTE star'), qr/^prior_result\|\{"ok": true\}\|/, 'live: and so does SELECT *');
$pool->quit;

$node->stop;
done_testing();
