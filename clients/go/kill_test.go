package idempotency_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
)

// The helper process: the payments app as its own process, which prints
// where it listens and, from inside the handler (its row written, not
// committed), that it waits; the test kills it there.
const envHelper = "IDEM_GO_HELPER_APP"

// TestHelperProcess is not a test: it is the app process TestKilledMidHandler starts.
func TestHelperProcess(t *testing.T) {
	namespace := os.Getenv(envHelper)
	if namespace == "" {
		return
	}
	idem, _ := newClient(t)
	app := &paymentsApp{namespace: namespace, table: "payments_" + namespace[len("payments-"):]}
	app.hang = func(key string) {
		fmt.Printf("WAITING %s\n", key)
		select {} // until SIGKILL
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LISTENING %s\n", ln.Addr())
	_ = http.Serve(ln, app.routes(idem))
}

// TestKilledMidHandler: the process dies (SIGKILL) while its handler holds
// the claim with its row written; the server rolls both back, the retry
// (to a new process) succeeds, and exactly one row is committed.
func TestKilledMidHandler(t *testing.T) {
	app := newPaymentsApp(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHelper+"="+app.namespace, pgtest.EnvDatabase+"="+pgtest.Name())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	next := func(prefix string) string {
		for lines.Scan() {
			if rest, ok := strings.CutPrefix(lines.Text(), prefix+" "); ok {
				return rest
			}
		}
		t.Fatalf("the app process ended before printing %s", prefix)
		return ""
	}
	url := "http://" + next("LISTENING") + "/payments"
	key := pgtest.Unique("order")
	body := `{"amount": 42, "currency": "EUR"}`

	lost := make(chan error, 1)
	go func() { _, err := post(t, url, key, "application/json", body); lost <- err }()
	if waiting := next("WAITING"); waiting != key {
		t.Fatalf("the handler waits for %q", waiting)
	}
	if n := pgtest.Count(t, "SELECT count(*) FROM idempotency.idem_key_state($1, $2) WHERE state = 'held'",
		app.namespace, key); n != 1 {
		t.Fatalf("the claim is not held while the handler waits (%d)", n)
	}
	must(t, cmd.Process.Signal(os.Kill))
	_ = cmd.Wait()
	if err := <-lost; err == nil {
		t.Fatal("the killed process answered")
	}

	// A new process of the app; the retry waits out the 409 while the
	// server notices the dead connection, as a client honouring Retry-After does.
	idem, _ := newClient(t)
	srv := serve(t, app.routes(idem))
	retry := retryWhileInFlight(t, srv.URL+"/payments", key, body)
	if retry.status != 201 || retry.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("retry: %d %s", retry.status, retry.body)
	}
	if n := app.rows(t); n != 1 {
		t.Fatalf("%d committed rows", n)
	}
	replay := mustPost(t, srv.URL+"/payments", key, body)
	if replay.status != 201 || replay.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replay: %d %v", replay.status, replay.header)
	}
}

// retryWhileInFlight posts until the answer is not a 409 (at most 10 s), as
// a client honouring Retry-After does while a dead holder's session ends.
func retryWhileInFlight(t *testing.T, url, key, body string) response {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := mustPost(t, url, key, body)
		if r.status != http.StatusConflict || time.Now().After(deadline) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}
