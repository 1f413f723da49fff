// pooler.go: pgx v4 behind PgBouncer in transaction pooling, as
// docs/clients.md's section on poolers says to connect, and why. Run by
// test/pooler/run with DATABASE_URL naming its PgBouncer (the driver's
// database through a pool of two server connections) and SERVER_PORT the
// server itself, for the checks; prints TAP. Run with go run in GOPATH mode
// (Debian's golang-github-jackc-pgx-v4-dev).
//
// pgx prepares every statement on the server (lrupsc_<n>_<m>) the first
// time a connection runs it, and from then on sends only its name. Behind
// transaction pooling the next transaction may run on another server
// connection, which has no such statement. The checks make a statement move
// deterministically: with two server connections, a second client holds
// one in an open transaction while the statement runs on the other, and a
// third holds that one when it runs again (each cleared first with
// DEALLOCATE ALL: statements of earlier clients stay on it).
//
//   - With statement_cache_mode=describe (the guide's setting): the move
//     works, and a pgxpool of 8 paying 80 keys (each retried) over the pool
//     of two gets one payment per key, with no error.
//   - With the defaults: 26000 when the statement moves, before PgBouncer
//     1.21 (POOLER_MAX_PREPARED=0). From 1.21 (max_prepared_statements > 0)
//     it works; but pgx deallocates a statement it evicts from its cache
//     (more than statement_cache_capacity, 512, on one connection) with SQL
//     DEALLOCATE and its own name, which PgBouncer passes through unchanged
//     and the server does not know (26000).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// snippet: pooler
// Behind PgBouncer in transaction or statement pooling:
// statement_cache_mode=describe in the connection string (pgx v4), so that
// pgx learns each statement's types through the unnamed statement and never
// prepares one by name. (pgx v5: default_query_exec_mode=cache_describe.)
func connectThroughPgBouncer(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	separator := "?"
	if strings.Contains(databaseURL, "?") {
		separator = "&"
	}
	return pgxpool.Connect(ctx, databaseURL+separator+"statement_cache_mode=describe")
}
// end snippet

const poolerNamespace = "pooled"
const beginSQL = "SELECT kind, result, fence FROM idempotency.idem_begin($1, $2, $3)"

var request = map[string]any{"amount": 100}
var tapCount, tapFailed int

func ok(cond bool, name string, diag any) {
	tapCount++
	if !cond {
		tapFailed++
		fmt.Printf("not ok %d - %s\n", tapCount, name)
		if diag != nil {
			fmt.Fprintf(os.Stderr, "# %v\n", diag)
		}
		return
	}
	fmt.Printf("ok %d - %s\n", tapCount, name)
}

// querier is what pay needs: a pgx.Conn, a pooled connection or a transaction.
type querier interface {
	Begin(context.Context) (pgx.Tx, error)
}

// pay: the guide's flow, reduced: begin, a payment, commit, in one
// transaction. Returns the payment's id (recorded, or replayed).
func pay(ctx context.Context, db querier, key string) (int64, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	var kind string
	var result *struct {
		PaymentID int64 `json:"payment_id"`
	}
	var fence *int64
	if err := tx.QueryRow(ctx, beginSQL, poolerNamespace, key, request).Scan(&kind, &result, &fence); err != nil {
		return 0, err
	}
	if kind == "prior_result" {
		return result.PaymentID, tx.Commit(ctx)
	}
	if kind != "fresh" {
		return 0, fmt.Errorf("%s: %s", key, kind)
	}
	var payment int64
	if err := tx.QueryRow(ctx, "INSERT INTO payments (amount, currency) VALUES (100, 'EUR') RETURNING id").Scan(&payment); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, "SELECT idempotency.idem_commit($1, $2, $3, $4)",
		poolerNamespace, key, map[string]int64{"payment_id": payment}, *fence); err != nil {
		return 0, err
	}
	return payment, tx.Commit(ctx)
}

func connect(ctx context.Context, url string) *pgx.Conn {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		panic(err)
	}
	return conn
}

// backend: the server process of conn's current server connection (asked
// with the simple protocol, which prepares nothing).
func backend(ctx context.Context, conn *pgx.Conn) (pid uint32) {
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()", pgx.QuerySimpleProtocol(true)).Scan(&pid); err != nil {
		panic(err)
	}
	return pid
}

func replay(ctx context.Context, conn *pgx.Conn) error {
	var kind string
	var result, fence any
	return conn.QueryRow(ctx, beginSQL, poolerNamespace, "moved", request).Scan(&kind, &result, &fence)
}

