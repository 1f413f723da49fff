// flow.go: docs/clients.md's pgx guide, run through pgx v4 (Debian's
// golang-github-jackc-pgx-v4-dev, built in GOPATH mode) with its defaults
// (pgxpool, statements prepared and described, so the server's parameter
// types decide how values are encoded) against the database test/clients/run
// prepared. The regions between "snippet:" and "end snippet" are the guide's
// code (test/clients/snippets.py checks that they are); the rest checks what
// the guide promises, and what it warns about, and prints TAP.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// snippet: flow
const namespace = "payments"

var ErrProviderUnavailable = errors.New("payment provider unavailable")

type PaymentRequest struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

type Response struct {
	Status  int
	Headers map[string]string
	Body    map[string]any
}

// What idem_commit and idem_fail_permanent recorded, as idem_begin returns it.
type recorded struct {
	Status int            `json:"status"`
	Body   map[string]any `json:"body"`
}
type storedError struct {
	ClassTag string `json:"class_tag"`
	Message  string `json:"message"`
}

// CreatePayment answers POST /payments: header is the Idempotency-Key field
// (nil when absent), charge the payment provider's client.
func CreatePayment(ctx context.Context, db *pgxpool.Pool, header *string, req PaymentRequest,
	charge func(context.Context, string, PaymentRequest) error) (Response, error) {
	var key *string
	var status *int
	var body map[string]any
	err := db.QueryRow(ctx, "SELECT key, status, body FROM idempotency.idem_http_key($1, $2)",
		namespace, header).Scan(&key, &status, &body)
	if err != nil {
		return Response{}, err
	}
	if key == nil {
		return Response{Status: *status, Body: body}, nil // 400
	}

	tx, err := db.Begin(ctx)
	if err != nil {
		return Response{}, err
	}
	defer tx.Rollback(ctx) // unless committed: the claim goes with the work, a retry starts fresh
	resp, err := attempt(ctx, tx, *key, req, charge)
	if err != nil {
		return Response{}, err
	}
	return resp, tx.Commit(ctx)
}

func attempt(ctx context.Context, tx pgx.Tx, key string, req PaymentRequest,
	charge func(context.Context, string, PaymentRequest) error) (Response, error) {
	var kind string
	var result *recorded
	var stored *storedError
	var fence *int64
	// The server types $3 jsonb, so pgx encodes the map with encoding/json.
	err := tx.QueryRow(ctx, "SELECT kind, result, error, fence FROM idempotency.idem_begin($1, $2, $3)",
		namespace, key, map[string]any{"method": "POST", "target": "/payments", "body": req}).
		Scan(&kind, &result, &stored, &fence)
	if err != nil {
		return Response{}, err
	}
	switch kind {
	case "prior_result":
		return Response{result.Status, map[string]string{"Idempotency-Replayed": "true"}, result.Body}, nil
	case "prior_error":
		return Response{422, map[string]string{"Idempotency-Replayed": "true"},
			map[string]any{"code": stored.ClassTag, "detail": stored.Message}}, nil
	case "in_flight":
		return Response{409, map[string]string{"Retry-After": "1"},
			map[string]any{"code": "IDEMPOTENCY_REQUEST_IN_PROGRESS"}}, nil
	case "mismatch":
		return Response{422, nil, map[string]any{"code": "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST"}}, nil
	}
	// fresh: this transaction holds the key and must finish it before Commit.
	if req.Amount <= 0 {
		refusal := storedError{ClassTag: "InvalidAmount", Message: "amount must be positive"}
		if _, err := tx.Exec(ctx, "SELECT idempotency.idem_fail_permanent($1, $2, $3, $4)",
			namespace, key, map[string]string{"class_tag": refusal.ClassTag, "message": refusal.Message}, *fence); err != nil {
			return Response{}, err
		}
		return Response{422, nil, map[string]any{"code": refusal.ClassTag, "detail": refusal.Message}}, nil
	}
	if err := charge(ctx, key, req); errors.Is(err, ErrProviderUnavailable) {
		// Keep the outage on record and release the key: the retry starts fresh.
		if _, err := tx.Exec(ctx, "INSERT INTO provider_outages (idempotency_key) VALUES ($1)", key); err != nil {
			return Response{}, err
		}
		if _, err := tx.Exec(ctx, "SELECT idempotency.idem_fail_transient($1, $2, $3)", namespace, key, *fence); err != nil {
			return Response{}, err
		}
		return Response{503, map[string]string{"Retry-After": "1"}, map[string]any{"code": "PROVIDER_UNAVAILABLE"}}, nil
	} else if err != nil {
		return Response{}, err
	}
	var paymentID int64
	if err := tx.QueryRow(ctx, "INSERT INTO payments (amount, currency) VALUES ($1, $2) RETURNING id",
		req.Amount, req.Currency).Scan(&paymentID); err != nil {
		return Response{}, err
	}
	body := map[string]any{"payment_id": paymentID}
	if _, err := tx.Exec(ctx, "SELECT idempotency.idem_commit($1, $2, $3, $4)",
		namespace, key, recorded{Status: 201, Body: body}, *fence); err != nil {
		return Response{}, err
	}
	return Response{201, nil, body}, nil
}

