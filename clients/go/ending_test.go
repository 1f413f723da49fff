package idempotency_test

// Rules 17 to 20 of clients/README.md: a handler that ends its attempt
// itself through the *Attempt in its request's context, driven over HTTP.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// refused is the problem idem_http_response builds for the app's refusal.
var refused = map[string]any{"type": "about:blank", "title": "Unprocessable Content", "status": float64(422),
	"code": "InvalidAmount", "detail": "amount must be positive"}

// endingApp's handlers end their attempts themselves; each writes a row first.
type endingApp struct {
	namespace, table string
	pool             *pgxpool.Pool
	calls            sync.Map // key -> how often a handler ran for it (*int)
	mu               sync.Mutex
	stash            map[string]*idempotency.Attempt // attempts kept past their request
	seen             []string                        // what the broken handler's calls answered
}

// serveEnding starts the app over HTTP with its own namespace and table.
func serveEnding(t *testing.T) (*endingApp, string) {
	idem, pool := newClient(t)
	a := &endingApp{namespace: pgtest.Unique("ending"), pool: pool, stash: map[string]*idempotency.Attempt{}}
	a.table = "ending_" + a.namespace[len("ending-"):]
	pgtest.Exec(t, fmt.Sprintf("CREATE TABLE %s (idempotency_key text NOT NULL)", a.table))
	mw := idem.Middleware(a.namespace)
	mux := http.NewServeMux()
	mux.Handle("POST /refusals", mw(http.HandlerFunc(a.refuse)))
	mux.Handle("POST /releases", mw(http.HandlerFunc(a.release)))
	mux.Handle("POST /twice", mw(http.HandlerFunc(a.twice)))
	mux.Handle("POST /stash", mw(http.HandlerFunc(a.keep)))
	mux.Handle("POST /broken", mw(http.HandlerFunc(a.broken)))
	mux.HandleFunc("GET /late", a.late)
	return a, serve(t, mux).URL
}

// write inserts the handler's row in the claim's transaction and counts the run.
func (a *endingApp) write(w http.ResponseWriter, r *http.Request) (*idempotency.Attempt, int, bool) {
	attempt := idempotency.AttemptFromContext(r.Context())
	n, _ := a.calls.LoadOrStore(attempt.Key, new(int))
	*n.(*int)++
	if _, err := attempt.Tx.Exec(r.Context(), "INSERT INTO "+a.table+" VALUES ($1)", attempt.Key); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return nil, 0, false
	}
	return attempt, *n.(*int), true
}

