package idempotency_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestSameRequestTwice: one effect; the retry gets the first answer again,
// marked as a replay, whichever form of the header it sends.
func TestSameRequestTwice(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	srv := serve(t, app.routes(idem))
	key := pgtest.Unique("order")
	body := `{"amount": 100, "currency": "EUR"}`

	first := mustPost(t, srv.URL+"/payments", key, body)
	if first.status != 201 || first.header.Get("Idempotency-Replayed") != "" || first.header.Get("X-Not-Replayed") != "1" {
		t.Fatalf("first: %d %v %s", first.status, first.header, first.body)
	}
	for _, header := range []string{key, `"` + key + `"`} { // bare (Stripe) and quoted (the IETF draft): one key
		again := mustPost(t, srv.URL+"/payments", header, `{"currency": "EUR", "amount": 100}`)
		if again.status != 201 || again.header.Get("Idempotency-Replayed") != "true" ||
			again.header.Get("Location") != first.header.Get("Location") || again.header.Get("X-Not-Replayed") != "" ||
			again.header.Get("Content-Type") != "application/json" {
			t.Fatalf("replay: %d %v %s", again.status, again.header, again.body)
		}
		sameJSON(t, "replayed body", again.body, first.body)
	}
	if n := app.rows(t); n != 1 || app.calls.Load() != 1 {
		t.Fatalf("%d rows, %d handler runs", n, app.calls.Load())
	}
	// The fingerprint holds the route template, not the path.
	var target string
	err := pgtest.Pool(t).QueryRow(context.Background(), `SELECT request_payload->>'target' FROM idempotency.idempotency_record
		WHERE namespace = $1 AND key_value = $2`, app.namespace, key).Scan(&target)
	must(t, err)
	if target != "/payments" {
		t.Fatalf("target %q", target)
	}
}

// TestTwoAtOnce: while the first request runs, the second gets 409 with
// Retry-After; then the first answers 201.
func TestTwoAtOnce(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	app.entered, app.release = make(chan string, 1), make(chan struct{})
	srv := serve(t, app.routes(idem))
	key := pgtest.Unique("order")
	body := `{"amount": 5, "currency": "EUR"}`

	var first response
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		first = mustPost(t, srv.URL+"/payments", key, body)
	}()
	<-app.entered
	second := mustPost(t, srv.URL+"/payments", key, body)
	close(app.release)
	wg.Wait()
	if second.status != 409 || second.header.Get("Retry-After") != "1" ||
		problemCode(t, second) != "IDEMPOTENCY_REQUEST_IN_PROGRESS" {
		t.Fatalf("second: %d %v %s", second.status, second.header, second.body)
	}
	if first.status != 201 || app.rows(t) != 1 {
		t.Fatalf("first: %d %s; %d rows", first.status, first.body, app.rows(t))
	}
}

// TestServerErrorAndPanicRecordNothing: a 5xx and a panic roll the claim
// back with the handler's write; the retry runs the handler and succeeds.
func TestServerErrorAndPanicRecordNothing(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	srv := serve(t, app.routes(idem))
	body := `{"amount": 7, "currency": "EUR"}`

	key := pgtest.Unique("order")
	app.fail.Store(1)
	failed := mustPost(t, srv.URL+"/payments", key, body)
	if failed.status != 502 || !strings.Contains(string(failed.body), "the provider failed") || app.rows(t) != 0 {
		t.Fatalf("5xx: %d %s, %d rows", failed.status, failed.body, app.rows(t))
	}
	// The claim was released before the answer was sent: a retry at once finds the key free.
	if n := pgtest.Count(t, "SELECT count(*) FROM idempotency.idem_key_state($1, $2) WHERE state <> 'absent'",
		app.namespace, key); n != 0 {
		t.Fatalf("the key is still held after the 5xx was sent")
	}
	retry := mustPost(t, srv.URL+"/payments", key, body)
	if retry.status != 201 || retry.header.Get("Idempotency-Replayed") != "" || app.rows(t) != 1 {
		t.Fatalf("retry after a 5xx: %d %s, %d rows", retry.status, retry.body, app.rows(t))
	}

	key = pgtest.Unique("order")
	app.panics.Store(1)
	if r, err := post(t, srv.URL+"/payments", key, "application/json", body); err == nil {
		t.Fatalf("a panic answered %d %s", r.status, r.body) // net/http drops the connection
	}
	retry = mustPost(t, srv.URL+"/payments", key, body)
	if retry.status != 201 || app.rows(t) != 2 || app.calls.Load() != 4 {
		t.Fatalf("retry after a panic: %d %s, %d rows, %d runs", retry.status, retry.body, app.rows(t), app.calls.Load())
	}
}

