package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Option configures the middleware.
type Option func(*config)

type config struct {
	methods       []string
	docsURI       string
	optional      bool
	record        func(status int) bool
	replayHeaders []string
	route         func(*http.Request) string
	retryAfter    int
	txOptions     pgx.TxOptions
	begin         []BeginOption
	onError       func(*http.Request, error)
}

// Methods names the methods whose requests need a key (default: POST and
// PATCH); a request of another method passes through, without the store.
func Methods(methods ...string) Option {
	return func(c *config) {
		c.methods = nil
		for _, m := range methods {
			c.methods = append(c.methods, strings.ToUpper(m))
		}
	}
}

// DocsURI names the service's documentation of its idempotency problems:
// it becomes their "type" and a Link header (idem_http_key, idem_http_response).
func DocsURI(uri string) Option { return func(c *config) { c.docsURI = uri } }

// HeaderOptional runs the handler without the store (and without a
// transaction) when a request has no Idempotency-Key; a malformed one is
// still a 400.
func HeaderOptional() Option { return func(c *config) { c.optional = true } }

// RecordStatus says which statuses below 500 are recorded and replayed
// (default: 2xx and 4xx). A 5xx is never recorded. A response not recorded
// rolls the transaction back, the handler's writes with it.
func RecordStatus(record func(status int) bool) Option {
	return func(c *config) { c.record = record }
}

// ReplayHeaders names the response headers recorded and replayed
// (default: Content-Type and Location). Keep Content-Type: a replay reads
// from it whether the recorded body is JSON or base64.
func ReplayHeaders(names ...string) Option {
	return func(c *config) { c.replayHeaders = names }
}

// Route gives the route template a request matched (for chi, echo or gin);
// by default it is the path of r.Pattern (Go 1.22 ServeMux), else the
// request's path.
func Route(template func(*http.Request) string) Option {
	return func(c *config) { c.route = template }
}

// RetryAfter is the Retry-After, in seconds, of a 409 while a request is in
// flight without a lease (default 1), and of a 503 (at least 1); zero or
// more.
func RetryAfter(seconds int) Option { return func(c *config) { c.retryAfter = seconds } }

// TxOptions sets the isolation level and access mode of the transaction.
func TxOptions(o pgx.TxOptions) Option { return func(c *config) { c.txOptions = o } }

// BeginOptions passes options (ReplayWindow, InFlightWait) to every idem_begin.
func BeginOptions(opts ...BeginOption) Option { return func(c *config) { c.begin = opts } }

// OnError is told every error the middleware answers with a 500 or 503
// (default: slog.ErrorContext).
func OnError(report func(*http.Request, error)) Option {
	return func(c *config) { c.onError = report }
}

// Attempt is what the middleware gives the handler it runs, in the
// request's context: the transaction that holds the claim, and the claim.
// The handler may end it itself, once, with FailPermanent or FailTransient
// (clients/README.md, rules 17 to 20).
type Attempt struct {
	Tx        pgx.Tx // do the handler's writes here; the middleware commits or rolls back
	Namespace string
	Key       string  // the Idempotency-Key, checked and trimmed
	Outcome   Outcome // the fresh outcome: Fence, Attempt, Takeover, RecoveryPoint

	client  *Client
	mu      sync.Mutex
	ended   ending
	refusal StoredError // what FailPermanent recorded
}

// ending is how the handler ended its attempt; over once the middleware finished it.
type ending int

const (
	open ending = iota
	refused
	released
	over
)

// ErrAttemptFinished is what FailPermanent and FailTransient return once the
// attempt has ended: a second call, or a call after the middleware finished
// it (the other packages' SQLSTATE 55000). Nothing reaches the server.
var ErrAttemptFinished = errors.New("idempotency: the idempotency attempt is already finished")

// FailPermanent refuses the request for good: idem_fail_permanent with the
// claim's fence, in its transaction. The middleware then commits, the
// handler's writes with the refusal, and answers the 422 problem every retry
// gets (built by idem_http_response), whatever the handler answers below
// 500; a 5xx or a panic rolls everything back.
func (a *Attempt) FailPermanent(ctx context.Context, e StoredError) error {
	if err := a.start(refused, e); err != nil {
		return err
	}
	if err := a.client.FailPermanent(ctx, a.Tx, a.Namespace, a.Key, e, a.Outcome.Fence); err != nil {
		a.undo()
		return err
	}
	return nil
}

