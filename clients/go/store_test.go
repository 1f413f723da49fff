package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var ctx = context.Background()

// begin opens a transaction rolled back when t ends (unless committed).
func begin(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	return tx
}

// must fails t on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// pgError is the server error inside err, or fails t.
func pgError(t *testing.T, err error) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Fatalf("want a *pgconn.PgError inside, got %v", err)
	}
	return pgErr
}

// sameJSON fails t when two JSON texts differ as values.
func sameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	must(t, json.Unmarshal(want, &w))
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: got %s, want %s", what, got, want)
	}
}

func TestFreshCommitReplayMismatch(t *testing.T) {
	pool := pgtest.Pool(t)
	idem := idempotency.New(pool)
	ns, key := pgtest.Unique("pay"), pgtest.Unique("k")
	request := map[string]any{"amount": 100, "currency": "EUR"}

	tx := begin(t, pool)
	o, err := idem.Begin(ctx, tx, ns, key, request)
	must(t, err)
	if o.Kind != idempotency.Fresh || o.Attempt != 1 || o.Fence < 1<<32 || o.Takeover ||
		o.LeaseEndsAt != nil || o.RecoveryPoint != nil || o.Age != nil || len(o.SubmittedHash) != 32 {
		t.Fatalf("fresh outcome: %+v", o)
	}
	must(t, idem.Commit(ctx, tx, ns, key, map[string]any{"payment_id": 7}, o.Fence))
	must(t, tx.Commit(ctx))

	tx = begin(t, pool)
	replay, err := idem.Begin(ctx, tx, ns, key, `{"currency": "EUR", "amount": 100}`)
	must(t, err)
	if replay.Kind != idempotency.PriorResult || replay.Fence != 0 || replay.Attempt != 0 {
		t.Fatalf("replay: %+v", replay)
	}
	var got struct {
		PaymentID int `json:"payment_id"`
	}
	must(t, replay.DecodeResult(&got))
	if got.PaymentID != 7 || string(replay.SubmittedHash) != string(o.SubmittedHash) {
		t.Fatalf("replayed %+v, hash %x vs %x", got, replay.SubmittedHash, o.SubmittedHash)
	}

	other, err := idem.Begin(ctx, tx, ns, key, map[string]any{"amount": 999, "currency": "EUR"})
	must(t, err)
	if other.Kind != idempotency.Mismatch || len(other.RecordedHash) != 32 ||
		string(other.RecordedHash) != string(o.SubmittedHash) || string(other.SubmittedHash) == string(o.SubmittedHash) {
		t.Fatalf("mismatch: %+v", other)
	}
	sameJSON(t, "recorded request", other.RecordedRequest, []byte(`{"amount": 100, "currency": "EUR"}`))
	if err := other.DecodeResult(&got); err == nil {
		t.Fatal("a mismatch decoded a result")
	}
}

func TestPriorError(t *testing.T) {
	pool := pgtest.Pool(t)
	idem := idempotency.New(pool)
	ns, key := pgtest.Unique("pay"), pgtest.Unique("k")
	refusal := idempotency.StoredError{ClassTag: "InvalidAmount", Message: "amount must be positive", Cause: "amount -5"}

	tx := begin(t, pool)
	o, err := idem.Begin(ctx, tx, ns, key, map[string]int{"amount": -5})
	must(t, err)
	must(t, idem.FailPermanent(ctx, tx, ns, key, refusal, o.Fence))
	must(t, tx.Commit(ctx))

	tx = begin(t, pool)
	again, err := idem.Begin(ctx, tx, ns, key, map[string]int{"amount": -5})
	must(t, err)
	if again.Kind != idempotency.PriorError || again.Error == nil || *again.Error != refusal {
		t.Fatalf("prior error: %+v", again)
	}
}

