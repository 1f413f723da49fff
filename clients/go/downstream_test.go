package idempotency_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
)

// fakeShipping is a downstream service that counts the calls it gets by
// Idempotency-Key and, as a real provider would, ships once per key.
type fakeShipping struct {
	mu    sync.Mutex
	calls map[string]int
}

func (s *fakeShipping) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	s.calls[key]++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"shipment": %q}`, "ship-"+key[:8])
}

// TestMintedDownstreamKey: the handler calls a downstream service with a
// key minted from the inbound one, so that the retry of a request that
// failed after the call sends the same key again: one shipment.
func TestMintedDownstreamKey(t *testing.T) {
	shipping := &fakeShipping{calls: map[string]int{}}
	downstream := serve(t, shipping)
	idem, _ := newClient(t)
	ns := pgtest.Unique("orders")
	table := "orders_" + ns[len("orders-"):]
	pgtest.Exec(t, "CREATE TABLE "+table+" (shipment text NOT NULL)")
	var failAfterCall atomic.Bool
	failAfterCall.Store(true)

	ship := func(w http.ResponseWriter, r *http.Request) {
		attempt := idempotency.AttemptFromContext(r.Context())
		// The same inbound key gives the same downstream key, in every process.
		key, err := idempotency.Mint("shipments", attempt.Key)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, downstream.URL+"/shipments", nil)
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		if _, err := attempt.Tx.Exec(r.Context(), "INSERT INTO "+table+" VALUES ($1)", key); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if failAfterCall.Swap(false) { // the first attempt dies after the downstream call
			http.Error(w, "lost after the call", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}
	srv := serve(t, idem.Middleware(ns)(http.HandlerFunc(ship)))

	inbound := pgtest.Unique("checkout")
	if r := mustPost(t, srv.URL, inbound, `{"cart": 1}`); r.status != 503 {
		t.Fatalf("first attempt: %d", r.status)
	}
	if r := mustPost(t, srv.URL, inbound, `{"cart": 1}`); r.status != 201 {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	if r := mustPost(t, srv.URL, inbound, `{"cart": 1}`); r.status != 201 || r.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replay: %d", r.status)
	}
	var want string
	must(t, pgtest.Pool(t).QueryRow(context.Background(), "SELECT idempotency.idem_mint('shipments', ARRAY[$1])",
		inbound).Scan(&want))
	if len(shipping.calls) != 1 || shipping.calls[want] != 2 {
		t.Fatalf("downstream calls by key %v, want 2 under %s", shipping.calls, want)
	}
	if n := pgtest.Count(t, "SELECT count(*) FROM "+table+" WHERE shipment = $1", want); n != 1 {
		t.Fatalf("%d orders", n)
	}
	// Another inbound key is another shipment.
	mustPost(t, srv.URL, pgtest.Unique("checkout"), `{"cart": 1}`)
	if len(shipping.calls) != 2 || strings.Contains(fmt.Sprint(shipping.calls), inbound) {
		t.Fatalf("downstream calls by key %v", shipping.calls)
	}
}

// TestCommitFails: the database connection dies after the handler's work,
// before the record: 503, nothing kept, and the retry succeeds.
func TestCommitFails(t *testing.T) {
	idem, _ := newClient(t)
	app := newPaymentsApp(t)
	var kill atomic.Bool
	kill.Store(true)
	h := func(w http.ResponseWriter, r *http.Request) {
		tx := idempotency.TxFromContext(r.Context())
		var pid int
		if err := tx.QueryRow(r.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if _, err := tx.Exec(r.Context(), "INSERT INTO "+app.table+" (amount, currency) VALUES (1, 'EUR')"); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if kill.Swap(false) {
			pgtest.Exec(t, "SELECT pg_terminate_backend($1)", pid)
		}
		w.WriteHeader(http.StatusCreated)
	}
	srv := serve(t, idem.Middleware(app.namespace, idempotency.OnError(func(*http.Request, error) {}))(http.HandlerFunc(h)))
	key := pgtest.Unique("order")
	if r := mustPost(t, srv.URL, key, `{}`); r.status != 503 || problemCode(t, r) != "IDEMPOTENCY_STORE_UNAVAILABLE" {
		t.Fatalf("lost connection: %d %s", r.status, r.body)
	}
	// The terminated backend may still hold the key for a moment: honour the 409 as a client does.
	if r := retryWhileInFlight(t, srv.URL, key, `{}`); r.status != 201 || r.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	if n := app.rows(t); n != 1 {
		t.Fatalf("%d rows", n)
	}
}
