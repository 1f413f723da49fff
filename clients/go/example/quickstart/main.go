// A payments service on net/http: POST /payments runs once per Idempotency-Key.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	pool, err := pgxpool.New(context.Background(), "") // the PG* environment variables
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", routes(pool)))
}

func routes(pool *pgxpool.Pool) http.Handler {
	idem := idempotency.New(pool)
	mux := http.NewServeMux()
	mux.Handle("POST /payments", idem.Middleware("payments")(http.HandlerFunc(createPayment)))
	return mux
}

// createPayment runs once per Idempotency-Key, in the transaction that records its answer.
func createPayment(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var p struct {
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
	}
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, "the body is not a payment", http.StatusBadRequest) // a 4xx is recorded too
		return
	}
	if p.Amount <= 0 {
		// Refused for good: the middleware records it and answers 422, to every retry.
		refusal := idempotency.StoredError{ClassTag: "InvalidAmount", Message: "amount must be positive"}
		if err := idempotency.AttemptFromContext(ctx).FailPermanent(ctx, refusal); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
		return
	}
	var id int64
	err := idempotency.TxFromContext(ctx).QueryRow(ctx,
		"INSERT INTO payments (amount, currency) VALUES ($1, $2) RETURNING id", p.Amount, p.Currency).Scan(&id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError) // a 5xx rolls back: the retry runs again
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/payments/%d", id))
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"payment_id": %d}`, id)
}
