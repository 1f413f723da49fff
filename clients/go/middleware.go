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
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Option configures the middleware.
type Option func(*config)

type config struct {
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
// flight without a lease, and of a 503 (default 1).
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
type Attempt struct {
	Tx        pgx.Tx // do the handler's writes here; the middleware commits or rolls back
	Namespace string
	Key       string  // the Idempotency-Key, checked and trimmed
	Outcome   Outcome // the fresh outcome: Fence, Attempt, Takeover, RecoveryPoint
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
// response. It panics when namespace is invalid or the Client has no DB.
func (c *Client) Middleware(namespace string, opts ...Option) func(http.Handler) http.Handler {
	if err := ValidateNamespace(namespace); err != nil {
		panic(err)
	}
	if c.db == nil {
		panic("idempotency: Middleware needs a Client made with New(pool)")
	}
	cfg := config{
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
// "/payments/{id}"), or the request's path when none matched.
func RouteTemplate(r *http.Request) string {
	if r.Pattern == "" {
		return r.URL.Path
	}
	return patternPath(r.Pattern)
}

// RouteOf is the route of a ServeMux that the middleware wraps as a whole
// (where r.Pattern is not set yet): the pattern mux would match.
func RouteOf(mux *http.ServeMux) func(*http.Request) string {
	return func(r *http.Request) string {
		if _, pattern := mux.Handler(r); pattern != "" {
			return patternPath(pattern)
		}
		return r.URL.Path
	}
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
	var header *string
	if values := r.Header.Values("Idempotency-Key"); len(values) > 0 {
		joined := strings.Join(values, ", ") // as a proxy joins repeated fields: the server refuses it
		header = &joined
	} else if m.cfg.optional {
		m.next.ServeHTTP(w, r)
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
	body, err := io.ReadAll(r.Body)
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		m.problem(w, http.StatusRequestEntityTooLarge, "REQUEST_BODY_TOO_LARGE",
			fmt.Sprintf("The request body is larger than %d bytes.", tooLarge.Limit))
		return
	} else if err != nil {
		m.problem(w, http.StatusBadRequest, "UNREADABLE_REQUEST_BODY", "The request body could not be read.")
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
		m.namespace, key, r.Method, m.cfg.route(r), fingerprintBody(body), a.replayWindow, a.inFlightWait,
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
	attempt := &Attempt{Tx: ownedTx{tx}, Namespace: m.namespace, Key: key, Outcome: row.out}
	inner := r.WithContext(context.WithValue(ctx, attemptKey{}, attempt))
	inner.Body = io.NopCloser(bytes.NewReader(body))
	inner.ContentLength = int64(len(body))
	m.next.ServeHTTP(rec, inner)
	rec.finish()

	if rec.status >= 500 || !m.cfg.record(rec.status) {
		rollback() // the claim and the handler's writes go back
		rec.sendTo(w)
		return
	}
	if err := m.client.Commit(ctx, tx, m.namespace, key, rec.result(m.cfg.replayHeaders), row.out.Fence); err != nil {
		rollback()
		m.fail(w, r, err)
		return
	}
	finished = true // a COMMIT ends the transaction, whether it succeeds or fails
	if err := tx.Commit(ctx); err != nil {
		m.fail(w, r, fmt.Errorf("idempotency: COMMIT: %w", err))
		return
	}
	rec.sendTo(w)
}

// fingerprintBody is the body as the request fingerprint holds it, as JSON
// text: the JSON itself, {"sha256": hex} for anything else, SQL NULL for none.
func fingerprintBody(body []byte) any {
	if len(body) == 0 {
		return nil
	}
	if json.Valid(body) {
		return string(body)
	}
	sum := sha256.Sum256(body)
	return `{"sha256": "` + hex.EncodeToString(sum[:]) + `"}`
}

// fail answers an error that kept the middleware from its work: 503 when
// the database cannot be reached or is briefly unable (the client may
// retry), else 500. The handler has not run, or its work was rolled back.
func (m *middleware) fail(w http.ResponseWriter, r *http.Request, err error) {
	m.cfg.onError(r, err)
	if unavailable(err) {
		w.Header().Set("Retry-After", strconv.Itoa(m.cfg.retryAfter))
		m.problem(w, http.StatusServiceUnavailable, "IDEMPOTENCY_STORE_UNAVAILABLE",
			"The idempotency store cannot be reached; the request was not processed. Retry it with the same Idempotency-Key.")
		return
	}
	m.problem(w, http.StatusInternalServerError, "IDEMPOTENCY_STORE_ERROR",
		"The idempotency store refused the request; it was not processed.")
}

// unavailable tells a database that cannot be reached (a connection that
// fails, no answer: network, timeout) or answers that it cannot serve now
// (connection, resources, shutdown, serialization or deadlock, read-only).
func unavailable(err error) bool {
	if connectErr := (*pgconn.ConnectError)(nil); errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return !errors.Is(err, ErrIncompatibleServer)
	}
	switch {
	case strings.HasPrefix(pgErr.Code, "08"), strings.HasPrefix(pgErr.Code, "53"),
		strings.HasPrefix(pgErr.Code, "57P"), strings.HasPrefix(pgErr.Code, "40"), pgErr.Code == "25006":
		return true
	}
	return false
}

// problem writes an RFC 9457 problem built here: only for answers the
// server cannot give (it cannot be reached, or the request never got there).
func (m *middleware) problem(w http.ResponseWriter, status int, code, detail string) {
	p := map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status,
		"code": code, "detail": detail}
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
// built: its headers, status, and body (JSON under a JSON content type, or
// the bytes of a recorded base64 string under another).
func writeServerResponse(w http.ResponseWriter, resp HTTPResponse) {
	for k, v := range resp.Header {
		w.Header().Set(k, v)
	}
	var body []byte
	if len(resp.Body) > 0 && string(resp.Body) != "null" {
		body = resp.Body
		contentType := w.Header().Get("Content-Type")
		var encoded string
		switch {
		case contentType == "":
			w.Header().Set("Content-Type", "application/json")
		case isJSONMediaType(contentType):
		case json.Unmarshal(resp.Body, &encoded) == nil:
			if raw, err := base64.StdEncoding.DecodeString(encoded); err == nil {
				body = raw
			}
		}
	}
	if len(body) > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
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

// result is the response as recorded: the status, the replayed headers,
// and the body (JSON under a JSON content type, else base64; none: null).
func (r *recorder) result(replay []string) recordedResponse {
	res := recordedResponse{Status: r.status, Headers: map[string]string{}}
	for _, name := range replay {
		if v := r.sent.Values(name); len(v) > 0 {
			res.Headers[http.CanonicalHeaderKey(name)] = strings.Join(v, ", ")
		}
	}
	b := r.body.Bytes()
	switch {
	case len(b) == 0:
	case isJSONMediaType(r.sent.Get("Content-Type")) && json.Valid(b):
		res.Body = json.RawMessage(b)
	default:
		res.Body = base64.StdEncoding.EncodeToString(b)
	}
	return res
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