func TestInFlightAndTransientFailure(t *testing.T) {
	pool := pgtest.Pool(t)
	idem := idempotency.New(pool)
	ns, key := pgtest.Unique("pay"), pgtest.Unique("k")

	holder := begin(t, pool)
	o, err := idem.Begin(ctx, holder, ns, key, `{"n": 1}`)
	must(t, err)

	other := begin(t, pool)
	busy, err := idem.Begin(ctx, other, ns, key, `{"n": 1}`)
	must(t, err)
	if busy.Kind != idempotency.InFlight || busy.Age != nil || busy.Fence != 0 {
		t.Fatalf("in flight (a claim held by its lock has no age): %+v", busy)
	}
	// Only the holder may finish it: the server's 55000, with its detail, wrapped.
	err = idem.Commit(ctx, other, ns, key, `{}`, o.Fence)
	pgErr := pgError(t, err)
	if pgErr.Code != "55000" || !strings.Contains(pgErr.Detail, "in_flight") ||
		!strings.Contains(err.Error(), "idem_commit in namespace") || !strings.Contains(err.Error(), pgErr.Detail) {
		t.Fatalf("commit by another transaction: %v (detail %q)", err, pgErr.Detail)
	}

	must(t, idem.FailTransient(ctx, holder, ns, key, o.Fence))
	must(t, holder.Commit(ctx))
	tx := begin(t, pool)
	retry, err := idem.Begin(ctx, tx, ns, key, `{"n": 1}`)
	must(t, err)
	if retry.Kind != idempotency.Fresh || retry.Attempt != 1 || retry.Fence == o.Fence {
		t.Fatalf("after a transient failure: %+v", retry)
	}
}

// TestLeaseTakeoverRecoveryPoint: a claim that outlives its transaction (a
// namespace with a lease), its heartbeat and recovery point, the takeover
// that answers them, and the old holder's fence refused.
func TestLeaseTakeoverRecoveryPoint(t *testing.T) {
	pool := pgtest.Pool(t)
	idem := idempotency.New(pool)
	ns, key := pgtest.Unique("jobs"), pgtest.Unique("k")
	pgtest.Exec(t, "SELECT idempotency.idem_namespace_configure($1, in_progress_lease => '2 seconds')", ns)

	tx := begin(t, pool)
	first, err := idem.Begin(ctx, tx, ns, key, `{"job": 1}`)
	must(t, err)
	if first.Kind != idempotency.Fresh || first.LeaseEndsAt == nil {
		t.Fatalf("fresh with a lease: %+v", first)
	}
	must(t, tx.Commit(ctx)) // the claim outlives its transaction

	tx = begin(t, pool)
	busy, err := idem.Begin(ctx, tx, ns, key, `{"job": 1}`)
	must(t, err)
	if busy.Kind != idempotency.InFlight || busy.Age == nil || busy.LeaseEndsAt == nil {
		t.Fatalf("in flight under a lease: %+v", busy)
	}
	must(t, tx.Rollback(ctx))

	ends, err := idem.ExtendLease(ctx, pool, ns, key, first.Fence) // autocommit: its own transaction
	must(t, err)
	if !ends.After(*first.LeaseEndsAt) && !ends.Equal(*first.LeaseEndsAt) {
		t.Fatalf("heartbeat moved the lease from %v to %v", first.LeaseEndsAt, ends)
	}
	_, err = idem.SavePoint(ctx, pool, ns, key, "charged", map[string]string{"charge": "ch_1"}, first.Fence)
	must(t, err)

	time.Sleep(2100 * time.Millisecond) // the lease runs out, counted from the save point
	tx = begin(t, pool)
	took, err := idem.Begin(ctx, tx, ns, key, `{"job": 1}`)
	must(t, err)
	if took.Kind != idempotency.Fresh || !took.Takeover || took.Attempt != 2 || took.Fence == first.Fence ||
		took.RecoveryPoint == nil || *took.RecoveryPoint != "charged" {
		t.Fatalf("takeover: %+v", took)
	}
	sameJSON(t, "recovery state", took.RecoveryState, []byte(`{"charge": "ch_1"}`))
	must(t, idem.Commit(ctx, tx, ns, key, `{"done": true}`, took.Fence))
	must(t, tx.Commit(ctx))

	_, err = idem.ExtendLease(ctx, pool, ns, key, first.Fence)
	if pgError(t, err).Code != "55000" {
		t.Fatalf("the old holder's heartbeat: %v", err)
	}
}

