package idempotency

import (
	"os"
	"testing"

	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
)

// TestMain gives the tests a database of their own on the server PG* names.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