// FailTransient releases the key: idem_fail_transient with the claim's
// fence. The middleware then sends the handler's answer after a rollback:
// nothing is recorded, the handler's writes are undone, and a retry runs
// the handler again.
func (a *Attempt) FailTransient(ctx context.Context) error {
	if err := a.start(released, StoredError{}); err != nil {
		return err
	}
	if err := a.client.FailTransient(ctx, a.Tx, a.Namespace, a.Key, a.Outcome.Fence); err != nil {
		a.undo()
		return err
	}
	return nil
}

// start takes the handler's one ending before its call reaches the server
// (rule 20): ErrAttemptFinished when it was taken, or the middleware is done.
func (a *Attempt) start(how ending, e StoredError) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client == nil {
		return errors.New("idempotency: this Attempt is not the middleware's: take it from AttemptFromContext")
	}
	switch a.ended {
	case refused:
		return fmt.Errorf("%w: FailPermanent ended it already (SQLSTATE 55000)", ErrAttemptFinished)
	case released:
		return fmt.Errorf("%w: FailTransient ended it already (SQLSTATE 55000)", ErrAttemptFinished)
	case over:
		return fmt.Errorf("%w: the middleware has finished it: "+
			"the answer was recorded or rolled back with its transaction (SQLSTATE 55000)", ErrAttemptFinished)
	}
	a.ended, a.refusal = how, e
	return nil
}

// undo leaves the attempt open after the server refused the call (rule
// 17), unless the middleware finished it meanwhile.
func (a *Attempt) undo() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended != over {
		a.ended, a.refusal = open, StoredError{}
	}
}

// close is the middleware's, once the handler is done: how the handler
// ended the attempt, and its refusal; no call may end it after.
func (a *Attempt) close() (ending, StoredError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	how := a.ended
	a.ended = over
	return how, a.refusal
}

type attemptKey struct{}

// AttemptFromContext returns the attempt the middleware runs the handler
// for, or nil outside the middleware (or with HeaderOptional and no key).
func AttemptFromContext(ctx context.Context) *Attempt {
	a, _ := ctx.Value(attemptKey{}).(*Attempt)
	return a
}

// TxFromContext returns the middleware's transaction, or nil when there is none.
func TxFromContext(ctx context.Context) pgx.Tx {
	if a := AttemptFromContext(ctx); a != nil {
		return a.Tx
	}
	return nil
}

// ErrTxOwned is what Commit and Rollback answer on the middleware's
// transaction: the middleware ends it, after recording the response.
var ErrTxOwned = errors.New("idempotency: the middleware commits or rolls back this transaction")

// ownedTx is the middleware's transaction as the handler sees it.
type ownedTx struct{ pgx.Tx }

// Commit is refused: the middleware commits after recording the response.
func (ownedTx) Commit(context.Context) error { return ErrTxOwned }

// Rollback is refused: a 5xx or a panic makes the middleware roll back.
func (ownedTx) Rollback(context.Context) error { return ErrTxOwned }

