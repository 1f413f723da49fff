package idempotency_test

// The numbered rules of clients/README.md's "The HTTP middleware" that the
// other tests leave out: each test names its rule.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
)

// storeError is rule 16's 500 body, with the service's docs as its type.
func storeError(docs string) map[string]any {
	return map[string]any{"type": docs, "title": "Internal Server Error", "status": float64(500),
		"code": "IDEMPOTENCY_STORE_ERROR", "detail": "The idempotency store refused the request; nothing was recorded."}
}

// problemBody decodes a problem body, failing t unless it is one.
func problemBody(t *testing.T, r response) map[string]any {
	t.Helper()
	var p map[string]any
	if r.header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(r.body, &p) != nil {
		t.Fatalf("not a problem: %d %v %s", r.status, r.header, r.body)
	}
	return p
}

// sameProblem fails t unless the body is exactly want.
func sameProblem(t *testing.T, r response, want map[string]any) {
	t.Helper()
	got := problemBody(t, r)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("problem %v, want %v", got, want)
	}
}

// send makes one request with a method, a key ("" for none) and a Content-Type.
func send(t *testing.T, method, url, key, contentType, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	must(t, err)
	req.GetBody = nil
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return response{resp.StatusCode, resp.Header, b}
}

// TestMethodsCovered (rule 1): POST and PATCH by default; other methods
// pass through without the store; Methods names others.
func TestMethodsCovered(t *testing.T) {
	idem, _ := newClient(t)
	ns := pgtest.Unique("methods")
	keyed := func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"keyed": %t}`, idempotency.TxFromContext(r.Context()) != nil)
	}
	srv := serve(t, idem.Middleware(ns)(http.HandlerFunc(keyed)))
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		if r := send(t, method, srv.URL, "", "", ""); r.status != 200 || string(r.body) != `{"keyed": false}` {
			t.Fatalf("%s without a key: %d %s", method, r.status, r.body)
		}
	}
	for _, method := range []string{http.MethodPost, http.MethodPatch} {
		if r := send(t, method, srv.URL, "", "", ""); r.status != 400 {
			t.Fatalf("%s without a key: %d %s", method, r.status, r.body)
		}
	}
	puts := serve(t, idem.Middleware(ns, idempotency.Methods("PUT"))(http.HandlerFunc(keyed)))
	if r := send(t, http.MethodPut, puts.URL, "", "", ""); r.status != 400 {
		t.Fatalf("PUT without a key under Methods(PUT): %d", r.status)
	}
	if r := send(t, http.MethodPut, puts.URL, pgtest.Unique("k"), "", ""); r.status != 200 || string(r.body) != `{"keyed": true}` {
		t.Fatalf("PUT with a key: %d %s", r.status, r.body)
	}
	if r := send(t, http.MethodPost, puts.URL, "", "", ""); r.status != 200 {
		t.Fatalf("POST under Methods(PUT): %d", r.status)
	}
}

// TestBodyReadFirst (rule 4): the body is read before anything else, so a
// body over the service's limit is a 413 even without a key.
func TestBodyReadFirst(t *testing.T) {
	idem, _ := newClient(t)
	mw := idem.Middleware(pgtest.Unique("limit"), idempotency.DocsURI("https://example.com/idem"))
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 10)
		mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) })).ServeHTTP(w, r)
	}))
	r := send(t, http.MethodPost, srv.URL, "", "text/plain", strings.Repeat("x", 11))
	if r.status != 413 || r.header.Get("Link") != `<https://example.com/idem>; rel="describedby"` {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
	sameProblem(t, r, map[string]any{"type": "https://example.com/idem", "title": "Content Too Large",
		"status": float64(413), "code": "REQUEST_BODY_TOO_LARGE", "detail": "The request body is larger than 10 bytes."})
}

// TestJSONOnlyWhenDeclared (rule 7): JSON text sent as text/plain is bytes,
// fingerprinted by their SHA-256; under a +json type it is JSON.
func TestJSONOnlyWhenDeclared(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	srv := serve(t, app.routes(idem))
	key := pgtest.Unique("plain")
	if r, err := post(t, srv.URL+"/notes", key, "text/plain", `{"a": 1}`); err != nil || r.status != 200 {
		t.Fatalf("%v %v", r, err)
	}
	var fp string
	must(t, pgtest.Pool(t).QueryRow(context.Background(), `SELECT request_payload->'body'->>'sha256'
		FROM idempotency.idempotency_record WHERE key_value = $1`, key).Scan(&fp))
	if sum := sha256.Sum256([]byte(`{"a": 1}`)); fp != hex.EncodeToString(sum[:]) {
		t.Fatalf("sha256 %q", fp)
	}
	if r, _ := post(t, srv.URL+"/notes", key, "text/plain", `{ "a":1 }`); r.status != 422 {
		t.Fatalf("other bytes as text/plain: %d", r.status)
	}
	key = pgtest.Unique("declared")
	post(t, srv.URL+"/notes", key, "application/merge-patch+json", `{"a": 1}`)
	if r, _ := post(t, srv.URL+"/notes", key, "application/merge-patch+json", `{ "a":1 }`); r.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("the same JSON: %d %v", r.status, r.header)
	}
}

