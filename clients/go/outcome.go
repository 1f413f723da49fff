package idempotency

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kind is what idem_begin answered: a closed set of five.
type Kind string

// The five kinds of idem_kind.
const (
	Fresh       Kind = "fresh"        // do the work, then Commit, FailPermanent or FailTransient with Fence
	InFlight    Kind = "in_flight"    // another attempt holds the key
	PriorResult Kind = "prior_result" // replay Result
	PriorError  Kind = "prior_error"  // replay Error
	Mismatch    Kind = "mismatch"     // the key was used with another request
)

// StoredError is the error idem_fail_permanent records and prior_error replays.
type StoredError struct {
	ClassTag string `json:"class_tag"`
	Message  string `json:"message"`
	Cause    string `json:"cause,omitempty"`
}

// Outcome is the row idem_begin returns, mapped by column name. Which fields
// are set depends on Kind; the others are zero.
type Outcome struct {
	Kind Kind

	// Fresh: the claim's fence (pass it to Commit and the other
	// transitions), its attempt (1, or more after a takeover), whether it
	// took an abandoned claim over, and that claim's last recovery point
	// and state (nil without a takeover or a point).
	Fence         int64
	Attempt       int32
	Takeover      bool
	RecoveryPoint *string
	RecoveryState json.RawMessage

	// Fresh and InFlight, in a namespace with an in_progress_lease: when
	// the claim's lease ends (nil otherwise, or when it is not known).
	LeaseEndsAt *time.Time

	// InFlight: how long ago the holder claimed the key or last extended
	// its lease (nil for a claim held by its lock, whose time is not known).
	Age *time.Duration

	// PriorResult: the recorded result, as JSON (decode it with DecodeResult).
	Result json.RawMessage

	// PriorError: the recorded error.
	Error *StoredError

	// Mismatch: the recorded request (nil when the namespace does not store
	// requests) and its fingerprint. SubmittedHash, the fingerprint of the
	// request given, is set for every kind.
	RecordedRequest json.RawMessage
	RecordedHash    []byte
	SubmittedHash   []byte
}

// DecodeResult decodes a prior_result's Result into v with encoding/json.
func (o Outcome) DecodeResult(v any) error {
	if o.Kind != PriorResult {
		return fmt.Errorf("idempotency: a %s outcome has no result", o.Kind)
	}
	return json.Unmarshal(o.Result, v)
}

// outcomeColumns are the columns of idem_outcome this package reads, named
// (never *), so that a prepared statement keeps its shape when a later
// release adds columns at the end of the type.
const outcomeColumns = "kind, result, error, recorded_request, recorded_hash, submitted_hash, " +
	"attempt, age, fence, lease_ends_at, takeover, recovery_point, recovery_state"

// outcomeRow holds the nullable columns while a row is scanned.
type outcomeRow struct {
	kind        string
	fence       *int64
	attempt     *int32
	takeover    *bool
	out         Outcome
	httpStatus  *int32
	httpHeaders map[string]string
	httpBody    json.RawMessage
}

// target is where column name goes, or nil for a column this package does
// not know (a column a later release added): it is skipped, not an error.
func (r *outcomeRow) target(name string) any {
	switch name {
	case "kind":
		return &r.kind
	case "result":
		return &r.out.Result
	case "error":
		return &r.out.Error
	case "recorded_request":
		return &r.out.RecordedRequest
	case "recorded_hash":
		return &r.out.RecordedHash
	case "submitted_hash":
		return &r.out.SubmittedHash
	case "attempt":
		return &r.attempt
	case "age":
		return &r.out.Age
	case "fence":
		return &r.fence
	case "lease_ends_at":
		return &r.out.LeaseEndsAt
	case "takeover":
		return &r.takeover
	case "recovery_point":
		return &r.out.RecoveryPoint
	case "recovery_state":
		return &r.out.RecoveryState
	case "http_status":
		return &r.httpStatus
	case "http_headers":
		return &r.httpHeaders
	case "http_body":
		return &r.httpBody
	}
	return nil
}

// scanOutcome reads the current row by column name, in any column order,
// ignoring columns it does not know (pgx.RowToStructByNameLax would refuse
// them) and leaving the fields of absent columns zero.
func scanOutcome(row pgx.CollectableRow) (outcomeRow, error) {
	var r outcomeRow
	fields := row.FieldDescriptions()
	targets := make([]any, len(fields))
	for i, f := range fields {
		targets[i] = r.target(f.Name)
	}
	if err := row.Scan(targets...); err != nil {
		return r, err
	}
	r.out.Kind = Kind(r.kind)
	if r.fence != nil {
		r.out.Fence = *r.fence
	}
	if r.attempt != nil {
		r.out.Attempt = *r.attempt
	}
	if r.takeover != nil {
		r.out.Takeover = *r.takeover
	}
	return r, nil
}

// record is the outcome as the columns of idem_outcome, for
// jsonb_populate_record when it goes back to the server.
func (o Outcome) record() map[string]any {
	m := map[string]any{"kind": o.Kind, "submitted_hash": hexBytea(o.SubmittedHash)}
	set := func(k string, v json.RawMessage) {
		if v != nil {
			m[k] = v
		}
	}
	set("result", o.Result)
	set("recorded_request", o.RecordedRequest)
	set("recovery_state", o.RecoveryState)
	if o.Error != nil {
		m["error"] = o.Error
	}
	if o.RecordedHash != nil {
		m["recorded_hash"] = hexBytea(o.RecordedHash)
	}
	if o.Kind == Fresh {
		m["fence"], m["attempt"], m["takeover"] = o.Fence, o.Attempt, o.Takeover
	}
	if o.Age != nil {
		m["age"] = fmt.Sprintf("%d microseconds", o.Age.Microseconds())
	}
	if o.LeaseEndsAt != nil {
		m["lease_ends_at"] = o.LeaseEndsAt.Format(time.RFC3339Nano)
	}
	if o.RecoveryPoint != nil {
		m["recovery_point"] = *o.RecoveryPoint
	}
	return m
}

// hexBytea writes bytes as bytea's text form, or nil for none.
func hexBytea(b []byte) any {
	if b == nil {
		return nil
	}
	return fmt.Sprintf("\\x%x", b)
}