// Middleware makes a handler idempotent in namespace, as clients/README.md
// specifies: a request with an Idempotency-Key runs the handler once,
// inside the transaction of its claim; its retries get the recorded
// response. It panics when namespace is invalid, RetryAfter is negative, or
// the Client has no DB.
func (c *Client) Middleware(namespace string, opts ...Option) func(http.Handler) http.Handler {
	if err := ValidateNamespace(namespace); err != nil {
		panic(err)
	}
	if c.db == nil {
		panic("idempotency: Middleware needs a Client made with New(pool)")
	}
	cfg := config{
		methods:       []string{http.MethodPost, http.MethodPatch},
		record:        func(s int) bool { return s >= 200 && s < 300 || s >= 400 && s < 500 },
		replayHeaders: []string{"Content-Type", "Location"},
		route:         RouteTemplate,
		retryAfter:    1,
		onError: func(r *http.Request, err error) {
			slog.ErrorContext(r.Context(), "idempotency middleware", "method", r.Method, "path", r.URL.Path, "error", err)
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.retryAfter < 0 {
		panic(fmt.Sprintf("idempotency: RetryAfter is zero or more seconds, not %d", cfg.retryAfter))
	}
	return func(next http.Handler) http.Handler {
		return &middleware{client: c, namespace: namespace, cfg: cfg, next: next}
	}
}

type middleware struct {
	client    *Client
	namespace string
	cfg       config
	next      http.Handler
}

// RouteTemplate is the default route: the path part of the ServeMux
// pattern the request matched ("POST /payments/{id}" gives
// "/payments/{id}"; "/files/{path...}" gives "/files/{path}"), or the
// request's path when none matched.
func RouteTemplate(r *http.Request) string {
	if r.Pattern == "" {
		return r.URL.Path
	}
	return Template(patternPath(r.Pattern))
}

// RouteOf is the route of a ServeMux that the middleware wraps as a whole
// (where r.Pattern is not set yet): the pattern mux would match.
func RouteOf(mux *http.ServeMux) func(*http.Request) string {
	return func(r *http.Request) string {
		if _, pattern := mux.Handler(r); pattern != "" {
			return Template(patternPath(pattern))
		}
		return r.URL.Path
	}
}

// Template writes each parameter of a router's route pattern {name}, as
// every client package does (clients/README.md, rule 6): ServeMux's
// {path...} and {$}, chi's {id:[0-9]+} and *, Echo's and Gin's :id and
// *path give {path}, {id}, {*}; "/{$}" is "/".
func Template(pattern string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); {
		switch c := pattern[i]; {
		case c == '{':
			end, depth := i+1, 1 // the matching brace: a chi pattern may hold braces of its own
			for ; end < len(pattern) && depth > 0; end++ {
				switch pattern[end] {
				case '{':
					depth++
				case '}':
					depth--
				}
			}
			inner := pattern[i+1 : end-1]
			if name, _, _ := strings.Cut(inner, ":"); inner == "$" {
				// ServeMux's end of path: nothing
			} else {
				b.WriteString("{" + strings.TrimSuffix(name, "...") + "}")
			}
			i = end
		case (c == ':' || c == '*') && (i == 0 || pattern[i-1] == '/'):
			end := i + 1
			for end < len(pattern) && pattern[end] != '/' {
				end++
			}
			name := pattern[i+1 : end]
			if name == "" {
				name = "*"
			}
			b.WriteString("{" + name + "}")
			i = end
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// patternPath drops a ServeMux pattern's method and host.
func patternPath(p string) string {
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		p = strings.TrimLeft(p[i:], " \t")
	}
	if i := strings.IndexByte(p, '/'); i > 0 {
		p = p[i:]
	}
	return p
}

// ServeHTTP is the middleware's one behaviour: check the key, claim it
// with the request's fingerprint, answer a replay or run the handler in
// the claim's transaction, and record what it answered.
func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !slices.Contains(m.cfg.methods, r.Method) {
		m.next.ServeHTTP(w, r)
		return
	}
	var header *string
	if values := r.Header.Values("Idempotency-Key"); len(values) > 0 {
		joined := strings.Join(values, ", ") // as a proxy joins repeated fields: the server refuses it
		header = &joined
	} else if m.cfg.optional {
		m.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body) // before anything is asked of the store (rule 4)
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		m.problem(w, http.StatusRequestEntityTooLarge, "Content Too Large", "REQUEST_BODY_TOO_LARGE",
			fmt.Sprintf("The request body is larger than %d bytes.", tooLarge.Limit))
		return
	} else if err != nil {
		m.problem(w, http.StatusBadRequest, "Bad Request", "UNREADABLE_REQUEST_BODY", "The request body could not be read.")
		return
	}
	key, refusal, err := m.client.HTTPKey(ctx, m.client.db, m.namespace, header, m.cfg.docsURI)
	if err != nil {
		m.fail(w, r, err)
		return
	}
	if refusal != nil {
		writeServerResponse(w, *refusal)
		return
	}

	tx, err := m.client.db.BeginTx(ctx, m.cfg.txOptions)
	if err != nil {
		m.fail(w, r, err)
		return
	}
	finished := false
	rollback := func() { // before any answer is sent: a retry that follows at once finds the key free
		if !finished {
			finished = true
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}
	defer rollback() // when the handler panics: the claim goes with the work
	a := beginArguments(m.cfg.begin)
	rows, err := tx.Query(ctx, "SELECT "+outcomeColumns+", r.status AS http_status, r.headers AS http_headers, "+
		"r.body AS http_body FROM idempotency.idem_begin($1::text, $2::text, jsonb_build_object('method', $3::text, "+
		"'target', $4::text, 'body', $5::jsonb), $6::interval, $7::interval) o LEFT JOIN LATERAL "+
		"idempotency.idem_http_response(CASE WHEN o.kind <> 'fresh' THEN o END, $8::integer, $9::text) r ON true",
		m.namespace, key, r.Method, m.cfg.route(r), fingerprintBody(r.Header.Get("Content-Type"), body),
		a.replayWindow, a.inFlightWait,
		m.cfg.retryAfter, nullIfEmpty(m.cfg.docsURI))
	var row outcomeRow
	if err == nil {
		row, err = pgx.CollectExactlyOneRow(rows, scanOutcome)
	}
	if err == nil && row.out.Kind != Fresh && row.httpStatus == nil {
		err = fmt.Errorf("idem_http_response answered no status for a %s outcome", row.out.Kind)
	}
	if err != nil {
		rollback()
		m.fail(w, r, opError("idem_begin", m.namespace, err))
		return
	}
	if row.out.Kind != Fresh {
		rollback()
		writeServerResponse(w, HTTPResponse{Status: int(*row.httpStatus), Header: row.httpHeaders, Body: row.httpBody})
		return
	}

	rec := &recorder{header: http.Header{}}
	attempt := &Attempt{Tx: ownedTx{tx}, Namespace: m.namespace, Key: key, Outcome: row.out, client: m.client}
	defer attempt.close() // when the handler panics: no ending after it
	inner := r.WithContext(context.WithValue(ctx, attemptKey{}, attempt))
	inner.Body = io.NopCloser(bytes.NewReader(body))
	inner.ContentLength = int64(len(body))
	m.next.ServeHTTP(rec, inner)
	rec.finish()
	ended, stored := attempt.close()

	if ended == released || rec.status >= 500 || ended == open && !m.cfg.record(rec.status) {
		rollback() // the claim and the handler's writes go back
		rec.sendTo(w)
		return
	}
	var refusalAnswer *HTTPResponse
	if ended == refused { // rule 18: the 422 a retry gets, which the server builds
		o := Outcome{Kind: PriorError, Error: &stored, SubmittedHash: row.out.SubmittedHash}
		var resp HTTPResponse
		if resp, err = m.client.HTTPResponse(ctx, tx, o, m.cfg.retryAfter, m.cfg.docsURI); err == nil {
			for name := range resp.Header {
				if http.CanonicalHeaderKey(name) == "Idempotency-Replayed" { // the first answer is no replay
					delete(resp.Header, name)
				}
			}
			refusalAnswer = &resp
		}
	} else {
		var result recordedResponse
		if result, err = rec.result(m.cfg.replayHeaders); err == nil {
			err = m.client.Commit(ctx, tx, m.namespace, key, result, row.out.Fence)
		}
	}
	if err != nil {
		rollback()
		m.fail(w, r, err)
		return
	}
	finished = true // a COMMIT ends the transaction, whether it succeeds or fails
	if err := tx.Commit(ctx); err != nil {
		m.fail(w, r, fmt.Errorf("idempotency: COMMIT: %w", err))
		return
	}
	if refusalAnswer != nil {
		writeServerResponse(w, *refusalAnswer)
		return
	}
	rec.sendTo(w)
}

// fingerprintBody is the body as the request fingerprint holds it, as JSON
// text (rule 7): the JSON itself under a JSON Content-Type, {"sha256": hex}
// for anything else, SQL NULL (the JSON null) for none.
func fingerprintBody(contentType string, body []byte) any {
	if len(body) == 0 {
		return nil
	}
	if isJSONMediaType(contentType) && json.Valid(body) {
		return string(body)
	}
	sum := sha256.Sum256(body)
	return `{"sha256": "` + hex.EncodeToString(sum[:]) + `"}`
}

// fail answers an error that kept the middleware from its work (rules 14
// and 15): 503 when the database cannot be reached or is briefly unable
// (the client may retry), else 500. The handler has not run, or its work
// was rolled back; nothing was recorded.
func (m *middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	m.cfg.onError(r, err)
	if unavailable(err) {
		w.Header().Set("Retry-After", strconv.Itoa(max(m.cfg.retryAfter, 1)))
		m.problem(w, http.StatusServiceUnavailable, "Service Unavailable", "IDEMPOTENCY_STORE_UNAVAILABLE",
			"The idempotency store cannot be reached. Retry the request with the same Idempotency-Key.")
		return
	}
	m.problem(w, http.StatusInternalServerError, "Internal Server Error", "IDEMPOTENCY_STORE_ERROR",
		"The idempotency store refused the request; nothing was recorded.")
}

// errNotRecordable is rule 11's refusal: a response whose Content-Type is
// JSON and whose body is not, which no replay could give back.
var errNotRecordable = errors.New("idempotency: the response is not recorded: " +
	"its Content-Type is JSON and its body is not JSON")

// unavailable tells a database that cannot be reached (a connection that
// fails, no answer: network, timeout) or answers that it cannot serve now
// (connection, resources, shutdown, serialization or deadlock, read-only):
// rule 13.
func unavailable(err error) bool {
	if connectErr := (*pgconn.ConnectError)(nil); errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return !errors.Is(err, ErrIncompatibleServer) && !errors.Is(err, errNotRecordable)
	}
	switch {
	case strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "53"),
		strings.HasPrefix(pgErr.Code, "57P"), strings.HasPrefix(pgErr.Code, "40"), pgErr.Code == "25006":
		return true
	}
	return false
}

