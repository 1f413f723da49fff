package idempotency

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestScanByName: columns are matched by name in any order; a column a
// later release adds is ignored and a column an older one lacks stays zero
// (pgx.RowToStructByNameLax would refuse the added one).
func TestScanByName(t *testing.T) {
	conn := connect(t)
	rows, err := conn.Query(context.Background(), `SELECT 4294967297::bigint AS fence, 'a later column' AS added,
		'fresh'::idempotency.idem_kind AS kind, 2 AS attempt, true AS takeover`)
	if err != nil {
		t.Fatal(err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanOutcome)
	if err != nil {
		t.Fatal(err)
	}
	o := r.out
	if o.Kind != Fresh || o.Fence != 4294967297 || o.Attempt != 2 || !o.Takeover || o.SubmittedHash != nil || o.Age != nil {
		t.Fatalf("%+v", o)
	}
}
