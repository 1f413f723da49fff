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

// block is the code block of docs/quickstart.md after <!-- quickstart: name -->.
func block(t *testing.T, name string) string {
	t.Helper()
	guide, err := os.ReadFile("../../../../docs/quickstart.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- quickstart: " + regexp.QuoteMeta(name) + " -->\n```[a-z]*\n(.*?)```").FindSubmatch(guide)
	if m == nil {
		t.Fatalf("docs/quickstart.md has no block after <!-- quickstart: %s -->", name)
	}
	return string(m[1])
}

// TestQuickstartShowsThisProgram: the guide's Go block is this program, whole.
func TestQuickstartShowsThisProgram(t *testing.T) {
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if block(t, "go") != string(program) {
		t.Error("docs/quickstart.md's Go block differs from example/quickstart/main.go")
	}
}

// TestQuickstart: the guide's table (the extension is there already), then
// the program's answers to a client that retries.
func TestQuickstart(t *testing.T) {
	schema := strings.Replace(block(t, "schema"), "CREATE EXTENSION idempotency;", "", 1)
	pgtest.Exec(t, "DROP TABLE IF EXISTS payments; "+schema)
	srv := httptest.NewServer(routes(pgtest.Pool(t)))
	defer srv.Close()
	url := srv.URL + "/payments"
	key := pgtest.Unique("quickstart")
	first := pgtest.Post(t, url, key, `{"amount": 100, "currency": "EUR"}`)
	again := pgtest.Post(t, url, `"`+key+`"`, `{"amount": 100, "currency": "EUR"}`)
	if first.Status != 201 || again.Status != 201 || again.Header.Get("Idempotency-Replayed") != "true" ||
		!pgtest.SameJSON(first.Body, again.Body) || again.Header.Get("Location") != first.Header.Get("Location") {
		t.Fatalf("first %d %v %s, again %d %v %s", first.Status, first.Header, first.Body, again.Status, again.Header, again.Body)
	}
	if other := pgtest.Post(t, url, key, `{"amount": 999, "currency": "EUR"}`); other.Status != 422 ||
		!strings.Contains(other.Body, "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST") {
		t.Errorf("the key reused: %d %s", other.Status, other.Body)
	}
	if none := pgtest.Post(t, url, "", `{"amount": 100, "currency": "EUR"}`); none.Status != 400 {
		t.Errorf("no key: %d %s", none.Status, none.Body)
	}
	refused := pgtest.Unique("refused")
	no := pgtest.Post(t, url, refused, `{"amount": 0, "currency": "EUR"}`)
	noAgain := pgtest.Post(t, url, refused, `{"amount": 0, "currency": "EUR"}`)
	if no.Status != 422 || !strings.Contains(no.Body, "InvalidAmount") || noAgain.Status != 422 ||
		noAgain.Header.Get("Idempotency-Replayed") != "true" || !pgtest.SameJSON(no.Body, noAgain.Body) {
		t.Errorf("a refusal: %d %s, again %d %v %s", no.Status, no.Body, noAgain.Status, noAgain.Header, noAgain.Body)
	}
	if n := pgtest.Count(t, "SELECT count(*) FROM payments"); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
}