func TestBeginBatch(t *testing.T) {
	pool := pgtest.Pool(t)
	idem := idempotency.New(pool)
	ns := pgtest.Unique("inbox")
	done := pgtest.Unique("m")

	tx := begin(t, pool)
	o, err := idem.Begin(ctx, tx, ns, done, `{"n": 1}`)
	must(t, err)
	must(t, idem.Commit(ctx, tx, ns, done, `"ok"`, o.Fence))
	must(t, tx.Commit(ctx))

	tx = begin(t, pool)
	fresh := pgtest.Unique("m")
	outs, err := idem.BeginBatch(ctx, tx, ns, []string{fresh, done, done},
		[]any{map[string]int{"n": 2}, `{"n": 1}`, json.RawMessage(`{"n": 3}`)})
	must(t, err)
	if len(outs) != 3 || outs[0].Kind != idempotency.Fresh || outs[1].Kind != idempotency.PriorResult ||
		outs[2].Kind != idempotency.Mismatch || string(outs[1].Result) != `"ok"` {
		t.Fatalf("batch: %+v", outs)
	}
	must(t, idem.Commit(ctx, tx, ns, fresh, `null`, outs[0].Fence))
	must(t, tx.Commit(ctx))
}

// TestAutocommitRefused: Begin needs the caller's transaction.
func TestAutocommitRefused(t *testing.T) {
	pool := pgtest.Pool(t)
	idem := idempotency.New(pool)
	ns := pgtest.Unique("pay")
	if _, err := idem.Begin(ctx, pool, ns, "k", `{}`); !errors.Is(err, idempotency.ErrNoTransaction) {
		t.Fatalf("a pool: %v", err)
	}
	conn, err := pool.Acquire(ctx)
	must(t, err)
	defer conn.Release()
	if _, err := idem.Begin(ctx, conn, ns, "k", `{}`); !errors.Is(err, idempotency.ErrNoTransaction) {
		t.Fatalf("a connection in autocommit mode: %v", err)
	}
	if _, err := idem.BeginBatch(ctx, conn.Conn(), ns, []string{"k"}, []any{`{}`}); !errors.Is(err, idempotency.ErrNoTransaction) {
		t.Fatalf("a *pgx.Conn in autocommit mode: %v", err)
	}
	// The same connection inside BEGIN ... is a transaction.
	_, err = conn.Exec(ctx, "BEGIN")
	must(t, err)
	defer conn.Exec(ctx, "ROLLBACK")
	o, err := idem.Begin(ctx, conn, ns, "k", `{}`)
	must(t, err)
	if o.Kind != idempotency.Fresh {
		t.Fatalf("inside BEGIN: %+v", o)
	}
}

// TestServerErrorsKeepTheirFields: an invalid namespace sent to the server
// (bypassing the local check) comes back as the server's *pgconn.PgError.
func TestServerErrorsKeepTheirFields(t *testing.T) {
	pool := pgtest.Pool(t)
	idem := idempotency.New(pool)
	tx := begin(t, pool)
	_, err := idem.Begin(ctx, tx, "Payments", "k", `{}`)
	pgErr := pgError(t, err)
	if pgErr.Code != "22023" || pgErr.Message != "invalid idempotency namespace" ||
		!strings.HasPrefix(pgErr.Detail, `Character "P" at position 1`) {
		t.Fatalf("%+v", pgErr)
	}
	_, local := idempotency.Parse("Payments", "k")
	var ke *idempotency.KeyError
	if !errors.As(local, &ke) || ke.Code != pgErr.Code || ke.Message != pgErr.Message || ke.Detail != pgErr.Detail {
		t.Fatalf("local %v, server %+v", local, pgErr)
	}
}

