// A payments service on net/http: POST /payments is idempotent.
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/jackc/pgx/v5/pgxpool"
)

// main serves the payments API on the database PG* names.
func main() {
	pool, err := pgxpool.New(context.Background(), "") // PGHOST, PGDATABASE, ...
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", routes(pool)))
}

// routes makes POST /payments idempotent in namespace "payments".
func routes(pool *pgxpool.Pool) http.Handler {
	idem := idempotency.New(pool)
	mux := http.NewServeMux()
	mux.Handle("POST /payments", idem.Middleware("payments")(http.HandlerFunc(createPayment)))
	return mux
}

// createPayment runs once per Idempotency-Key; a retry gets its answer again.
func createPayment(w http.ResponseWriter, r *http.Request) {
	tx := idempotency.TxFromContext(r.Context()) // the claim's transaction
	var id int64
	err := tx.QueryRow(r.Context(), "INSERT INTO payments DEFAULT VALUES RETURNING id").Scan(&id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError) // a 5xx records nothing
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"payment_id": %d}`, id)
}
