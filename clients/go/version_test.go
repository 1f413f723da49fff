package idempotency_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// countingPool counts the statements that ask idem_version().
type countingPool struct {
	*pgxpool.Pool
	versions atomic.Int32
}

func (p *countingPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if strings.Contains(sql, "idem_version") {
		p.versions.Add(1)
	}
	return p.Pool.QueryRow(ctx, sql, args...)
}

// TestVersionCheckedOnce: the first call asks idem_version(), later ones do not.
func TestVersionCheckedOnce(t *testing.T) {
	pool := &countingPool{Pool: pgtest.Pool(t)}
	idem := idempotency.New(pool)
	v, err := idem.Server(ctx, pool)
	must(t, err)
	if v.Edition != pgtest.Edition() || !strings.HasPrefix(v.API, "1.") || v.Version == "" {
		t.Fatalf("version: %+v", v)
	}
	ns := pgtest.Unique("pay")
	for range 3 {
		_, _, err := idem.HTTPKey(ctx, pool, ns, nil, "")
		must(t, err)
		_, err = idem.ExtendLease(ctx, pool, ns, "k", 1<<40)
		if pgError(t, err).Code != "55000" {
			t.Fatal(err)
		}
	}
	if n := pool.versions.Load(); n != 1 {
		t.Fatalf("idem_version() asked %d times", n)
	}
}

// database makes a database for one test, set up by setup, dropped after.
func database(t *testing.T, setup string) *pgxpool.Pool {
	t.Helper()
	name := "idem_go_version_" + strings.ReplaceAll(pgtest.Unique("db")[3:], "-", "")
	must(t, pgtest.Admin(ctx, "CREATE DATABASE "+name))
	t.Cleanup(func() { _ = pgtest.Drop(context.Background(), name) })
	pool, err := pgxpool.New(ctx, pgtest.ConnString(name))
	must(t, err)
	t.Cleanup(pool.Close)
	if setup != "" {
		_, err = pool.Exec(ctx, setup)
		must(t, err)
	}
	return pool
}

// TestOldServerRefused: a 0.9 extension has no idem_version(): refused with
// the advice to update, before anything reaches its functions.
func TestOldServerRefused(t *testing.T) {
	pool := database(t, "CREATE EXTENSION idempotency VERSION '0.9.2'")
	idem := idempotency.New(pool)
	tx := begin(t, pool)
	_, err := idem.Begin(ctx, tx, "payments", "k", `{}`)
	if !errors.Is(err, idempotency.ErrIncompatibleServer) ||
		!strings.Contains(err.Error(), "ALTER EXTENSION idempotency UPDATE") || pgError(t, err).Code != "42883" {
		t.Fatalf("0.9.2: %v", err)
	}
	// Updated, the same Client works: a refusal is not remembered.
	must(t, tx.Rollback(ctx))
	_, err = pool.Exec(ctx, "ALTER EXTENSION idempotency UPDATE")
	must(t, err)
	tx = begin(t, pool)
	o, err := idem.Begin(ctx, tx, "payments", "k", `{}`)
	must(t, err)
	if o.Kind != idempotency.Fresh {
		t.Fatalf("after the update: %+v", o)
	}
}

// TestUnknownAPIMajorRefused: an API 2.0 server is refused, naming both majors.
func TestUnknownAPIMajorRefused(t *testing.T) {
	pool := database(t, `CREATE SCHEMA idempotency;
		CREATE FUNCTION idempotency.idem_version(OUT edition text, OUT version text, OUT api text)
		LANGUAGE sql AS $$ SELECT 'native', '2.0.0', '2.0' $$`)
	idem := idempotency.New(pool)
	_, err := idem.Server(ctx, pool)
	if !errors.Is(err, idempotency.ErrIncompatibleServer) || !strings.Contains(err.Error(), "API is 2.0") ||
		!strings.Contains(err.Error(), "knows API 1.x") {
		t.Fatalf("API 2.0: %v", err)
	}
	_, _, err = idem.HTTPKey(ctx, pool, "payments", nil, "")
	if !errors.Is(err, idempotency.ErrIncompatibleServer) {
		t.Fatalf("a call after the refusal: %v", err)
	}
}

// TestNotInstalled: a database without the extension says so.
func TestNotInstalled(t *testing.T) {
	pool := database(t, "")
	_, err := idempotency.New(pool).Server(ctx, pool)
	if err == nil || !strings.Contains(err.Error(), "CREATE EXTENSION idempotency") || !strings.Contains(err.Error(), "docs/managed.md") || pgError(t, err).Code != "3F000" {
		t.Fatalf("no extension: %v", err)
	}
}