// TestReusedKey: another body, or the same body on another route, under a
// recorded key is a 422 problem; nothing runs.
func TestReusedKey(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	srv := serve(t, app.routes(idem, idempotency.DocsURI("https://example.com/docs/idempotency")))
	key := pgtest.Unique("order")
	mustPost(t, srv.URL+"/payments", key, `{"amount": 100, "currency": "EUR"}`)

	for _, c := range []struct{ path, body string }{
		{"/payments", `{"amount": 999, "currency": "EUR"}`},
		{"/payments/42/refunds", `{"amount": 100, "currency": "EUR"}`},
	} {
		r := mustPost(t, srv.URL+c.path, key, c.body)
		if r.status != 422 || problemCode(t, r) != "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST" ||
			!strings.Contains(r.header.Get("Link"), "https://example.com/docs/idempotency") ||
			strings.Contains(string(r.body), "999") {
			t.Fatalf("%s: %d %v %s", c.path, r.status, r.header, r.body)
		}
	}
	if app.calls.Load() != 1 || app.rows(t) != 1 {
		t.Fatalf("%d runs, %d rows", app.calls.Load(), app.rows(t))
	}
}

// TestRouteTemplate: the fingerprint's target is the ServeMux pattern's
// path, so one key on /payments/1/refunds and /payments/2/refunds is one
// request (a replay), not a mismatch.
func TestRouteTemplate(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	srv := serve(t, app.routes(idem))
	key := pgtest.Unique("refund")
	first := mustPost(t, srv.URL+"/payments/1/refunds", key, `{"amount": 3, "currency": "EUR"}`)
	second := mustPost(t, srv.URL+"/payments/2/refunds", key, `{"amount": 3, "currency": "EUR"}`)
	if first.status != 201 || second.status != 201 || second.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("%d, %d %v", first.status, second.status, second.header)
	}
	// A middleware around the whole mux finds the pattern with RouteOf.
	mux := app.routes(idem)
	whole := serve(t, idem.Middleware(app.namespace, idempotency.Route(idempotency.RouteOf(mux)))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"target": %q}`, r.URL.Path)
		})))
	key = pgtest.Unique("whole")
	mustPost(t, whole.URL+"/payments/9/refunds", key, `{}`)
	var target string
	must(t, pgtest.Pool(t).QueryRow(context.Background(), `SELECT request_payload->>'target'
		FROM idempotency.idempotency_record WHERE key_value = $1`, key).Scan(&target))
	if target != "/payments/{id}/refunds" {
		t.Fatalf("target %q", target)
	}
}

// TestKeyMissingOrMalformed: 400 from idem_http_key; the handler never runs.
func TestKeyMissingOrMalformed(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	srv := serve(t, app.routes(idem))
	body := `{"amount": 1, "currency": "EUR"}`
	for header, code := range map[string]string{
		"":                                   "MISSING_IDEMPOTENCY_KEY",
		`"open`:                              "INVALID_IDEMPOTENCY_KEY",
		"a, b":                               "INVALID_IDEMPOTENCY_KEY",
		`"k";x=1`:                            "INVALID_IDEMPOTENCY_KEY",
		`"` + strings.Repeat("k", 256) + `"`: "INVALID_IDEMPOTENCY_KEY",
	} {
		r := mustPost(t, srv.URL+"/payments", header, body)
		if r.status != 400 || problemCode(t, r) != code {
			t.Fatalf("header %q: %d %s", header, r.status, r.body)
		}
	}
	// Two fields are joined as a proxy joins them: more than one value.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
	req.Header.Add("Idempotency-Key", `"a"`)
	req.Header.Add("Idempotency-Key", `"b"`)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 400 || app.calls.Load() != 0 {
		t.Fatalf("two fields: %d; %d runs", resp.StatusCode, app.calls.Load())
	}
}

// TestClientErrorRecorded: a 4xx the handler answers is recorded and
// replayed; RecordStatus can leave it out.
func TestClientErrorRecorded(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	srv := serve(t, app.routes(idem))
	key := pgtest.Unique("order")
	first := mustPost(t, srv.URL+"/payments", key, `{"amount": -5, "currency": "EUR"}`)
	again := mustPost(t, srv.URL+"/payments", key, `{"amount": -5, "currency": "EUR"}`)
	if first.status != 422 || again.status != 422 || again.header.Get("Idempotency-Replayed") != "true" ||
		problemCode(t, again) != "InvalidAmount" || app.calls.Load() != 1 {
		t.Fatalf("%d, %d %v %s; %d runs", first.status, again.status, again.header, again.body, app.calls.Load())
	}

	only2xx := serve(t, app.routes(idem, idempotency.RecordStatus(func(s int) bool { return s < 300 })))
	key = pgtest.Unique("order")
	mustPost(t, only2xx.URL+"/payments", key, `{"amount": -5, "currency": "EUR"}`)
	again = mustPost(t, only2xx.URL+"/payments", key, `{"amount": -5, "currency": "EUR"}`)
	if again.status != 422 || again.header.Get("Idempotency-Replayed") != "" || app.calls.Load() != 3 {
		t.Fatalf("not recorded: %d %v; %d runs", again.status, again.header, app.calls.Load())
	}
}

