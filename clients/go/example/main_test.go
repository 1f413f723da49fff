package main

import (
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestExample: the README's service, run: one payment for two requests.
func TestExample(t *testing.T) {
	pgtest.Exec(t, "CREATE TABLE payments (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())")
	srv := httptest.NewServer(routes(pgtest.Pool(t)))
	defer srv.Close()
	first := pgtest.Post(t, srv.URL+"/payments", "order-1001", `{"amount": 100}`)
	again := pgtest.Post(t, srv.URL+"/payments", `"order-1001"`, `{"amount": 100}`)
	if first.Status != 201 || again.Status != 201 || again.Header.Get("Idempotency-Replayed") != "true" ||
		!pgtest.SameJSON(first.Body, again.Body) || pgtest.Count(t, "SELECT count(*) FROM payments") != 1 {
		t.Fatalf("first %d %s, again %d %v %s", first.Status, first.Body, again.Status, again.Header, again.Body)
	}
	if other := pgtest.Post(t, srv.URL+"/payments", "order-1001", `{"amount": 999}`); other.Status != 422 {
		t.Fatalf("reused key: %d", other.Status)
	}
}

// TestReadmeShowsExample: the README's example is a part of this program, verbatim.
func TestReadmeShowsExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)<!-- example/main.go -->\n```go\n(.*?)```").FindSubmatch(readme)
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if block == nil || len(block[1]) < 200 || !strings.Contains(string(program), string(block[1])) {
		t.Fatal("README.md's example is not a part of example/main.go: copy it into the block after <!-- example/main.go -->")
	}
}