// end snippet

// snippet: typed
type RefundReceipt struct {
	RefundID int32
	Amount   int64
}

// Refund records a refund as the composite type refund_receipt; its request
// is the amount. anyelement cannot be inferred from a parameter: $2::numeric.
func Refund(ctx context.Context, db *pgxpool.Pool, key string, amount int64) (RefundReceipt, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return RefundReceipt{}, err
	}
	defer tx.Rollback(ctx)
	var kind string
	var fence *int64
	var refundID *int32
	var refunded *int64
	err = tx.QueryRow(ctx, `SELECT o.kind, o.fence, r.refund_id, r.amount
	                          FROM idempotency.idem_begin_typed('refunds', $1, $2::numeric) o,
	                               idempotency.idem_result(o, NULL::refund_receipt) r`,
		key, amount).Scan(&kind, &fence, &refundID, &refunded)
	if err != nil {
		return RefundReceipt{}, err
	}
	var receipt RefundReceipt
	switch kind {
	case "prior_result":
		receipt = RefundReceipt{*refundID, *refunded}
	case "fresh":
		if err := tx.QueryRow(ctx, "INSERT INTO refunds (amount) VALUES ($1) RETURNING id, amount",
			amount).Scan(&receipt.RefundID, &receipt.Amount); err != nil {
			return RefundReceipt{}, err
		}
		if _, err := tx.Exec(ctx, "SELECT idempotency.idem_commit_typed($1, $2, ROW($3, $4)::refund_receipt, $5)",
			"refunds", key, receipt.RefundID, receipt.Amount, *fence); err != nil {
			return RefundReceipt{}, err
		}
	default:
		return RefundReceipt{}, fmt.Errorf("refund %s is %s", key, kind)
	}
	return receipt, tx.Commit(ctx)
}

// end snippet

// snippet: errors
// *pgconn.PgError has the SQLSTATE (Code), Detail and Hint; err.Error()
// prints only the message and the SQLSTATE.
func describe(err error) map[string]string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	return map[string]string{"sqlstate": pgErr.Code, "message": pgErr.Message,
		"detail": pgErr.Detail, "hint": pgErr.Hint}
}

// end snippet

// snippet: recipes
// CreatePaymentInSQL calls docs/usage.md's HTTP handler: one statement, its
// own transaction in autocommit mode.
func CreatePaymentInSQL(ctx context.Context, db *pgxpool.Pool, header string, req PaymentRequest) (Response, error) {
	var r Response
	err := db.QueryRow(ctx, "SELECT status, headers, body FROM create_payment($1, $2)", header, req).
		Scan(&r.Status, &r.Headers, &r.Body)
	return r, err
}

// Transfer calls docs/usage.md's stored procedure, which commits: outside a transaction.
func Transfer(ctx context.Context, db *pgxpool.Pool, key string, fromID, toID int32, amount int64) error {
	_, err := db.Exec(ctx, "CALL transfer($1, $2, $3, $4)", key, fromID, toID, amount)
	return err
}

// end snippet

// ---- the checks ----
var count, failed int

func ok(cond bool, name string, diag ...any) {
	count++
	if !cond {
		failed++
		fmt.Printf("not ok %d - %s\n", count, name)
		if len(diag) > 0 {
			fmt.Fprintf(os.Stderr, "# %v\n", diag)
		}
		return
	}
	fmt.Printf("ok %d - %s\n", count, name)
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func state(err error) string {
	if d := describe(err); d != nil {
		return d["sqlstate"]
	}
	return ""
}

func main() {
	ctx := context.Background()
	db, err := pgxpool.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println("Bail out!", err)
		os.Exit(1)
	}
	defer db.Close()
	if err := run(ctx, db); err != nil {
		fmt.Println("Bail out!", err)
		os.Exit(1)
	}
	fmt.Printf("1..%d\n", count)
	if failed > 0 {
		os.Exit(1)
	}
}

