package idempotency_test

import (
	"net/http"
	"testing"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
)

// TestQueryExecModes: every call and the middleware work in each of pgx's
// query modes, including those a pool behind PgBouncer needs
// (cache_describe, exec, simple_protocol: no statement prepared by name).
func TestQueryExecModes(t *testing.T) {
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			pool := pgtest.Pool(t, "default_query_exec_mode="+mode)
			idem := idempotency.New(pool)
			ns, key := pgtest.Unique("modes"), pgtest.Unique("k")

			tx := begin(t, pool)
			o, err := idem.Begin(ctx, tx, ns, key, map[string]any{"amount": 1.5, "tags": []string{"a"}},
				idempotency.ReplayWindow(3600e9), idempotency.InFlightWait(0))
			must(t, err)
			must(t, idem.Commit(ctx, tx, ns, key, struct {
				ID int `json:"id"`
			}{7}, o.Fence))
			must(t, tx.Commit(ctx))

			tx = begin(t, pool)
			outs, err := idem.BeginBatch(ctx, tx, ns, []string{key, key}, []any{`{"tags": ["a"], "amount": 1.5}`, `{}`})
			must(t, err)
			if outs[0].Kind != idempotency.PriorResult || string(outs[0].Result) != `{"id": 7}` || outs[1].Kind != idempotency.Mismatch {
				t.Fatalf("batch: %+v", outs)
			}
			resp, err := idem.HTTPResponse(ctx, tx, outs[1], 1, "")
			must(t, err)
			if resp.Status != 422 {
				t.Fatalf("mismatch: %+v", resp)
			}
			must(t, tx.Rollback(ctx))
			held := pgtest.Unique("k")
			lease := pgtest.Unique("jobs")
			pgtest.Exec(t, "SELECT idempotency.idem_namespace_configure($1, in_progress_lease => '1 hour')", lease)
			tx = begin(t, pool)
			claim, err := idem.Begin(ctx, tx, lease, held, `{}`)
			must(t, err)
			must(t, tx.Commit(ctx))
			if _, err := idem.SavePoint(ctx, pool, lease, held, "charged", nil, claim.Fence); err != nil {
				t.Fatal(err)
			}

			app := newPaymentsApp(t)
			srv := serve(t, app.routes(idem))
			k := pgtest.Unique("order")
			first := mustPost(t, srv.URL+"/payments", k, `{"amount": 3, "currency": "EUR"}`)
			again := mustPost(t, srv.URL+"/payments", k, `{"amount": 3, "currency": "EUR"}`)
			if first.status != http.StatusCreated || again.header.Get("Idempotency-Replayed") != "true" || app.rows(t) != 1 {
				t.Fatalf("middleware: %d, %d %v", first.status, again.status, again.header)
			}
		})
	}
}
