package idempotency

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// BeginOption narrows one begin: a shorter replay window, an in-flight wait.
type BeginOption func(*beginArgs)

type beginArgs struct{ replayWindow, inFlightWait any }

// ReplayWindow keeps this record for d (never longer than the namespace allows).
func ReplayWindow(d time.Duration) BeginOption {
	return func(a *beginArgs) { a.replayWindow = interval(d) }
}

// InFlightWait waits up to d for another transaction holding the key
// before answering InFlight (0: answer at once).
func InFlightWait(d time.Duration) BeginOption {
	return func(a *beginArgs) { a.inFlightWait = interval(d) }
}

// interval is a duration as interval text, which every query mode of pgx
// sends (in exec and simple_protocol modes it knows no parameter's type).
func interval(d time.Duration) string { return fmt.Sprintf("%d microseconds", d.Microseconds()) }

// beginArguments applies the options of one begin.
func beginArguments(opts []BeginOption) beginArgs {
	var a beginArgs
	for _, o := range opts {
		o(&a)
	}
	return a
}

// Begin starts an attempt: idem_begin(namespace, key, request) in the
// transaction q. request is any value encoding/json marshals (a string,
// []byte or json.RawMessage is taken as JSON text); the server fingerprints
// it. On Fresh, finish the attempt in the same transaction with Commit,
// FailPermanent or FailTransient and the outcome's Fence.
func (c *Client) Begin(ctx context.Context, q Querier, namespace, key string, request any,
	opts ...BeginOption) (Outcome, error) {
	if inside, known := inTransaction(q); known && !inside {
		return Outcome{}, ErrNoTransaction
	}
	if _, err := c.Server(ctx, q); err != nil {
		return Outcome{}, err
	}
	a := beginArguments(opts)
	req, err := jsonArg(request)
	if err != nil {
		return Outcome{}, opError("idem_begin", namespace, err)
	}
	rows, err := q.Query(ctx, "SELECT "+outcomeColumns+
		" FROM idempotency.idem_begin($1::text, $2::text, $3::jsonb, $4::interval, $5::interval)",
		namespace, key, req, a.replayWindow, a.inFlightWait)
	if err != nil {
		return Outcome{}, opError("idem_begin", namespace, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanOutcome)
	if err != nil {
		return Outcome{}, opError("idem_begin", namespace, err)
	}
	return r.out, nil
}

// BeginBatch begins many keys of one namespace in one call
// (idem_begin_batch): one outcome per key, in the order of keys.
func (c *Client) BeginBatch(ctx context.Context, q Querier, namespace string, keys []string, requests []any,
	opts ...BeginOption) ([]Outcome, error) {
	if inside, known := inTransaction(q); known && !inside {
		return nil, ErrNoTransaction
	}
	if _, err := c.Server(ctx, q); err != nil {
		return nil, err
	}
	a := beginArguments(opts)
	reqs := make([]*string, len(requests))
	for i, r := range requests {
		if r == nil {
			continue // SQL NULL, which the server refuses with its own error
		}
		b, err := asJSON(r)
		if err != nil {
			return nil, opError("idem_begin_batch", namespace, err)
		}
		text := string(b)
		reqs[i] = &text
	}
	rows, err := q.Query(ctx, "SELECT "+outcomeColumns+" FROM idempotency.idem_begin_batch($1::text, $2::text[], "+
		"$3::text[]::jsonb[], $4::interval, $5::interval) WITH ORDINALITY AS b ORDER BY b.ordinality",
		namespace, keys, reqs, a.replayWindow, a.inFlightWait)
	if err != nil {
		return nil, opError("idem_begin_batch", namespace, err)
	}
	found, err := pgx.CollectRows(rows, scanOutcome)
	if err != nil {
		return nil, opError("idem_begin_batch", namespace, err)
	}
	out := make([]Outcome, len(found))
	for i, r := range found {
		out[i] = r.out
	}
	return out, nil
}

// jsonArg is a jsonb argument as JSON text (cast to jsonb in the SQL): SQL
// NULL for nil, else asJSON's text.
func jsonArg(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := asJSON(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// asJSON is the JSON text of a value as a jsonb parameter takes it (as pgx
// itself encodes one): strings, []byte and json.RawMessage as they are,
// anything else marshalled by encoding/json.
func asJSON(v any) (json.RawMessage, error) {
	switch t := v.(type) {
	case string:
		return json.RawMessage(t), nil
	case []byte:
		return json.RawMessage(t), nil
	case json.RawMessage:
		return t, nil
	}
	return json.Marshal(v)
}

// exec runs one transition after the version check, wrapping its error;
// the argument at position jsonAt (if any, else -1) is sent as JSON text.
func (c *Client) exec(ctx context.Context, q Querier, fn, namespace string, jsonAt int, sql string, args ...any) error {
	if _, err := c.Server(ctx, q); err != nil {
		return err
	}
	if jsonAt >= 0 {
		var err error
		if args[jsonAt], err = jsonArg(args[jsonAt]); err != nil {
			return opError(fn, namespace, err)
		}
	}
	if _, err := q.Exec(ctx, sql, args...); err != nil {
		return opError(fn, namespace, err)
	}
	return nil
}

// Commit records result for the fresh attempt the fence names
// (idem_commit): later begins with the same request replay it.
func (c *Client) Commit(ctx context.Context, q Querier, namespace, key string, result any, fence int64) error {
	return c.exec(ctx, q, "idem_commit", namespace, 2,
		"SELECT idempotency.idem_commit($1::text, $2::text, $3::jsonb, $4::bigint)", namespace, key, result, fence)
}

// FailPermanent records a refusal that every retry gets again (idem_fail_permanent).
func (c *Client) FailPermanent(ctx context.Context, q Querier, namespace, key string, e StoredError, fence int64) error {
	return c.exec(ctx, q, "idem_fail_permanent", namespace, 2,
		"SELECT idempotency.idem_fail_permanent($1::text, $2::text, $3::jsonb, $4::bigint)", namespace, key, e, fence)
}

// FailTransient releases the claim so that the next begin is fresh (idem_fail_transient).
func (c *Client) FailTransient(ctx context.Context, q Querier, namespace, key string, fence int64) error {
	return c.exec(ctx, q, "idem_fail_transient", namespace, -1,
		"SELECT idempotency.idem_fail_transient($1::text, $2::text, $3::bigint)", namespace, key, fence)
}

// ExtendLease is a holder's heartbeat (idem_extend_lease): the lease runs
// again from now; it returns the lease's new end.
func (c *Client) ExtendLease(ctx context.Context, q Querier, namespace, key string, fence int64) (time.Time, error) {
	return c.timestamp(ctx, q, "idem_extend_lease", namespace,
		"SELECT idempotency.idem_extend_lease($1::text, $2::text, $3::bigint)", namespace, key, fence)
}

// SavePoint records how far the holder's work got (idem_save_point): a
// takeover answers point and state (nil state: SQL NULL). It is also a
// heartbeat, and returns the lease's new end.
func (c *Client) SavePoint(ctx context.Context, q Querier, namespace, key, point string, state any,
	fence int64) (time.Time, error) {
	st, err := jsonArg(state)
	if err != nil {
		return time.Time{}, opError("idem_save_point", namespace, err)
	}
	return c.timestamp(ctx, q, "idem_save_point", namespace,
		"SELECT idempotency.idem_save_point($1::text, $2::text, $3::text, $4::jsonb, $5::bigint)",
		namespace, key, point, st, fence)
}

// timestamp runs a call that returns a timestamptz.
func (c *Client) timestamp(ctx context.Context, q Querier, fn, namespace, sql string, args ...any) (time.Time, error) {
	if _, err := c.Server(ctx, q); err != nil {
		return time.Time{}, err
	}
	var t time.Time
	if err := q.QueryRow(ctx, sql, args...).Scan(&t); err != nil {
		return time.Time{}, opError(fn, namespace, err)
	}
	return t, nil
}

// HTTPResponse is an HTTP answer the server built: status, headers
// (a JSON object of strings) and body (JSON, nil for none).
type HTTPResponse struct {
	Status int
	Header map[string]string
	Body   json.RawMessage
}

// HTTPKey checks an Idempotency-Key header field (nil: absent) with
// idem_http_key: the key, or the 400 to answer when it is missing or malformed.
func (c *Client) HTTPKey(ctx context.Context, q Querier, namespace string, header *string,
	docsURI string) (string, *HTTPResponse, error) {
	if _, err := c.Server(ctx, q); err != nil {
		return "", nil, err
	}
	var key *string
	var status *int32
	var resp HTTPResponse
	err := q.QueryRow(ctx, "SELECT key, status, headers, body FROM idempotency.idem_http_key($1::text, $2::text, $3::text)",
		namespace, header, nullIfEmpty(docsURI)).Scan(&key, &status, &resp.Header, &resp.Body)
	if err != nil {
		return "", nil, opError("idem_http_key", namespace, err)
	}
	if key != nil {
		return *key, nil, nil
	}
	resp.Status = int(*status)
	return "", &resp, nil
}

// HTTPResponse maps an outcome other than Fresh to its HTTP answer with
// idem_http_response: a replay, 409 with Retry-After, or a 422 problem.
func (c *Client) HTTPResponse(ctx context.Context, q Querier, o Outcome, retryAfter int,
	docsURI string) (HTTPResponse, error) {
	if _, err := c.Server(ctx, q); err != nil {
		return HTTPResponse{}, err
	}
	var resp HTTPResponse
	var status int32
	outcome, err := jsonArg(o.record())
	if err != nil {
		return HTTPResponse{}, opError("idem_http_response", "", err)
	}
	err = q.QueryRow(ctx, "SELECT status, headers, body FROM idempotency.idem_http_response("+
		"jsonb_populate_record(NULL::idempotency.idem_outcome, $1::jsonb), $2::integer, $3::text)",
		outcome, retryAfter, nullIfEmpty(docsURI)).Scan(&status, &resp.Header, &resp.Body)
	if err != nil {
		return HTTPResponse{}, opError("idem_http_response", "", err)
	}
	resp.Status = int(status)
	return resp, nil
}

// nullIfEmpty makes "" SQL NULL (an optional text argument).
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
