// idem_begin's row as a typed value: a union discriminated by kind, mapped by
// column name, so that columns a later release adds at the end are ignored.
import { IdempotencyError } from './errors.js';

/** A JSON value as node-postgres' JSON.parse gives it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The error recorded by idem_fail_permanent: a class tag, a message and an optional cause, all strings. */
export interface RecordedError {
  class_tag: string;
  message: string;
  cause?: string;
}

/** This transaction holds the key: do the work, then finish it with the fence. */
export interface Fresh {
  readonly kind: 'fresh';
  /** The claim's fence (a bigint: it does not fit a JavaScript number). */
  readonly fence: bigint;
  /** 1, or more after takeovers of an abandoned claim. */
  readonly attempt: number;
  /** When the claim's lease ends (namespaces with an in_progress_lease), else null. */
  readonly leaseEndsAt: Date | null;
  /** True when this attempt took over a claim whose lease had ended. */
  readonly takeover: boolean;
  /** The last recovery point the previous holder saved, if any. */
  readonly recoveryPoint: string | null;
  /** The state saved with that point. */
  readonly recoveryState: Json;
}

/** Another transaction holds the key now. */
export interface InFlight {
  readonly kind: 'in_flight';
  /** Seconds since the holder claimed the key, when known. */
  readonly age: number | null;
  /** When the holder's lease ends, when it has one. */
  readonly leaseEndsAt: Date | null;
}

/** The key's work was done: its recorded result. */
export interface PriorResult {
  readonly kind: 'prior_result';
  readonly result: Json;
}

/** The key's work failed for good: its recorded error. */
export interface PriorError {
  readonly kind: 'prior_error';
  readonly error: RecordedError;
}

/** The key was used with another request: never overwritten. */
export interface Mismatch {
  readonly kind: 'mismatch';
  /** The recorded request's fingerprint (null when the record keeps none). */
  readonly recordedHash: Buffer | null;
  /** This request's fingerprint. */
  readonly submittedHash: Buffer;
  /** The recorded request, when the namespace stores requests. */
  readonly recordedRequest: Json;
}

/** What idem_begin answered: switch on kind. */
export type Outcome = Fresh | InFlight | PriorResult | PriorError | Mismatch;

/** The outcome columns this package selects, each as text (see OUTCOME_COLUMNS). */
export type OutcomeRow = Record<string, string | null | undefined>;

/**
 * The select list of an idem_outcome named o, every column as text, so that
 * no type parser the application set (int8 as a Number, say) changes a value.
 */
export const OUTCOME_COLUMNS = `o.kind::text AS kind, o.result::text AS result, o.error::text AS error,
  o.recorded_request::text AS recorded_request, encode(o.recorded_hash, 'hex') AS recorded_hash,
  encode(o.submitted_hash, 'hex') AS submitted_hash, o.attempt::text AS attempt,
  extract(epoch FROM o.age)::text AS age, o.fence::text AS fence,
  (extract(epoch FROM o.lease_ends_at) * 1000)::text AS lease_ends_at, o.takeover::text AS takeover,
  o.recovery_point AS recovery_point, o.recovery_state::text AS recovery_state`;

// A jsonb column's text, parsed.
function json(v: string | null | undefined): Json {
  return v === null || v === undefined ? null : (JSON.parse(v) as Json);
}

// A timestamptz selected as milliseconds since the epoch.
function date(ms: string | null | undefined): Date | null {
  return ms === null || ms === undefined ? null : new Date(Number(ms));
}

// A bytea selected as hex.
function bytes(hex: string | null | undefined): Buffer | null {
  return hex === null || hex === undefined ? null : Buffer.from(hex, 'hex');
}

/** Maps a row of OUTCOME_COLUMNS by name; other columns are ignored. */
export function outcomeFromRow(row: OutcomeRow): Outcome {
  switch (row['kind']) {
    case 'fresh':
      if (row['fence'] === null || row['fence'] === undefined) {
        throw new IdempotencyError('XX000', 'a fresh outcome without a fence', 'idem_begin answered fresh with a NULL fence.');
      }
      return {
        kind: 'fresh',
        fence: BigInt(row['fence']),
        attempt: Number(row['attempt'] ?? 1),
        leaseEndsAt: date(row['lease_ends_at']),
        takeover: row['takeover'] === 'true',
        recoveryPoint: row['recovery_point'] ?? null,
        recoveryState: json(row['recovery_state']),
      };
    case 'in_flight':
      return {
        kind: 'in_flight',
        age: row['age'] === null || row['age'] === undefined ? null : Number(row['age']),
        leaseEndsAt: date(row['lease_ends_at']),
      };
    case 'prior_result':
      return { kind: 'prior_result', result: json(row['result']) };
    case 'prior_error':
      return { kind: 'prior_error', error: json(row['error']) as unknown as RecordedError };
    case 'mismatch':
      return {
        kind: 'mismatch',
        recordedHash: bytes(row['recorded_hash']),
        submittedHash: bytes(row['submitted_hash']) ?? Buffer.alloc(0),
        recordedRequest: json(row['recorded_request']),
      };
    default:
      throw new IdempotencyError('XX000', `unknown idempotency outcome ${JSON.stringify(row['kind'])}`,
        'idem_begin answers fresh, in_flight, prior_result, prior_error or mismatch.');
  }
}
