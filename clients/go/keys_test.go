package idempotency

import (
	"context"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idempotency-pg/idempotency/clients/go/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// katDir is test/kat of the repository: the vectors are read from there,
// never copied.
var katDir = filepath.Join("..", "..", "test", "kat")

// readCSV returns the rows of a known-answer file as maps by column name.
func readCSV(t *testing.T, name string) []map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(katDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]string
	for _, rec := range records[1:] {
		row := map[string]string{}
		for i, col := range records[0] {
			row[col] = rec[i]
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no rows", name)
	}
	return rows
}

// answer is what a key function answered: a key (nil: SQL NULL) or an error.
type answer struct {
	key             *string
	code, msg, detl string
}

// local turns a local result into an answer.
func local(key *string, err error) answer {
	var ke *KeyError
	if errors.As(err, &ke) {
		return answer{code: ke.Code, msg: ke.Message, detl: ke.Detail}
	} else if err != nil {
		return answer{msg: "unexpected: " + err.Error()}
	}
	return answer{key: key}
}

// server asks the extension the same question.
func server(t *testing.T, conn *pgx.Conn, sql string, args ...any) answer {
	t.Helper()
	var key *string
	err := conn.QueryRow(context.Background(), sql, args...).Scan(&key)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return answer{code: pgErr.Code, msg: pgErr.Message, detl: pgErr.Detail}
	} else if err != nil {
		t.Fatal(err)
	}
	return answer{key: key}
}

// expected is a keys.csv row's answer: key (a JSON string, or null) or the
// 22023 error it names.
func expected(t *testing.T, row map[string]string) answer {
	if row["key"] == "ok" {
		return answer{}
	}
	if row["key"] == "" {
		return answer{code: "22023", msg: row["message"], detl: row["detail"]}
	}
	var key *string
	if err := json.Unmarshal([]byte(row["key"]), &key); err != nil {
		t.Fatal(err)
	}
	return answer{key: key}
}

// same fails t when two answers differ.
func same(t *testing.T, what string, got, want answer) {
	t.Helper()
	if (got.key == nil) != (want.key == nil) || got.key != nil && *got.key != *want.key ||
		got.code != want.code || got.msg != want.msg || got.detl != want.detl {
		show := func(a answer) string {
			if a.key != nil {
				return "key " + *a.key
			}
			if a.code == "" {
				return "NULL"
			}
			return a.code + " " + a.msg + " / " + a.detl
		}
		t.Errorf("%s: got %s, want %s", what, show(got), show(want))
	}
}

func connect(t *testing.T) *pgx.Conn {
	conn, err := pgx.Connect(context.Background(), pgtest.ConnString(pgtest.Name()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestKeysKAT: every row of test/kat/keys.csv, answered locally exactly as
// the CSV says, and by the server the same way.
func TestKeysKAT(t *testing.T) {
	conn := connect(t)
	for _, row := range readCSV(t, "keys.csv") {
		t.Run(row["function"]+"/"+row["name"], func(t *testing.T) {
			want := expected(t, row)
			switch row["function"] {
			case "namespace":
				var ns string
				if err := json.Unmarshal([]byte(row["input"]), &ns); err != nil {
					t.Fatal(err)
				}
				same(t, "ValidateNamespace", local(nil, ValidateNamespace(ns)), want)
				if row["key"] == "ok" {
					k := "k"
					want = answer{key: &k}
				}
				got, err := Parse(ns, " k ")
				same(t, "Parse", local(&got, err), want)
				same(t, "server idem_parse", server(t, conn, "SELECT idempotency.idem_parse($1, ' k ')", ns), want)
			case "parse":
				var raw *string
				if err := json.Unmarshal([]byte(row["input"]), &raw); err != nil {
					t.Fatal(err)
				}
				same(t, "parse", local(parse("payments", raw)), want)
				if raw != nil {
					got, err := Parse("payments", *raw)
					same(t, "Parse", local(&got, err), want)
				}
				same(t, "server idem_parse", server(t, conn, "SELECT idempotency.idem_parse('payments', $1)", raw), want)
			case "mint":
				var parts []*string
				if err := json.Unmarshal([]byte(row["input"]), &parts); err != nil {
					t.Fatal(err)
				}
				got, err := mint("payments", parts)
				same(t, "mint", local(&got, err), want)
				same(t, "server idem_mint", server(t, conn, "SELECT idempotency.idem_mint('payments', $1)", parts), want)
			default:
				t.Fatalf("unknown function %q", row["function"])
			}
		})
	}
}

// TestMintVectors: the mint rows of test/kat/vectors.csv, with the parts'
// UTF-8 bytes checked against parts_hex first.
func TestMintVectors(t *testing.T) {
	n := 0
	for _, row := range readCSV(t, "vectors.csv") {
		if row["kind"] != "mint" {
			continue
		}
		n++
		t.Run(row["name"], func(t *testing.T) {
			var parts []string
			if err := json.Unmarshal([]byte(row["input"]), &parts); err != nil {
				t.Fatal(err)
			}
			hexParts := make([]string, len(parts))
			for i, p := range parts {
				hexParts[i] = hex.EncodeToString([]byte(p))
			}
			if got := strings.Join(hexParts, "."); got != row["parts_hex"] {
				t.Fatalf("parts decode to %s, the vector says %s", got, row["parts_hex"])
			}
			key, err := Mint("any-namespace", parts...)
			if err != nil {
				t.Fatal(err)
			}
			if key != row["sha256"] {
				t.Errorf("Mint = %s, want %s", key, row["sha256"])
			}
		})
	}
	if n < 20 {
		t.Fatalf("only %d mint vectors", n)
	}
}

// TestKeysBeyondKAT: inputs the vectors do not hold (bytes that are not
// UTF-8, NUL, characters the namespace detail shows either way), answered
// locally exactly as the server answers them.
func TestKeysBeyondKAT(t *testing.T) {
	conn := connect(t)
	namespaces := []string{`a\b`, "a~", "a!", "a\x7f", "a\u0085", "a\x00", "a\xff", "é\xe2\x82", "\xed\xa0\x80x", "é"}
	for _, ns := range namespaces {
		got, err := Parse(ns, "k")
		same(t, "Parse namespace "+strings.ToValidUTF8(ns, "?"), local(&got, err),
			server(t, conn, "SELECT idempotency.idem_parse($1, 'k')", ns))
	}
	raws := []string{"\x00", "ok\xc3(", "\xf0\x9f\x98", "k\xff\xfe", "\xc0\xaf", "\xf4\x90\x80\x80", " \u0085k\u0085 ", "\u009b"}
	for _, raw := range raws {
		got, err := Parse("payments", raw)
		same(t, "Parse "+strings.ToValidUTF8(raw, "?"), local(&got, err),
			server(t, conn, "SELECT idempotency.idem_parse('payments', $1)", raw))
	}
	mints := [][]string{{"a", "\xff"}, {"\x00"}, {"\u3000", "\xff"}, {"x", "\u2028"}}
	for _, parts := range mints {
		got, err := Mint("payments", parts...)
		same(t, "Mint "+strings.ToValidUTF8(strings.Join(parts, ","), "?"), local(&got, err),
			server(t, conn, "SELECT idempotency.idem_mint('payments', $1)", parts))
	}
	got, err := Mint("Payments", "\xff") // the encoding is refused before the namespace is read
	same(t, "Mint bad namespace and bytes", local(&got, err),
		server(t, conn, "SELECT idempotency.idem_mint('Payments', $1)", []string{"\xff"}))
}