// answer writes a JSON answer.
func answer(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// refuse records a refusal, then answers the status ?answer= names (400 by default).
func (a *endingApp) refuse(w http.ResponseWriter, r *http.Request) {
	attempt, _, ok := a.write(w, r)
	if !ok {
		return
	}
	err := attempt.FailPermanent(r.Context(), idempotency.StoredError{ClassTag: "InvalidAmount", Message: "amount must be positive"})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	status := 400
	if s := r.URL.Query().Get("answer"); s != "" {
		status, _ = strconv.Atoi(s)
	}
	answer(w, status, map[string]string{"refused": "by the handler"})
}

// release releases the key the first time per key (409), and answers 201 after.
func (a *endingApp) release(w http.ResponseWriter, r *http.Request) {
	attempt, n, ok := a.write(w, r)
	if !ok {
		return
	}
	if n == 1 {
		if err := attempt.FailTransient(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		answer(w, http.StatusConflict, map[string]string{"status": "busy"})
		return
	}
	answer(w, http.StatusCreated, map[string]string{"status": "done"})
}

// twice releases the key, then tries to refuse it too: refused.
func (a *endingApp) twice(w http.ResponseWriter, r *http.Request) {
	attempt := idempotency.AttemptFromContext(r.Context())
	if err := attempt.FailTransient(r.Context()); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	err := attempt.FailPermanent(r.Context(), idempotency.StoredError{ClassTag: "Twice", Message: "never recorded"})
	answer(w, http.StatusConflict, map[string]any{"finished": errors.Is(err, idempotency.ErrAttemptFinished),
		"error": fmt.Sprint(err)})
}

// keep keeps its attempt past the request, for GET /late.
func (a *endingApp) keep(w http.ResponseWriter, r *http.Request) {
	attempt := idempotency.AttemptFromContext(r.Context())
	a.mu.Lock()
	a.stash[attempt.Key] = attempt
	a.mu.Unlock()
	answer(w, http.StatusCreated, map[string]string{"stashed": attempt.Key})
}

// late ends an attempt whose answer was recorded already: refused.
func (a *endingApp) late(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	attempt := a.stash[r.URL.Query().Get("key")]
	a.mu.Unlock()
	err := attempt.FailTransient(r.Context())
	answer(w, http.StatusOK, map[string]any{"finished": errors.Is(err, idempotency.ErrAttemptFinished),
		"error": fmt.Sprint(err)})
}

// broken breaks its transaction, then tries both endings: the server
// answers each (the first did not end the attempt), and the 400 cannot be
// recorded.
func (a *endingApp) broken(w http.ResponseWriter, r *http.Request) {
	attempt := idempotency.AttemptFromContext(r.Context())
	_, _ = attempt.Tx.Exec(r.Context(), "SELECT 1/0")
	for _, err := range []error{
		attempt.FailPermanent(r.Context(), idempotency.StoredError{ClassTag: "Broken", Message: "never recorded"}),
		attempt.FailTransient(r.Context()),
	} {
		a.mu.Lock()
		a.seen = append(a.seen, fmt.Sprint(errors.Is(err, idempotency.ErrAttemptFinished), " ", sqlState(err)))
		a.mu.Unlock()
	}
	answer(w, http.StatusBadRequest, map[string]string{"broken": "yes"})
}

// sqlState is the SQLSTATE of a server's error inside err, or "".
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// state is idem_key_state's state of a key.
func (a *endingApp) state(t *testing.T, key string) string {
	var s string
	if err := a.pool.QueryRow(t.Context(), "SELECT state FROM idempotency.idem_key_state($1, $2)", a.namespace, key).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// rows counts a key's committed rows.
func (a *endingApp) rows(t *testing.T, key string) int {
	return pgtest.Count(t, "SELECT count(*) FROM "+a.table+" WHERE idempotency_key = $1", key)
}

// runs is how often a handler ran for a key.
func (a *endingApp) runs(key string) int {
	if n, ok := a.calls.Load(key); ok {
		return *n.(*int)
	}
	return 0
}

// TestHandlerRefuses (rule 18): after FailPermanent the first answer is the
// 422 every retry gets, not the handler's 400, committed with its write.
func TestHandlerRefuses(t *testing.T) {
	a, base := serveEnding(t)
	key := pgtest.Unique("refused")
	first := mustPost(t, base+"/refusals", key, `{"amount": -5}`)
	sameProblem(t, first, refused)
	if first.status != 422 || first.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("first answer: %d %v", first.status, first.header)
	}
	if s := a.state(t, key); s != "failed" || a.rows(t, key) != 1 {
		t.Fatalf("state %s, %d rows: the refusal and the handler's write commit together", s, a.rows(t, key))
	}
	again := mustPost(t, base+"/refusals", key, `{"amount": -5}`)
	if again.status != 422 || again.header.Get("Idempotency-Replayed") != "true" || string(again.body) != string(first.body) ||
		again.header.Get("Content-Type") != first.header.Get("Content-Type") {
		t.Fatalf("the retry: %d %v %s, the first: %s", again.status, again.header, again.body, first.body)
	}
	if a.runs(key) != 1 || a.rows(t, key) != 1 {
		t.Fatalf("%d runs, %d rows", a.runs(key), a.rows(t, key))
	}
}

// TestHandlerRefusesThen5xx (rule 18): a 5xx after FailPermanent rolls
// back, the refusal with it; the retry runs the handler again.
func TestHandlerRefusesThen5xx(t *testing.T) {
	a, base := serveEnding(t)
	key := pgtest.Unique("refused-5xx")
	for run := 1; run <= 2; run++ {
		r := mustPost(t, base+"/refusals?answer=503", key, `{"amount": -5}`)
		if r.status != 503 || string(r.body) != "{\"refused\":\"by the handler\"}\n" || r.header.Get("Idempotency-Replayed") != "" {
			t.Fatalf("run %d: %d %v %s", run, r.status, r.header, r.body)
		}
		if s := a.state(t, key); s != "absent" || a.rows(t, key) != 0 || a.runs(key) != run {
			t.Fatalf("run %d: state %s, %d rows, %d runs", run, s, a.rows(t, key), a.runs(key))
		}
	}
}

// TestHandlerReleases (rule 19): after FailTransient the handler's 409 is
// sent, nothing is recorded, its write is rolled back, and the retry runs
// the handler again.
func TestHandlerReleases(t *testing.T) {
	a, base := serveEnding(t)
	key := pgtest.Unique("released")
	first := mustPost(t, base+"/releases", key, `{}`)
	if first.status != 409 || string(first.body) != "{\"status\":\"busy\"}\n" || first.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("first: %d %v %s", first.status, first.header, first.body)
	}
	if s := a.state(t, key); s != "absent" || a.rows(t, key) != 0 {
		t.Fatalf("after the release: state %s, %d rows", s, a.rows(t, key))
	}
	retried := mustPost(t, base+"/releases", key, `{}`)
	if retried.status != 201 || retried.header.Get("Idempotency-Replayed") != "" || a.runs(key) != 2 {
		t.Fatalf("the retry: %d %v, %d runs", retried.status, retried.header, a.runs(key))
	}
	replay := mustPost(t, base+"/releases", key, `{}`)
	if replay.status != 201 || replay.header.Get("Idempotency-Replayed") != "true" || a.runs(key) != 2 || a.rows(t, key) != 1 {
		t.Fatalf("the replay: %d %v, %d runs, %d rows", replay.status, replay.header, a.runs(key), a.rows(t, key))
	}
}

// TestAttemptEndsOnce (rule 20): a second ending, and one after the
// middleware recorded the answer, are ErrAttemptFinished.
func TestAttemptEndsOnce(t *testing.T) {
	a, base := serveEnding(t)
	key := pgtest.Unique("twice")
	twice := mustPost(t, base+"/twice", key, `{}`)
	var got struct {
		Finished bool   `json:"finished"`
		Error    string `json:"error"`
	}
	must(t, json.Unmarshal(twice.body, &got))
	const message = "idempotency: the idempotency attempt is already finished: FailTransient ended it already (SQLSTATE 55000)"
	if twice.status != 409 || !got.Finished || got.Error != message {
		t.Fatalf("a second ending: %d %s", twice.status, twice.body)
	}
	if s := a.state(t, key); s != "absent" {
		t.Fatalf("state %s after a release", s)
	}
	key = pgtest.Unique("late")
	if r := mustPost(t, base+"/stash", key, `{}`); r.status != 201 {
		t.Fatalf("stash: %d %s", r.status, r.body)
	}
	late := send(t, http.MethodGet, base+"/late?key="+url.QueryEscape(key), "", "", "")
	must(t, json.Unmarshal(late.body, &got))
	if !got.Finished || got.Error != "idempotency: the idempotency attempt is already finished: "+
		"the middleware has finished it: the answer was recorded or rolled back with its transaction (SQLSTATE 55000)" {
		t.Fatalf("an ending after the answer: %s", late.body)
	}
	if s := a.state(t, key); s != "committed" {
		t.Fatalf("state %s", s)
	}
	if r := mustPost(t, base+"/stash", key, `{}`); r.status != 201 || r.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("the replay: %d %v", r.status, r.header)
	}
}

// TestEndingTheServerRefuses (rule 17): an ending the server refuses leaves
// the attempt open (the next call reaches the server too), and the answer
// cannot be recorded in the broken transaction: 500, nothing recorded.
func TestEndingTheServerRefuses(t *testing.T) {
	a, base := serveEnding(t)
	key := pgtest.Unique("broken")
	r := mustPost(t, base+"/broken", key, `{}`)
	sameProblem(t, r, storeError("about:blank"))
	if fmt.Sprint(a.seen) != "[false 25P02 false 25P02]" {
		t.Fatalf("the handler's calls answered %v", a.seen)
	}
	if s := a.state(t, key); s != "absent" {
		t.Fatalf("state %s", s)
	}
}
