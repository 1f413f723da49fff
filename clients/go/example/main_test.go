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
	pgtest.Exec(t, "DROP TABLE IF EXISTS payments; CREATE TABLE payments (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())")
	srv := httptest.NewServer(routes(pgtest.Pool(t)))
	defer srv.Close()
	key := pgtest.Unique("order")
	first := pgtest.Post(t, srv.URL+"/payments", key, `{"amount": 100}`)
	again := pgtest.Post(t, srv.URL+"/payments", `"`+key+`"`, `{"amount": 100}`)
	if first.Status != 201 || again.Status != 201 || again.Header.Get("Idempotency-Replayed") != "true" ||
		!pgtest.SameJSON(first.Body, again.Body) || pgtest.Count(t, "SELECT count(*) FROM payments") != 1 {
		t.Fatalf("first %d %s, again %d %v %s", first.Status, first.Body, again.Status, again.Header, again.Body)
	}
	if other := pgtest.Post(t, srv.URL+"/payments", key, `{"amount": 999}`); other.Status != 422 {
		t.Fatalf("reused key: %d", other.Status)
	}
}

// TestReadmeShowsExamples: each code block of the README that names a
// program is a part of it, verbatim (those programs compile and run here).
func TestReadmeShowsExamples(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, program := range []string{"example/main.go", "example_test.go"} {
		block := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(program) + " -->\n```go\n(.*?)```").FindSubmatch(readme)
		text, err := os.ReadFile("../" + program)
		if err != nil {
			t.Fatal(err)
		}
		if block == nil || len(block[1]) < 200 || !strings.Contains(flush(string(text)), flush(string(block[1]))) {
			t.Errorf("README.md's block after <!-- %s --> is not a part of %s", program, program)
		}
	}
}

// flush drops the indentation of every line: a block may be shown dedented.
func flush(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, "\t")
	}
	return strings.Join(lines, "\n")
}
