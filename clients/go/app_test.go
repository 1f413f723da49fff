package idempotency_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// paymentsApp is a small service on net/http: POST /payments writes a row
// of its table in the middleware's transaction and answers 201.
type paymentsApp struct {
	namespace string
	table     string
	calls     atomic.Int32     // how often a handler ran
	entered   chan string      // told the key when a handler is about to wait (if set)
	release   chan struct{}    // closed to let a waiting handler go on (if set)
	fail      atomic.Int32     // this many handler runs answer 500 after their write
	panics    atomic.Int32     // this many handler runs panic after their write
	hang      func(key string) // called after the write: the killed process waits here
}

// newPaymentsApp creates the app's table and its namespace's name.
func newPaymentsApp(t testing.TB) *paymentsApp {
	a := &paymentsApp{namespace: pgtest.Unique("payments")}
	a.table = "payments_" + a.namespace[len("payments-"):]
	pgtest.Exec(t, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (id bigserial PRIMARY KEY, amount numeric NOT NULL,
		currency text NOT NULL, idempotency_key text)`, a.table))
	return a
}

// routes is the app's mux: every route made idempotent by the middleware.
func (a *paymentsApp) routes(idem *idempotency.Client, opts ...idempotency.Option) *http.ServeMux {
	mw := idem.Middleware(a.namespace, opts...)
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw(http.HandlerFunc(a.createPayment)))
	mux.Handle("POST /payments/{id}/refunds", mw(http.HandlerFunc(a.createPayment)))
	mux.Handle("POST /notes", mw(http.HandlerFunc(a.echoNote)))
	return mux
}

// createPayment is an ordinary handler: its writes go to the transaction
// the middleware put in the request's context.
func (a *paymentsApp) createPayment(w http.ResponseWriter, r *http.Request) {
	a.calls.Add(1)
	attempt := idempotency.AttemptFromContext(r.Context())
	var req struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if req.Amount <= 0 {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"code": "InvalidAmount", "status": 422, "detail": "amount must be positive, not %d"}`, req.Amount)
		return
	}
	var id int64
	err := attempt.Tx.QueryRow(r.Context(), fmt.Sprintf(
		"INSERT INTO %s (amount, currency, idempotency_key) VALUES ($1, $2, $3) RETURNING id", a.table),
		req.Amount, req.Currency, attempt.Key).Scan(&id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if a.entered != nil {
		a.entered <- attempt.Key
		<-a.release
	}
	if a.hang != nil {
		a.hang(attempt.Key)
	}
	if a.fail.Add(-1) >= 0 {
		http.Error(w, "the provider failed", http.StatusBadGateway)
		return
	}
	if a.panics.Add(-1) >= 0 {
		panic("the handler broke after its write")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/payments/%d", id))
	w.Header().Set("X-Not-Replayed", "1")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"payment_id": %d, "amount": %d}`, id, req.Amount)
}

// echoNote answers plain text: a body that is recorded as base64.
func (a *paymentsApp) echoNote(w http.ResponseWriter, r *http.Request) {
	a.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "note %d: %s\x00\xff", a.calls.Load(), body)
}

// rows counts the app's committed payments.
func (a *paymentsApp) rows(t testing.TB) int {
	return pgtest.Count(t, "SELECT count(*) FROM "+a.table)
}

// serve starts the app as a real HTTP server, closed when t ends.
func serve(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panicking handler's stack
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// response is what a real HTTP client got.
type response struct {
	status int
	header http.Header
	body   []byte
}

// post sends one request; header "" sends no Idempotency-Key.
func post(t testing.TB, url, key, contentType, body string) (response, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("Content-Type", contentType)
	req.GetBody = nil // net/http's client retries a request with an Idempotency-Key on its own: the tests retry themselves
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, b}, err
}

// mustPost is post that fails t on a transport error.
func mustPost(t testing.TB, url, key, body string) response {
	t.Helper()
	r, err := post(t, url, key, "application/json", body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// problemCode is the "code" of a problem body.
func problemCode(t testing.TB, r response) string {
	t.Helper()
	if r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("status %d, Content-Type %q: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var p struct {
		Code   string `json:"code"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	if p.Status != r.status {
		t.Fatalf("problem status %d on a %d", p.Status, r.status)
	}
	return p.Code
}

// newClient is a Client on this binary's database.
func newClient(t testing.TB) (*idempotency.Client, *pgxpool.Pool) {
	pool := pgtest.Pool(t)
	return idempotency.New(pool), pool
}