func run(ctx context.Context, db *pgxpool.Pool) error {
	var failNext error
	charge := func(context.Context, string, PaymentRequest) error {
		err := failNext
		failNext = nil
		return err
	}
	str := func(s string) *string { return &s }
	count := func(sql string, args ...any) (n int64) {
		if err := db.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			panic(err)
		}
		return n
	}
	eur100 := PaymentRequest{100, "EUR"}
	before := count("SELECT count(*) FROM payments")

	r, err := CreatePayment(ctx, db, nil, eur100, charge)
	ok(err == nil && r.Status == 400 && r.Body["code"] == "MISSING_IDEMPOTENCY_KEY", "no header: 400 MISSING_IDEMPOTENCY_KEY", r, err)
	r, err = CreatePayment(ctx, db, str(`"pgx-1`), eur100, charge)
	ok(err == nil && r.Status == 400 && r.Body["code"] == "INVALID_IDEMPOTENCY_KEY", "unterminated quoted header: 400 INVALID_IDEMPOTENCY_KEY", r, err)

	first, err := CreatePayment(ctx, db, str("pgx-1"), eur100, charge)
	ok(err == nil && first.Status == 201 && first.Body["payment_id"] != nil, "fresh: 201 with the payment id", first, err)
	r, err = CreatePayment(ctx, db, str(`"pgx-1"`), eur100, charge)
	ok(err == nil && r.Status == 201 && sameJSON(r.Body, first.Body) && r.Headers["Idempotency-Replayed"] == "true",
		"retry (quoted header): the same 201 and body, flagged as a replay", r, err)
	r, err = CreatePayment(ctx, db, str("pgx-1"), PaymentRequest{999, "EUR"}, charge)
	ok(err == nil && r.Status == 422 && r.Body["code"] == "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST", "same key, other amount: 422 mismatch", r, err)

	holder, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	var held string
	err = holder.QueryRow(ctx, "SELECT kind FROM idempotency.idem_begin($1, $2, $3)", namespace, "pgx-2",
		map[string]any{"method": "POST", "target": "/payments", "body": eur100}).Scan(&held)
	ok(err == nil && held == "fresh", "another connection holds pgx-2 in an open transaction", held, err)
	r, err = CreatePayment(ctx, db, str("pgx-2"), eur100, charge)
	ok(err == nil && r.Status == 409 && r.Headers["Retry-After"] == "1", "while it is held: 409 with Retry-After", r, err)
	holder.Rollback(ctx)
	r, err = CreatePayment(ctx, db, str("pgx-2"), eur100, charge)
	ok(err == nil && r.Status == 201, "after the holder rolled back: fresh, 201", r, err)

	refused := PaymentRequest{-5, "EUR"}
	r, err = CreatePayment(ctx, db, str("pgx-3"), refused, charge)
	ok(err == nil && r.Status == 422 && r.Body["code"] == "InvalidAmount", "a refused amount: 422 recorded with idem_fail_permanent", r, err)
	r, err = CreatePayment(ctx, db, str("pgx-3"), refused, charge)
	ok(err == nil && r.Status == 422 && r.Body["code"] == "InvalidAmount" && r.Headers["Idempotency-Replayed"] == "true",
		"its retry: the same 422, replayed", r, err)

	failNext = fmt.Errorf("charging pgx-4: %w", ErrProviderUnavailable)
	r, err = CreatePayment(ctx, db, str("pgx-4"), eur100, charge)
	ok(err == nil && r.Status == 503, "provider unavailable: 503 after idem_fail_transient", r, err)
	ok(count("SELECT count(*) FROM provider_outages WHERE idempotency_key = $1", "pgx-4") == 1, "the outage row committed with the released key")
	r, err = CreatePayment(ctx, db, str("pgx-4"), eur100, charge)
	ok(err == nil && r.Status == 201, "its retry: fresh, 201", r, err)

	failNext = errors.New("connection reset by the provider")
	_, err = CreatePayment(ctx, db, str("pgx-5"), eur100, charge)
	ok(err != nil && err.Error() == "connection reset by the provider", "an unexpected error is returned after the rollback", err)
	r, err = CreatePayment(ctx, db, str("pgx-5"), eur100, charge)
	ok(err == nil && r.Status == 201, "its retry: fresh, 201 (the claim was rolled back)", r, err)
	ok(count("SELECT count(*) FROM payments")-before == 4, "one payment per key that succeeded (pgx-1, -2, -4, -5)")

	// Typed results.
	receipt, err := Refund(ctx, db, "rf-pgx-1", 25)
	ok(err == nil && receipt.Amount == 25, "typed: fresh refund recorded as refund_receipt", receipt, err)
	again, err := Refund(ctx, db, "rf-pgx-1", 25)
	ok(err == nil && again == receipt, "typed: the retry decodes the same receipt with idem_result", again, err)
	ok(count("SELECT count(*) FROM refunds") == 1, "typed: one refund row")
	var kind string
	err = db.QueryRow(ctx, "SELECT kind FROM idempotency.idem_begin_typed('refunds', $1, $2)", "rf-pgx-2", 25).Scan(&kind)
	ok(state(err) == "42804", "typed without a cast: 42804", err)
	var tuple string
	err = db.QueryRow(ctx, `SELECT idempotency.idem_result(o, NULL::refund_receipt)
	                          FROM idempotency.idem_begin_typed('refunds', 'rf-pgx-1', 25::numeric) o`).Scan(&tuple)
	ok(err == nil && tuple == fmt.Sprintf("(%d,25)", receipt.RefundID), "a composite selected as one column arrives as a tuple string", tuple, err)

	// Errors: detail and hint.
	if _, err := db.Exec(ctx, "ALTER TYPE refund_receipt ADD ATTRIBUTE note text"); err != nil {
		return err
	}
	_, err = Refund(ctx, db, "rf-pgx-1", 25)
	want := map[string]string{
		"sqlstate": "ID001",
		"message":  "incompatible stored state: the stored result does not fit type public.refund_receipt",
		"detail":   `At $: field "note" of type public.refund_receipt is missing from the stored value.`,
		"hint":     "The type changed since the result was recorded. Decode it as jsonb, or use a new namespace for the new type.",
	}
	ok(reflect.DeepEqual(describe(err), want), "a changed type: ID001 with the detail and hint api.md shows", describe(err))
	ok(err != nil && !strings.Contains(err.Error(), "note"), "err.Error() drops the detail", err)
	if _, err := db.Exec(ctx, "ALTER TYPE refund_receipt DROP ATTRIBUTE note"); err != nil {
		return err
	}

	// What the guide warns about.
	_, err = db.Exec(ctx, "BEGIN; SELECT * FROM create_payment($1, $2); COMMIT;", "pgx-6", eur100)
	ok(state(err) == "42601", "several statements in one parameterized query: 42601", err)
	err = db.QueryRow(ctx, "SELECT kind FROM idempotency.idem_begin('payments', 'pgx-7', '{}')").Scan(&kind)
	ok(state(err) == "25000", "a fresh begin alone in autocommit mode: 25000 at its COMMIT", err)

	for _, window := range []any{"1 hour", time.Hour} {
		err = db.QueryRow(ctx, "SELECT kind FROM idempotency.idem_begin($1, $2, $3, $4)", namespace, "pgx-1",
			map[string]any{}, window).Scan(&kind)
		ok(err == nil && kind == "mismatch", fmt.Sprintf("a %T for the interval parameter", window), kind, err)
	}
	var granted bool
	err = db.QueryRow(ctx, "SELECT idempotency.idem_grant($1, $2)", "pgx-grants", "postgres").Scan(&granted)
	ok(err == nil && granted, "a string for the regrole parameter", err)

	// docs/usage.md's recipes.
	r, err = CreatePaymentInSQL(ctx, db, "pgx-sql-1", eur100)
	ok(err == nil && r.Status == 201 && r.Body["payment_id"] != nil, "usage.md's create_payment: 201", r, err)
	replay, err := CreatePaymentInSQL(ctx, db, "pgx-sql-1", eur100)
	ok(err == nil && replay.Status == 201 && sameJSON(replay.Body, r.Body) && replay.Headers["Idempotency-Replayed"] == "true",
		"usage.md's create_payment: the retry replays", replay, err)
	for i := 0; i < 2; i++ {
		if err := Transfer(ctx, db, "tr-pgx", 1, 2, 30); err != nil {
			return err
		}
	}
	var balances string
	err = db.QueryRow(ctx, "SELECT string_agg(balance::text, ',' ORDER BY id) FROM accounts").Scan(&balances)
	ok(err == nil && balances == "40,60", "usage.md's transfer, called twice: moved once", balances, err)
	return nil
}
