package idemgin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	"github.com/gin-gonic/gin"
	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/idemgin"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(pgtest.Main(m))
}

// refunds is a Gin app whose handler writes a row in the middleware's
// transaction; it panics while panics are left.
type refunds struct {
	table  string
	panics atomic.Int32
	runs   atomic.Int32
}

func newApp(t *testing.T, idem *idempotency.Client, ns string, group bool) (*refunds, string) {
	h := &refunds{table: "refunds_" + pgtest.Unique("t")[2:]}
	pgtest.Exec(t, "CREATE TABLE "+h.table+" (payment text)")
	r := gin.New()
	r.Use(gin.RecoveryWithWriter(io.Discard))
	if group {
		g := r.Group("/api", idemgin.Middleware(idem, ns))
		g.POST("/payments/:id/refunds", h.handle)
	} else {
		r.Use(idemgin.Middleware(idem, ns))
		r.POST("/payments/:id/refunds", h.handle)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func (h *refunds) handle(c *gin.Context) {
	h.runs.Add(1)
	var req struct {
		Amount int `json:"amount"`
	}
	if err := c.ShouldBindJSON(&req); err != nil || req.Amount <= 0 {
		c.AbortWithStatusJSON(http.StatusUnprocessableEntity, gin.H{"error": "amount must be positive"})
		return
	}
	tx := idempotency.TxFromContext(c.Request.Context())
	if _, err := tx.Exec(c.Request.Context(), "INSERT INTO "+h.table+" VALUES ($1)", c.Param("id")); err != nil {
		c.AbortWithStatus(http.StatusInternalServerError)
		return
	}
	if h.panics.Add(-1) >= 0 {
		panic("the provider failed")
	}
	c.Header("Location", "/refunds/"+c.Param("id"))
	c.JSON(http.StatusCreated, gin.H{"refund_of": c.Param("id")})
}

func (h *refunds) rows(t *testing.T) int { return pgtest.Count(t, "SELECT count(*) FROM "+h.table) }

// TestGinUse: r.Use; the template is Gin's full path, a panic (answered
// 500 by gin.Recovery) records nothing, a replay is marked.
func TestGinUse(t *testing.T) {
	idem := idempotency.New(pgtest.Pool(t))
	ns := pgtest.Unique("refunds")
	h, url := newApp(t, idem, ns, false)
	key := pgtest.Unique("k")

	h.panics.Store(1)
	if got := pgtest.Post(t, url+"/payments/7/refunds", key, `{"amount": 5}`); got.Status != 500 || h.rows(t) != 0 {
		t.Fatalf("panic: %d %s, %d rows", got.Status, got.Body, h.rows(t))
	}
	first := pgtest.Post(t, url+"/payments/7/refunds", key, `{"amount": 5}`)
	again := pgtest.Post(t, url+"/payments/8/refunds", key, `{"amount": 5}`)
	if first.Status != 201 || again.Status != 201 || again.Header.Get("Idempotency-Replayed") != "true" ||
		again.Header.Get("Location") != "/refunds/7" || !pgtest.SameJSON(again.Body, first.Body) ||
		h.rows(t) != 1 || h.runs.Load() != 2 {
		t.Fatalf("first %d %s, again %d %v %s, %d rows", first.Status, first.Body, again.Status, again.Header, again.Body, h.rows(t))
	}
	if target := pgtest.Target(t, ns, key); target != "/payments/{id}/refunds" {
		t.Fatalf("target %q", target)
	}
	if got := pgtest.Post(t, url+"/payments/7/refunds", key, `{"amount": 6}`); got.Status != 422 ||
		got.Header.Get("Content-Type") != "application/problem+json" || h.runs.Load() != 2 {
		t.Fatalf("reused key: %d %s", got.Status, got.Body)
	}
}

// TestGinGroupClientError: on a group; a 4xx the handler answers is
// recorded and replayed, a missing key is a 400 and runs nothing.
func TestGinGroupClientError(t *testing.T) {
	idem := idempotency.New(pgtest.Pool(t))
	ns := pgtest.Unique("refunds")
	h, url := newApp(t, idem, ns, true)
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
	if got := pgtest.Post(t, url+"/api/payments/1/refunds", "", `{"amount": 1}`); got.Status != 400 || h.runs.Load() != 1 {
		t.Fatalf("no key: %d, %d runs", got.Status, h.runs.Load())
	}
}
