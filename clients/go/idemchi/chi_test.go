package idemchi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"
	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/idemchi"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// refunds is a chi handler writing a row in the middleware's transaction;
// it fails with a 500 while failures are left.
type refunds struct {
	table    string
	failures atomic.Int32
	runs     atomic.Int32
}

func newRefunds(t *testing.T) *refunds {
	h := &refunds{table: "refunds_" + pgtest.Unique("t")[2:]}
	pgtest.Exec(t, "CREATE TABLE "+h.table+" (payment text)")
	return h
}

func (h *refunds) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.runs.Add(1)
	tx := idempotency.TxFromContext(r.Context())
	if _, err := tx.Exec(r.Context(), "INSERT INTO "+h.table+" VALUES ($1)", chi.URLParam(r, "id")); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if h.failures.Add(-1) >= 0 {
		http.Error(w, "failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"refund_of": %q}`, chi.URLParam(r, "id"))
}

func (h *refunds) rows(t *testing.T) int { return pgtest.Count(t, "SELECT count(*) FROM "+h.table) }

// serve starts a real HTTP server, closed when t ends.
func serve(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRouterLevel: r.Use on the root router runs before routing; the
// template is still chi's pattern, a 5xx records nothing, a replay is marked.
func TestRouterLevel(t *testing.T) {
	idem := idempotency.New(pgtest.Pool(t))
	ns := pgtest.Unique("refunds")
	h := newRefunds(t)
	r := chi.NewRouter()
	r.Use(idemchi.Middleware(idem, ns))
	r.Post("/payments/{id}/refunds", h.ServeHTTP)
	url := serve(t, r)
	key := pgtest.Unique("k")

	h.failures.Store(1)
	if got := pgtest.Post(t, url+"/payments/7/refunds", key, `{}`); got.Status != 500 || h.rows(t) != 0 {
		t.Fatalf("5xx: %d, %d rows", got.Status, h.rows(t))
	}
	first := pgtest.Post(t, url+"/payments/7/refunds", key, `{}`)
	again := pgtest.Post(t, url+"/payments/8/refunds", key, `{}`) // the same route template: the same request
	if first.Status != 201 || again.Status != 201 || again.Header.Get("Idempotency-Replayed") != "true" ||
		!pgtest.SameJSON(again.Body, `{"refund_of": "7"}`) || h.rows(t) != 1 || h.runs.Load() != 2 {
		t.Fatalf("first %d %s, again %d %v %s, %d rows", first.Status, first.Body, again.Status, again.Header, again.Body, h.rows(t))
	}
	if target := pgtest.Target(t, ns, key); target != "/payments/{id}/refunds" {
		t.Fatalf("target %q", target)
	}
	if got := pgtest.Post(t, url+"/payments/7/refunds", "", `{}`); got.Status != 400 {
		t.Fatalf("no key: %d", got.Status)
	}
}

// TestMountedWith: r.With on a route of a mounted subrouter, after routing.
func TestMountedWith(t *testing.T) {
	idem := idempotency.New(pgtest.Pool(t))
	ns := pgtest.Unique("refunds")
	h := newRefunds(t)
	api := chi.NewRouter()
	api.With(idemchi.Middleware(idem, ns)).Post("/payments/{id}/refunds", h.ServeHTTP)
	api.Get("/payments/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	jobs := chi.NewRouter() // r.Use in a mounted router: before its routing
	jobs.Use(idemchi.Middleware(idem, ns))
	jobs.Post("/{job}/runs", h.ServeHTTP)
	root := chi.NewRouter()
	root.Mount("/api", api)
	root.Mount("/jobs", jobs)
	url := serve(t, root)
	key := pgtest.Unique("k")
	if got := pgtest.Post(t, url+"/api/payments/3/refunds", key, `{"amount": 1}`); got.Status != 201 {
		t.Fatalf("%d %s", got.Status, got.Body)
	}
	if target := pgtest.Target(t, ns, key); target != "/api/payments/{id}/refunds" {
		t.Fatalf("target %q", target)
	}
	if got := pgtest.Post(t, url+"/api/payments/3/refunds", key, `{"amount": 2}`); got.Status != 422 {
		t.Fatalf("reused key: %d", got.Status)
	}
	jobKey := pgtest.Unique("k")
	if got := pgtest.Post(t, url+"/jobs/nightly/runs", jobKey, `{}`); got.Status != 201 {
		t.Fatalf("job: %d %s", got.Status, got.Body)
	}
	if target := pgtest.Target(t, ns, jobKey); target != "/jobs/{job}/runs" {
		t.Fatalf("job target %q", target)
	}
	resp, err := http.Get(url + "/api/payments/3") // not wrapped: no key needed
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestPatternSyntax (rule 6): chi's {id:[0-9]+} and * are written {id} and {*}.
func TestPatternSyntax(t *testing.T) {
	idem := idempotency.New(pgtest.Pool(t))
	ns := pgtest.Unique("refunds")
	h := newRefunds(t)
	r := chi.NewRouter()
	r.Use(idemchi.Middleware(idem, ns))
	r.Post("/payments/{id:[0-9]+}/refunds", h.ServeHTTP)
	r.Post("/files/*", h.ServeHTTP)
	url := serve(t, r)
	for path, want := range map[string]string{"/payments/12/refunds": "/payments/{id}/refunds", "/files/a/b": "/files/{*}"} {
		key := pgtest.Unique("k")
		if got := pgtest.Post(t, url+path, key, `{}`); got.Status != 201 {
			t.Fatalf("%s: %d %s", path, got.Status, got.Body)
		}
		if target := pgtest.Target(t, ns, key); target != want {
			t.Fatalf("%s: target %q, want %q", path, target, want)
		}
	}
}
