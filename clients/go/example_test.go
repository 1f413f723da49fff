package idempotency_test

import (
	"context"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/jackc/pgx/v5/pgxpool"
)

type receiptOf struct {
	PaymentID int64 `json:"payment_id"`
}

// The store's calls in the caller's own transaction (README.md shows this body).
func ExampleClient_Begin() {
	var (
		ctx            = context.Background()
		pool, _        = pgxpool.New(ctx, "")
		idem           = idempotency.New(pool)
		key            = "order-1001"
		paymentRequest = map[string]any{"amount": 100, "currency": "EUR"}
		receipt        receiptOf
	)
	_ = func() error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		o, err := idem.Begin(ctx, tx, "payments", key, paymentRequest) // any value encoding/json marshals
		if err != nil {
			return err
		}
		switch o.Kind {
		case idempotency.Fresh:
			// ... the work, in tx ...
			if err := idem.Commit(ctx, tx, "payments", key, receipt, o.Fence); err != nil {
				return err
			}
			return tx.Commit(ctx)
		case idempotency.PriorResult:
			return o.DecodeResult(&receipt)
		}
		return nil
	}
}