// problem writes an RFC 9457 problem built here (rule 16): only for answers
// the server cannot give (it cannot be reached, or the request never got there).
func (m *middleware) problem(w http.ResponseWriter, status int, title, code, detail string) {
	p := map[string]any{"type": "about:blank", "title": title, "status": status, "code": code, "detail": detail}
	if m.cfg.docsURI != "" {
		p["type"] = m.cfg.docsURI
		w.Header().Set("Link", "<"+m.cfg.docsURI+`>; rel="describedby"`)
	}
	b, _ := json.Marshal(p)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeServerResponse sends a response idem_http_key or idem_http_response
// built (rule 12): its headers and status as they are, and its body: none
// for a recorded "", the JSON under a JSON content type, the bytes of a
// base64 string under another or none, else the JSON.
func writeServerResponse(w http.ResponseWriter, resp HTTPResponse) {
	for k, v := range resp.Header {
		w.Header().Set(k, v)
	}
	var body []byte
	if len(resp.Body) > 0 && string(resp.Body) != `""` {
		body = resp.Body
		var encoded string
		if !isJSONMediaType(w.Header().Get("Content-Type")) && json.Unmarshal(resp.Body, &encoded) == nil {
			if raw, err := base64.StdEncoding.DecodeString(encoded); err == nil {
				body = raw
			}
		}
	}
	if len(body) > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if _, ok := w.Header()["Content-Type"]; !ok {
			w.Header()["Content-Type"] = nil // none recorded: net/http would sniff one
		}
	}
	w.WriteHeader(resp.Status)
	if len(body) > 0 {
		_, _ = w.Write(body)
	}
}

