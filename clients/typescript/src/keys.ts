// Keys computed in the client, without a round trip: the rules of idem_mint,
// idem_parse and the namespace check, with the extension's messages and
// details word for word (test/kat/keys.csv and vectors.csv are the reference).
import { createHash } from 'node:crypto';
import { IdempotencyError } from './errors.js';

const INVALID_PARAMETER = '22023';

// Unicode White_Space, the 25 code points idem_parse trims and idem_mint calls blank.
const WHITE_SPACE = new Set<number>([
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680,
  0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
  0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
]);

// The code points of a string as the server receives it: node-postgres sends
// UTF-8, where a lone surrogate becomes U+FFFD.
function codePoints(s: string): number[] {
  const out: number[] = [];
  for (const ch of s.toWellFormed()) out.push(ch.codePointAt(0)!);
  return out;
}

// U+XXXX with at least four upper-case hex digits, as the extension writes a code point.
function uplus(cp: number): string {
  return 'U+' + cp.toString(16).toUpperCase().padStart(4, '0');
}

// A character as the namespace detail names it: quoted when printable ASCII
// other than the double quote, else U+XXXX (keys.csv's rule).
function nameChar(cp: number): string {
  return cp >= 0x21 && cp <= 0x7e && cp !== 0x22 ? `"${String.fromCodePoint(cp)}"` : uplus(cp);
}

// a-z, 0-9, "-" and "_": the namespace's alphabet.
function isNamespaceChar(cp: number): boolean {
  return (cp >= 0x61 && cp <= 0x7a) || (cp >= 0x30 && cp <= 0x39) || cp === 0x2d || cp === 0x5f;
}

/**
 * Checks a namespace as the extension does (1 to 64 characters of a-z, 0-9,
 * "-" and "_") and throws its error (22023) when it is not one.
 */
export function validateNamespace(namespace: string | null | undefined): asserts namespace is string {
  if (namespace === null || namespace === undefined) {
    throw new IdempotencyError(INVALID_PARAMETER, 'idempotency namespace must not be null',
      'Pass a namespace of 1 to 64 characters: a-z, 0-9, "-" and "_".');
  }
  if (typeof namespace !== 'string') throw new TypeError(`a namespace is a string, not ${typeof namespace}`);
  const bad = 'invalid idempotency namespace';
  const cps = codePoints(namespace);
  if (cps.length === 0) {
    throw new IdempotencyError(INVALID_PARAMETER, bad, 'The namespace is empty; it must be 1 to 64 characters.');
  }
  const at = cps.findIndex((cp) => !isNamespaceChar(cp));
  if (at >= 0) {
    throw new IdempotencyError(INVALID_PARAMETER, bad,
      `Character ${nameChar(cps[at]!)} at position ${at + 1} is not allowed; use only lower-case a-z, digits 0-9, "-" and "_".`);
  }
  if (cps.length > 64) {
    throw new IdempotencyError(INVALID_PARAMETER, bad, `The namespace is ${cps.length} characters long; the limit is 64.`);
  }
}

// The code points left once White_Space is removed from both ends.
function trimmed(cps: number[]): number[] {
  let start = 0;
  let end = cps.length;
  while (start < end && WHITE_SPACE.has(cps[start]!)) start++;
  while (end > start && WHITE_SPACE.has(cps[end - 1]!)) end--;
  return cps.slice(start, end);
}

/**
 * idem_parse in the client: a caller's key, trimmed of white space and checked
 * (not blank, at most 255 characters, no control character). A null or
 * undefined key gives null, once the namespace is checked.
 */
export function parse(namespace: string, raw: string | null | undefined): string | null {
  validateNamespace(namespace);
  if (raw === null || raw === undefined) return null;
  if (typeof raw !== 'string') throw new TypeError(`a key is a string, not ${typeof raw}`);
  const bad = 'invalid idempotency key';
  const key = trimmed(codePoints(raw));
  if (key.length === 0) {
    throw new IdempotencyError(INVALID_PARAMETER, bad, 'The key is blank: it is empty or only white space.');
  }
  if (key.length > 255) {
    throw new IdempotencyError(INVALID_PARAMETER, bad, `The key is ${key.length} characters long after trimming; the limit is 255.`);
  }
  const at = key.findIndex((cp) => cp < 0x20 || cp === 0x7f);
  if (at >= 0) {
    throw new IdempotencyError(INVALID_PARAMETER, bad, `The key contains control character ${uplus(key[at]!)} at position ${at + 1}.`);
  }
  return String.fromCodePoint(...key);
}

/**
 * idem_mint in the client: a deterministic key (64 lower-case hex digits) from
 * the natural key's parts, the SHA-256 of their count and each part's UTF-8
 * bytes, each with its length (uint32, big-endian). The namespace is checked
 * only: the same parts give the same key in every namespace.
 */
export function mint(namespace: string, parts: ReadonlyArray<string | null>): string {
  validateNamespace(namespace);
  if (parts === null || parts === undefined) {
    throw new IdempotencyError(INVALID_PARAMETER, 'idempotency key parts must not be null',
      'Pass a text[] with at least one non-blank part.');
  }
  if (!Array.isArray(parts)) throw new TypeError('the parts of a key are an array of strings');
  if (parts.length === 0) {
    throw new IdempotencyError(INVALID_PARAMETER, 'cannot mint an idempotency key from no parts',
      'Pass an array with at least one non-blank part.');
  }
  const bad = 'invalid idempotency key part';
  const encoded: Buffer[] = [];
  parts.forEach((part, i) => {
    if (part === null || part === undefined) throw new IdempotencyError(INVALID_PARAMETER, bad, `Part ${i + 1} is null.`);
    if (typeof part !== 'string') throw new TypeError(`part ${i + 1} of a key is a ${typeof part}, not a string`);
    if (part.length === 0) throw new IdempotencyError(INVALID_PARAMETER, bad, `Part ${i + 1} is empty.`);
    const cps = codePoints(part);
    if (cps.every((cp) => WHITE_SPACE.has(cp))) {
      throw new IdempotencyError(INVALID_PARAMETER, bad, `Part ${i + 1} is blank (only white space).`);
    }
    encoded.push(Buffer.from(part.toWellFormed(), 'utf8'));
  });
  const hash = createHash('sha256');
  const length = Buffer.alloc(4);
  length.writeUInt32BE(encoded.length);
  hash.update(length);
  for (const bytes of encoded) {
    const n = Buffer.alloc(4);
    n.writeUInt32BE(bytes.length);
    hash.update(n);
    hash.update(bytes);
  }
  return hash.digest('hex');
}