// TestEmptyAndNullBodies (rules 11, 12): no body replays as none, the JSON
// null as null, both under a JSON Content-Type.
func TestEmptyAndNullBodies(t *testing.T) {
	idem, _ := newClient(t)
	ns := pgtest.Unique("bodies")
	for _, body := range []string{"", "null"} {
		srv := serve(t, idem.Middleware(ns)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, body)
		})))
		key := pgtest.Unique("k")
		first := mustPost(t, srv.URL, key, `{}`)
		again := mustPost(t, srv.URL, key, `{}`)
		if first.status != 201 || string(first.body) != body || again.status != 201 ||
			again.header.Get("Idempotency-Replayed") != "true" || string(again.body) != body ||
			again.header.Get("Content-Type") != "application/json" {
			t.Fatalf("body %q: first %d %q, again %d %v %q", body, first.status, first.body, again.status, again.header, again.body)
		}
	}
}

// TestJSONTypeOverOtherBody (rule 11): it is not recorded: a 500, the
// handler's write rolled back.
func TestJSONTypeOverOtherBody(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	srv := serve(t, idem.Middleware(app.namespace)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := idempotency.TxFromContext(r.Context()).Exec(r.Context(),
			"INSERT INTO "+app.table+" (amount, currency) VALUES (1, 'EUR')")
		must(t, err)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "{not json")
	})))
	r := mustPost(t, srv.URL, pgtest.Unique("k"), `{}`)
	if r.status != 500 || app.rows(t) != 0 {
		t.Fatalf("%d %s, %d rows", r.status, r.body, app.rows(t))
	}
	sameProblem(t, r, storeError("about:blank"))
}

// TestReplayAddsNoHeader (rule 12): a result without a Content-Type
// replays without one.
func TestReplayAddsNoHeader(t *testing.T) {
	idem, pool := newClient(t)
	ns := pgtest.Unique("foreign")
	key := pgtest.Unique("k")
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	must(t, err)
	o, err := idem.Begin(ctx, tx, ns, key, map[string]any{"method": "POST", "target": "/", "body": nil})
	must(t, err)
	must(t, idem.Commit(ctx, tx, ns, key, map[string]any{"status": 200, "headers": map[string]string{}, "body": map[string]int{"a": 1}}, o.Fence))
	must(t, tx.Commit(ctx))
	srv := serve(t, idem.Middleware(ns)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("ran") })))
	r := send(t, http.MethodPost, srv.URL, key, "", "")
	if r.status != 200 || r.header.Get("Idempotency-Replayed") != "true" || r.header.Get("Content-Type") != "" ||
		!pgtest.SameJSON(string(r.body), `{"a": 1}`) {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
}

// TestStoreFailures (rules 13 to 16): a deferred constraint at COMMIT is a
// 500, a serialization failure there a 503 with Retry-After at least 1.
func TestStoreFailures(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	uniques, failures := app.table+"_uniques", app.table+"_failures"
	pgtest.Exec(t, "CREATE TABLE "+uniques+" (v text UNIQUE DEFERRABLE INITIALLY DEFERRED)")
	pgtest.Exec(t, "CREATE TABLE "+failures+" (v text)")
	pgtest.Exec(t, `CREATE OR REPLACE FUNCTION fail_serialization() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001'; END$$`)
	pgtest.Exec(t, "CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON "+failures+
		" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_serialization()")
	write := func(sql string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx := idempotency.TxFromContext(r.Context())
			_, err := tx.Exec(r.Context(), "INSERT INTO "+app.table+" (amount, currency) VALUES (1, 'EUR')")
			must(t, err)
			_, err = tx.Exec(r.Context(), sql)
			must(t, err)
			w.WriteHeader(http.StatusCreated)
		})
	}
	quiet := idempotency.OnError(func(*http.Request, error) {})
	conflict := serve(t, idem.Middleware(app.namespace, quiet, idempotency.DocsURI("https://example.com/idem"))(
		write("INSERT INTO "+uniques+" VALUES ('twice'), ('twice')")))
	r := mustPost(t, conflict.URL, pgtest.Unique("k"), `{}`)
	if r.status != 500 || r.header.Get("Link") != `<https://example.com/idem>; rel="describedby"` || app.rows(t) != 0 {
		t.Fatalf("conflict: %d %v %s, %d rows", r.status, r.header, r.body, app.rows(t))
	}
	sameProblem(t, r, storeError("https://example.com/idem"))
	busy := serve(t, idem.Middleware(app.namespace, quiet, idempotency.RetryAfter(0))(
		write("INSERT INTO "+failures+" VALUES ('x')")))
	r = mustPost(t, busy.URL, pgtest.Unique("k"), `{}`)
	if r.status != 503 || r.header.Get("Retry-After") != "1" || app.rows(t) != 0 {
		t.Fatalf("serialization failure: %d %v %s", r.status, r.header, r.body)
	}
	sameProblem(t, r, map[string]any{"type": "about:blank", "title": "Service Unavailable", "status": float64(503),
		"code":   "IDEMPOTENCY_STORE_UNAVAILABLE",
		"detail": "The idempotency store cannot be reached. Retry the request with the same Idempotency-Key."})
}

// TestTemplates (rule 6): every router's parameter syntax becomes {name}.
func TestTemplates(t *testing.T) {
	for pattern, want := range map[string]string{
		"/payments/{id}/refunds":      "/payments/{id}/refunds",
		"/files/{path...}":            "/files/{path}",
		"/{$}":                        "/",
		"/items/{id:[0-9]+}":          "/items/{id}",
		"/payments/:id/refunds":       "/payments/{id}/refunds",
		"/static/*filepath":           "/static/{filepath}",
		"/static/*":                   "/static/{*}",
		"/a/{x:[a-z]{2}}/b":           "/a/{x}/b",
		"/orders/:order/lines/:line/": "/orders/{order}/lines/{line}/",
	} {
		if got := idempotency.Template(pattern); got != want {
			t.Errorf("Template(%q) = %q, want %q", pattern, got, want)
		}
	}
}