// moved runs the begin six times on x on one server connection, then once
// on the other one of the pool of two; returns the last run's error and the
// two backends. The helpers y and w describe statements: they leave none.
func moved(ctx context.Context, helpers string, x *pgx.Conn) (error, uint32, uint32) {
	y, w := connect(ctx, helpers), connect(ctx, helpers)
	defer y.Close(ctx)
	defer w.Close(ctx)
	ytx, _ := y.Begin(ctx)
	if _, err := ytx.Exec(ctx, "DEALLOCATE ALL"); err != nil { // y holds one server connection
		panic(err)
	}
	if _, err := x.Exec(ctx, "DEALLOCATE ALL"); err != nil { // x runs on the other one
		panic(err)
	}
	for i := 0; i < 6; i++ {
		if err := replay(ctx, x); err != nil {
			panic(err)
		}
	}
	first := backend(ctx, x)
	wtx, _ := w.Begin(ctx)
	if _, err := wtx.Exec(ctx, "SELECT 1"); err != nil { // w holds that one now
		panic(err)
	}
	ytx.Commit(ctx)
	err := replay(ctx, x)
	second := backend(ctx, x)
	wtx.Commit(ctx)
	return err, first, second
}

func main() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	server := connect(ctx, regexp.MustCompile(`:\d+/`).ReplaceAllString(url, ":"+os.Getenv("SERVER_PORT")+"/"))
	defer server.Close(ctx)
	if _, err := pay(ctx, server, "moved"); err != nil {
		panic(err)
	}
	tracksPrepared := os.Getenv("POOLER_MAX_PREPARED") != "" && os.Getenv("POOLER_MAX_PREPARED") != "0"
	describe := url + "?statement_cache_mode=describe"

	// The guide's setting.
	x := connect(ctx, describe)
	err, first, second := moved(ctx, describe, x)
	ok(err == nil && first != second, "statement_cache_mode=describe: the begin runs on another server connection after six runs on one", err)
	x.Close(ctx)

	db, err := connectThroughPgBouncer(ctx, url)
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	payments := map[string][2]int64{}
	var errs []error
	var wg sync.WaitGroup
	for i := 0; i < 80; i++ {
		wg.Add(1)
		go func(key string) {
			defer wg.Done()
			paid, err := pay(ctx, db, key)
			again, err2 := pay(ctx, db, key)
			mu.Lock()
			defer mu.Unlock()
			for _, e := range []error{err, err2} {
				if e != nil {
					errs = append(errs, e)
				}
			}
			payments[key] = [2]int64{paid, again}
		}(fmt.Sprintf("load-%d", i))
	}
	wg.Wait()
	db.Close()
	ok(len(errs) == 0, "statement_cache_mode=describe: a pgxpool pays 80 keys through the pool of two, with no error", errs)
	same := len(payments) == 80
	for _, p := range payments {
		same = same && p[0] == p[1] && p[0] != 0
	}
	ok(same, "one payment per key, replayed to its retry", len(payments))
	var n int
	if err := server.QueryRow(ctx, "SELECT count(*) FROM payments").Scan(&n); err != nil {
		panic(err)
	}
	ok(n == 81, "the payments table holds those 80 (and the one before)", n)

	// pgx's defaults.
	x = connect(ctx, url)
	err, _, _ = moved(ctx, describe, x)
	var pgErr *pgconn.PgError
	if tracksPrepared {
		ok(err == nil, "defaults, PgBouncer tracking prepared statements: the prepared begin runs on another server connection", err)
	} else {
		ok(errors.As(err, &pgErr) && pgErr.Code == "26000" && strings.Contains(pgErr.Message, `"lrupsc_`),
			"defaults, before PgBouncer 1.21: the prepared begin on another server connection fails with 26000", err)
	}
	x.Close(ctx)
	if tracksPrepared {
		x = connect(ctx, url+"?statement_cache_capacity=1") // evicts at the second statement, not the 513th
		var failure error
		for c := 0; c < 3 && failure == nil; c++ {
			var v int
			failure = x.QueryRow(ctx, fmt.Sprintf("SELECT $1::int AS column_%d", c), c).Scan(&v)
		}
		ok(errors.As(failure, &pgErr) && pgErr.Code == "26000",
			"defaults, PgBouncer tracking prepared statements: the deallocate of an evicted statement fails with 26000", failure)
		x.Close(ctx)
	}
	fmt.Printf("1..%d\n", tapCount)
	if tapFailed > 0 {
		os.Exit(1)
	}
}
