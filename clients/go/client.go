// Package idempotency is a thin typed layer over the SQL functions of the
// idempotency PostgreSQL extension (release 1.x), on pgx v5.
//
// Every call joins the caller's transaction (a pgx.Tx) or connection: the
// package never commits or rolls back a transaction it was given. Keys are
// minted and parsed locally with the extension's exact rules; fingerprints
// and HTTP answers come from the server. The net/http middleware
// (Client.Middleware) is the one place where the package owns a
// transaction.
package idempotency

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// APIMajor is the major version of the extension's API this package knows.
const APIMajor = "1"

// Querier runs statements: a pgx.Tx, *pgx.Conn, *pgxpool.Conn or *pgxpool.Pool.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DB is what the middleware opens its transactions on: a *pgxpool.Pool.
type DB interface {
	Querier
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// ServerVersion is the row of idem_version(): which edition, release and API.
type ServerVersion struct {
	Edition string // "native" or "portable"
	Version string // the release, e.g. "1.0.0"
	API     string // e.g. "1.0"
}

// ErrIncompatibleServer is wrapped by the error of every call made against
// a server whose extension this package does not know (no idem_version(),
// or an API major other than 1).
var ErrIncompatibleServer = errors.New("idempotency: incompatible server")

// ErrNoTransaction is returned by Begin and BeginBatch given a connection in
// autocommit mode (or a pool): a fresh claim must be finished in the
// transaction that made it, so it needs one.
var ErrNoTransaction = errors.New("idempotency: idem_begin needs a transaction: " +
	"pass the pgx.Tx of tx := conn.Begin(ctx), not a connection in autocommit mode or a pool")

// Client holds what is checked once per pool: the server's version. Its
// methods are safe for concurrent use; create one per pool.
type Client struct {
	db     DB
	mu     sync.Mutex
	ok     atomic.Bool
	server ServerVersion
}

// New returns a Client. db opens the middleware's transactions and may be
// nil when only the store calls are used (they take a Querier each).
func New(db DB) *Client { return &Client{db: db} }

// Server checks, once per Client, that the server's extension speaks API
// major 1 (SELECT ... FROM idem_version()) and returns its version. Every
// other method calls it at first use; call it at start-up to fail early.
func (c *Client) Server(ctx context.Context, q Querier) (ServerVersion, error) {
	if c.ok.Load() {
		return c.server, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok.Load() {
		return c.server, nil
	}
	var v ServerVersion
	err := q.QueryRow(ctx, "SELECT edition, version, api FROM idempotency.idem_version()").
		Scan(&v.Edition, &v.Version, &v.API)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42883": // undefined_function
		return v, fmt.Errorf("%w: the server's idempotency extension has no idem_version() "+
			"(release 0.9 or older; this package needs API %s.x): run ALTER EXTENSION idempotency UPDATE: %w",
			ErrIncompatibleServer, APIMajor, err)
	case errors.As(err, &pgErr) && pgErr.Code == "3F000": // invalid_schema_name
		return v, fmt.Errorf("idempotency: the extension is not installed in this database "+
			"(run CREATE EXTENSION idempotency, or, on a managed PostgreSQL that cannot load it, "+
			"the portable edition's script: docs/managed.md): %w", err)
	case err != nil:
		return v, fmt.Errorf("idempotency: reading idem_version(): %w", err)
	}
	if major, _, _ := strings.Cut(v.API, "."); major != APIMajor {
		return v, fmt.Errorf("%w: the server's idempotency API is %s (%s edition, release %s); "+
			"this package knows API %s.x", ErrIncompatibleServer, v.API, v.Edition, v.Version, APIMajor)
	}
	c.server = v
	c.ok.Store(true)
	return v, nil
}

// inTransaction tells whether q runs inside a transaction block, and whether
// that can be known at all (another Querier is given the benefit of the doubt).
func inTransaction(q Querier) (inside, known bool) {
	switch v := q.(type) {
	case pgx.Tx:
		return true, true
	case *pgxpool.Pool:
		return false, true
	case interface{ PgConn() *pgconn.PgConn }: // *pgx.Conn
		return v.PgConn().TxStatus() != 'I', true
	case interface{ Conn() *pgx.Conn }: // *pgxpool.Conn
		return v.Conn().PgConn().TxStatus() != 'I', true
	}
	return false, false
}

// opError wraps an error of function fn (in namespace ns, when one is
// named) with that context; a server error stays reachable with errors.As
// and a *pgconn.PgError, and its detail is repeated in the text, which
// PgError.Error() leaves out.
func opError(fn, ns string, err error) error {
	where := fn
	if ns != "" {
		where = fmt.Sprintf("%s in namespace %q", fn, ns)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Detail != "" {
		return fmt.Errorf("idempotency: %s: %w (DETAIL: %s)", where, err, pgErr.Detail)
	}
	return fmt.Errorf("idempotency: %s: %w", where, err)
}