// isJSONMediaType tells application/json and any type with a +json suffix.
func isJSONMediaType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// recorder buffers the handler's response until it is recorded (or not)
// and the transaction has ended: nothing reaches the client before.
type recorder struct {
	header http.Header
	sent   http.Header // the headers as they were when the status was written
	status int
	body   bytes.Buffer
}

// Header is the handler's response header, until the status is written.
func (r *recorder) Header() http.Header { return r.header }

// WriteHeader keeps the first final status; 1xx interim responses are dropped.
func (r *recorder) WriteHeader(status int) {
	if r.status != 0 || status < 200 {
		return
	}
	r.status = status
	r.sent = r.header.Clone()
}

// Write buffers the body (status 200 when none was written).
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// finish settles what net/http would have sent: 200 when nothing was
// written, and a sniffed Content-Type for a body without one.
func (r *recorder) finish() {
	r.WriteHeader(http.StatusOK)
	if r.body.Len() > 0 && r.sent.Get("Content-Type") == "" {
		r.sent.Set("Content-Type", http.DetectContentType(r.body.Bytes()))
	}
}

// recordedResponse is what the middleware records with idem_commit.
type recordedResponse struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    any               `json:"body"`
}

// result is the response as recorded (rule 11): the status, the replayed
// headers, and the body ("" for none, the JSON under a JSON content type,
// else base64); errNotRecordable for a JSON content type over a body that
// is not JSON.
func (r *recorder) result(replay []string) (recordedResponse, error) {
	res := recordedResponse{Status: r.status, Headers: map[string]string{}}
	for _, name := range replay {
		if v := r.sent.Values(name); len(v) > 0 {
			res.Headers[http.CanonicalHeaderKey(name)] = strings.Join(v, ", ")
		}
	}
	b := r.body.Bytes()
	switch {
	case len(b) == 0:
		res.Body = ""
	case isJSONMediaType(r.sent.Get("Content-Type")):
		if !json.Valid(b) {
			return res, errNotRecordable
		}
		res.Body = json.RawMessage(b)
	default:
		res.Body = base64.StdEncoding.EncodeToString(b)
	}
	return res, nil
}

// sendTo writes the buffered response to the client.
func (r *recorder) sendTo(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.sent {
		h[k] = v
	}
	if h.Get("Content-Length") == "" && r.body.Len() > 0 {
		h.Set("Content-Length", strconv.Itoa(r.body.Len()))
	}
	w.WriteHeader(r.status)
	if r.body.Len() > 0 {
		_, _ = w.Write(r.body.Bytes())
	}
}