// TestHTTPFunctions: idem_http_key and idem_http_response through the
// typed calls, an outcome going back to the server by its column names.
func TestHTTPFunctions(t *testing.T) {
	pool := pgtest.Pool(t)
	idem := idempotency.New(pool)
	ns := pgtest.Unique("pay")
	docs := "https://example.com/idempotency"

	for header, want := range map[string]string{`abc-1`: "abc-1", `"abc-1"`: "abc-1", `  "a\"b"  `: `a"b`} {
		key, refusal, err := idem.HTTPKey(ctx, pool, ns, &header, docs)
		must(t, err)
		if key != want || refusal != nil {
			t.Fatalf("header %s: key %q, refusal %+v", header, key, refusal)
		}
	}
	_, refusal, err := idem.HTTPKey(ctx, pool, ns, nil, docs)
	must(t, err)
	if refusal == nil || refusal.Status != 400 || refusal.Header["Link"] == "" ||
		!strings.Contains(string(refusal.Body), "MISSING_IDEMPOTENCY_KEY") {
		t.Fatalf("missing: %+v", refusal)
	}
	bad := `"unterminated`
	_, refusal, err = idem.HTTPKey(ctx, pool, ns, &bad, "")
	must(t, err)
	if refusal == nil || refusal.Status != 400 || !strings.Contains(string(refusal.Body), "INVALID_IDEMPOTENCY_KEY") {
		t.Fatalf("malformed: %+v", refusal)
	}

	key := pgtest.Unique("k")
	tx := begin(t, pool)
	o, err := idem.Begin(ctx, tx, ns, key, `{}`)
	must(t, err)
	must(t, idem.Commit(ctx, tx, ns, key, map[string]any{"status": 201,
		"headers": map[string]string{"Location": "/p/1"}, "body": map[string]int{"id": 1}}, o.Fence))
	must(t, tx.Commit(ctx))

	holder := begin(t, pool)
	busyKey := pgtest.Unique("k")
	_, err = idem.Begin(ctx, holder, ns, busyKey, `{}`)
	must(t, err)

	tx = begin(t, pool)
	replay, err := idem.Begin(ctx, tx, ns, key, `{}`)
	must(t, err)
	mismatch, err := idem.Begin(ctx, tx, ns, key, `{"other": true}`)
	must(t, err)
	busy, err := idem.Begin(ctx, tx, ns, busyKey, `{}`)
	must(t, err)

	resp, err := idem.HTTPResponse(ctx, tx, replay, 1, "")
	must(t, err)
	if resp.Status != 201 || resp.Header["Location"] != "/p/1" || resp.Header["Idempotency-Replayed"] != "true" {
		t.Fatalf("replay: %+v", resp)
	}
	sameJSON(t, "replayed body", resp.Body, []byte(`{"id": 1}`))
	resp, err = idem.HTTPResponse(ctx, tx, mismatch, 1, docs)
	must(t, err)
	if resp.Status != 422 || !strings.Contains(string(resp.Body), "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST") ||
		strings.Contains(string(resp.Body), "other") {
		t.Fatalf("mismatch: %+v", resp)
	}
	resp, err = idem.HTTPResponse(ctx, tx, busy, 7, "")
	must(t, err)
	if resp.Status != 409 || resp.Header["Retry-After"] != "7" {
		t.Fatalf("in flight: %+v", resp)
	}
	fresh := idempotency.Outcome{Kind: idempotency.Fresh}
	_, err = idem.HTTPResponse(ctx, tx, fresh, 1, "")
	if pgError(t, err).Message != "a fresh outcome has no HTTP response yet" {
		t.Fatalf("fresh: %v", err)
	}
}
