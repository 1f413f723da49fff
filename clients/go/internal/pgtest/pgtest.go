// Package pgtest gives the tests of this module (and of the framework
// adapters beside it) a database of their own with the extension, on the
// server the standard PG* environment variables name.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvDatabase names, in a helper process, the database its parent made.
const EnvDatabase = "IDEM_GO_TEST_DATABASE"

var shared string

// EnvStoreInTemplate set to 1 says that the server's new databases come with
// the store already (test/bin/portable's clients layer: the portable
// edition's plain script installed in template1): Create does not create
// the extension. EnvEdition names the edition idem_version() must answer.
const (
	EnvStoreInTemplate = "IDEM_TEST_STORE_IN_TEMPLATE"
	EnvEdition         = "IDEM_TEST_EDITION"
)

// Edition is the edition the tests run against (native unless EnvEdition says).
func Edition() string {
	if e := os.Getenv(EnvEdition); e != "" {
		return e
	}
	return "native"
}

// Main runs a test binary's tests against a new database (with the
// extension installed) and drops it after; a helper process started by a
// test reuses its parent's database instead.
func Main(m *testing.M) int {
	if name := os.Getenv(EnvDatabase); name != "" {
		shared = name
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := Create(ctx, "idem_go_test")
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		return 1
	}
	shared = name
	code := m.Run()
	if err := Drop(context.Background(), name); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
	}
	return code
}

// Name is the database of this test binary.
func Name() string { return shared }

// ConnString connects to database name; everything else comes from PG*.
func ConnString(name string) string { return "dbname=" + name }

// Create makes a new database named after prefix, with the extension
// (or the store its template holds: EnvStoreInTemplate).
func Create(ctx context.Context, prefix string) (string, error) {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := prefix + "_" + hex.EncodeToString(suffix)
	if err := Admin(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("creating database %s on the server PG* names: %w", name, err)
	}
	if os.Getenv(EnvStoreInTemplate) == "1" {
		return name, nil
	}
	conn, err := pgx.Connect(ctx, ConnString(name))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION idempotency"); err != nil {
		return "", fmt.Errorf("CREATE EXTENSION idempotency in %s: %w", name, err)
	}
	return name, nil
}

// Drop removes database name, ending its sessions.
func Drop(ctx context.Context, name string) error {
	return Admin(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

// Admin runs one statement in the maintenance database postgres.
func Admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, ConnString("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// Pool opens a pool on this binary's database, closed when t ends; options
// are more connection string settings ("default_query_exec_mode=exec").
func Pool(t testing.TB, options ...string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), strings.Join(append([]string{ConnString(shared)}, options...), " "))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Exec runs statements on this binary's database, failing t on an error.
func Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), ConnString(shared))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Count runs a query answering one number.
func Count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), ConnString(shared))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Unique is a name no other test of this run uses (a namespace, a key).
func Unique(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// Response is what a real HTTP client got.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Post sends a JSON body with an Idempotency-Key ("" for none) and reads
// the answer; net/http's own retry of such a request is turned off, so
// that every retry is the test's.
func Post(t testing.TB, url, key, body string) Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Response{resp.StatusCode, resp.Header, string(b)}
}

// Target is the route template the fingerprint of key's record holds.
func Target(t testing.TB, namespace, key string) string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), ConnString(shared))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var target string
	if err := conn.QueryRow(context.Background(), `SELECT request_payload->>'target'
		FROM idempotency.idempotency_record WHERE namespace = $1 AND key_value = $2`, namespace, key).Scan(&target); err != nil {
		t.Fatalf("the record of %s: %v", key, err)
	}
	return target
}

// SameJSON tells whether two JSON texts hold the same value (a replay is
// the jsonb the server kept, spaced its way).
func SameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}