// TestNonJSONBodies: a body that is not JSON is fingerprinted by its
// SHA-256, and a response that is not JSON replays byte for byte.
func TestNonJSONBodies(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	srv := serve(t, app.routes(idem))
	key := pgtest.Unique("note")
	first, err := post(t, srv.URL+"/notes", key, "text/plain", "hello\n")
	must(t, err)
	again, err := post(t, srv.URL+"/notes", key, "text/plain", "hello\n")
	must(t, err)
	if first.status != 200 || again.header.Get("Idempotency-Replayed") != "true" ||
		string(again.body) != string(first.body) || again.header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("first %q, replay %d %v %q", first.body, again.status, again.header, again.body)
	}
	other, err := post(t, srv.URL+"/notes", key, "text/plain", "hello")
	must(t, err)
	if other.status != 422 {
		t.Fatalf("another text body: %d", other.status)
	}
	var fp string
	must(t, pgtest.Pool(t).QueryRow(context.Background(), `SELECT request_payload->'body'->>'sha256'
		FROM idempotency.idempotency_record WHERE key_value = $1`, key).Scan(&fp))
	if sum := sha256.Sum256([]byte("hello\n")); fp != hex.EncodeToString(sum[:]) {
		t.Fatalf("sha256 %q", fp)
	}
}

// TestHandlerOwnsNothing: the handler cannot end the middleware's
// transaction; without a key on an optional route it runs without one.
func TestHandlerOwnsNothing(t *testing.T) {
	idem, _ := newClient(t)
	ns := pgtest.Unique("misc")
	var commitErr error
	var hadTx bool
	h := func(w http.ResponseWriter, r *http.Request) {
		tx := idempotency.TxFromContext(r.Context())
		hadTx = tx != nil
		if tx != nil {
			commitErr = tx.Commit(r.Context())
		}
		w.WriteHeader(http.StatusNoContent)
	}
	srv := serve(t, idem.Middleware(ns, idempotency.HeaderOptional())(http.HandlerFunc(h)))
	r := mustPost(t, srv.URL, pgtest.Unique("k"), `{}`)
	if r.status != 204 || !hadTx || !errors.Is(commitErr, idempotency.ErrTxOwned) {
		t.Fatalf("%d, tx %v, commit %v", r.status, hadTx, commitErr)
	}
	r = mustPost(t, srv.URL, "", `{}`)
	if r.status != 204 || hadTx {
		t.Fatalf("optional header: %d, tx %v", r.status, hadTx)
	}
	r = mustPost(t, srv.URL, `"bad`, `{}`)
	if r.status != 400 {
		t.Fatalf("optional but malformed: %d", r.status)
	}
}

// TestDatabaseUnreachable: 503 with a problem body and Retry-After; the
// handler never runs (fail closed).
func TestDatabaseUnreachable(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "host=127.0.0.1 port=1 dbname=nowhere connect_timeout=2")
	must(t, err)
	defer pool.Close()
	ran := false
	var reported error
	idem := idempotency.New(pool)
	srv := serve(t, idem.Middleware("payments", idempotency.RetryAfter(3),
		idempotency.OnError(func(_ *http.Request, err error) { reported = err }))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })))
	r := mustPost(t, srv.URL, "k-1", `{}`)
	if r.status != 503 || r.header.Get("Retry-After") != "3" || problemCode(t, r) != "IDEMPOTENCY_STORE_UNAVAILABLE" ||
		ran || reported == nil {
		t.Fatalf("%d %v %s, ran %v, reported %v", r.status, r.header, r.body, ran, reported)
	}

	// The server going away between two requests: the pool's next connect fails too.
	name, err := pgtest.Create(context.Background(), "idem_go_gone")
	must(t, err)
	gone, err := pgxpool.New(context.Background(), pgtest.ConnString(name))
	must(t, err)
	defer gone.Close()
	app := newPaymentsApp(t)
	srv = serve(t, app.routes(idempotency.New(gone), idempotency.OnError(func(*http.Request, error) {})))
	must(t, pgtest.Drop(context.Background(), name))
	r = mustPost(t, srv.URL+"/payments", "k-2", `{"amount": 1, "currency": "EUR"}`)
	if r.status != 503 || app.calls.Load() != 0 {
		t.Fatalf("dropped database: %d %s; %d runs", r.status, r.body, app.calls.Load())
	}
}

// TestSlowHolderWithWait: with an in-flight wait the second request waits
// for the first and replays it instead of a 409.
func TestSlowHolderWithWait(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	app.entered, app.release = make(chan string, 1), make(chan struct{})
	srv := serve(t, app.routes(idem, idempotency.BeginOptions(idempotency.InFlightWait(10*time.Second))))
	key := pgtest.Unique("order")
	body := `{"amount": 5, "currency": "EUR"}`
	done := make(chan response)
	go func() { done <- mustPost(t, srv.URL+"/payments", key, body) }()
	<-app.entered
	go func() { time.Sleep(200 * time.Millisecond); close(app.release) }()
	second := mustPost(t, srv.URL+"/payments", key, body)
	first := <-done
	if first.status != 201 || second.status != 201 || second.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("first %d, second %d %v", first.status, second.status, second.header)
	}
	sameJSON(t, "waited replay", second.body, first.body)
}
