package idemecho_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/idemecho"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
	"github.com/labstack/echo/v5"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// refunds is an Echo app whose handler writes a row in the middleware's
// transaction and answers errors the Echo way, by returning them.
type refunds struct {
	table    string
	failures atomic.Int32
	runs     atomic.Int32
	seen     atomic.Value // the last error Echo's own middleware saw
}

func newApp(t *testing.T, mw echo.MiddlewareFunc, group bool) (*refunds, string) {
	h := &refunds{table: "refunds_" + pgtest.Unique("t")[2:]}
	pgtest.Exec(t, "CREATE TABLE "+h.table+" (payment text)")
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc { // an outer middleware, as a logger is
		return func(c *echo.Context) error {
			err := next(c)
			h.seen.Store(errorString(err))
			return err
		}
	})
	if group {
		g := e.Group("/api", mw)
		g.POST("/payments/:id/refunds", h.handle)
	} else {
		e.Use(mw)
		e.POST("/payments/:id/refunds", h.handle)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func errorString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (h *refunds) handle(c *echo.Context) error {
	h.runs.Add(1)
	var req struct {
		Amount int `json:"amount"`
	}
	if err := c.Bind(&req); err != nil {
		return err
	}
	if req.Amount <= 0 {
		return echo.NewHTTPError(http.StatusUnprocessableEntity, "amount must be positive")
	}
	tx := idempotency.TxFromContext(c.Request().Context())
	if _, err := tx.Exec(c.Request().Context(), "INSERT INTO "+h.table+" VALUES ($1)", c.Param("id")); err != nil {
		return err
	}
	if h.failures.Add(-1) >= 0 {
		return errors.New("the provider failed") // Echo answers 500
	}
	return c.JSON(http.StatusCreated, map[string]string{"refund_of": c.Param("id")})
}

func (h *refunds) rows(t *testing.T) int { return pgtest.Count(t, "SELECT count(*) FROM "+h.table) }

// TestEchoUse: e.Use; the template is Echo's route path, an error
// returned with a 5xx records nothing, a replay is marked.
func TestEchoUse(t *testing.T) {
	idem := idempotency.New(pgtest.Pool(t))
	ns := pgtest.Unique("refunds")
	h, url := newApp(t, idemecho.Middleware(idem, ns), false)
	key := pgtest.Unique("k")

	h.failures.Store(1)
	if got := pgtest.Post(t, url+"/payments/7/refunds", key, `{"amount": 5}`); got.Status != 500 || h.rows(t) != 0 ||
		h.seen.Load() != "the provider failed" {
		t.Fatalf("5xx: %d %s, %d rows, outer middleware saw %v", got.Status, got.Body, h.rows(t), h.seen.Load())
	}
	first := pgtest.Post(t, url+"/payments/7/refunds", key, `{"amount": 5}`)
	again := pgtest.Post(t, url+"/payments/8/refunds", key, `{"amount": 5}`)
	if first.Status != 201 || again.Status != 201 || again.Header.Get("Idempotency-Replayed") != "true" ||
		!pgtest.SameJSON(again.Body, `{"refund_of":"7"}`) || h.rows(t) != 1 || h.runs.Load() != 2 {
		t.Fatalf("first %d %s, again %d %v %s, %d rows", first.Status, first.Body, again.Status, again.Header, again.Body, h.rows(t))
	}
	if target := pgtest.Target(t, ns, key); target != "/payments/{id}/refunds" {
		t.Fatalf("target %q", target)
	}
	if got := pgtest.Post(t, url+"/payments/7/refunds", key, `{"amount": 6}`); got.Status != 422 ||
		got.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("reused key: %d %s", got.Status, got.Body)
	}
}

// TestEchoGroupClientError: on a group; an HTTPError with a 4xx the
// handler returns is recorded and replayed.
func TestEchoGroupClientError(t *testing.T) {
	idem := idempotency.New(pgtest.Pool(t))
	ns := pgtest.Unique("refunds")
	h, url := newApp(t, idemecho.Middleware(idem, ns), true)
	key := pgtest.Unique("k")
	first := pgtest.Post(t, url+"/api/payments/1/refunds", key, `{"amount": 0}`)
	again := pgtest.Post(t, url+"/api/payments/1/refunds", key, `{"amount": 0}`)
	if first.Status != 422 || again.Status != 422 || again.Header.Get("Idempotency-Replayed") != "true" ||
		!pgtest.SameJSON(again.Body, first.Body) || h.runs.Load() != 1 {
		t.Fatalf("first %d %s, again %d %v %s, %d runs", first.Status, first.Body, again.Status, again.Header, again.Body, h.runs.Load())
	}
	if target := pgtest.Target(t, ns, key); target != "/api/payments/{id}/refunds" {
		t.Fatalf("target %q", target)
	}
	if got := pgtest.Post(t, url+"/api/payments/1/refunds", "", `{}`); got.Status != 400 {
		t.Fatalf("no key: %d", got.Status)
	}
}
