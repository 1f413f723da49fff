package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// KeyError is a key rule the client checked locally: the SQLSTATE, message
// and detail are exactly those idem_mint and idem_parse raise on the server
// (test/kat/keys.csv), so callers can treat both alike.
type KeyError struct {
	Code    string // SQLSTATE: 22023, or 22021 for bytes that are not UTF-8
	Message string // e.g. "invalid idempotency key"
	Detail  string // e.g. "The key is blank: it is empty or only white space."
}

// Error prints the message, the detail and the SQLSTATE.
func (e *KeyError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("idempotency: %s (SQLSTATE %s)", e.Message, e.Code)
	}
	return fmt.Sprintf("idempotency: %s: %s (SQLSTATE %s)", e.Message, e.Detail, e.Code)
}

const (
	invalidParameter = "22023" // invalid_parameter_value
	badEncoding      = "22021" // character_not_in_repertoire
	maxNamespace     = 64
	maxKey           = 255
)

// ValidateNamespace checks a namespace as idem_mint, idem_parse and the store
// do: 1 to 64 characters, each one of a-z, 0-9, "-" and "_".
func ValidateNamespace(namespace string) error {
	if err := checkEncoding(namespace); err != nil {
		return err
	}
	return checkNamespace(namespace)
}

// Parse validates a key a caller supplied and returns it trimmed, exactly as
// idem_parse(namespace, raw) does, without a round trip.
func Parse(namespace, raw string) (string, error) {
	key, err := parse(namespace, &raw)
	if err != nil {
		return "", err
	}
	return *key, nil
}

// Mint returns the deterministic key of parts (64 lowercase hex digits),
// exactly as idem_mint(namespace, parts) does, without a round trip.
func Mint(namespace string, parts ...string) (string, error) {
	ptrs := make([]*string, len(parts))
	for i := range parts {
		ptrs[i] = &parts[i]
	}
	return mint(namespace, ptrs)
}

// parse is idem_parse with SQL NULL as nil: a nil raw gives a nil key once
// the namespace is valid.
func parse(namespace string, raw *string) (*string, error) {
	if err := checkEncoding(namespace); err != nil {
		return nil, err
	}
	if raw != nil {
		if err := checkEncoding(*raw); err != nil {
			return nil, err
		}
	}
	if err := checkNamespace(namespace); err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, nil
	}
	key := strings.TrimFunc(*raw, isWhiteSpace)
	bad := func(detail string, args ...any) (*string, error) {
		return nil, &KeyError{invalidParameter, "invalid idempotency key", fmt.Sprintf(detail, args...)}
	}
	if key == "" {
		return bad("The key is blank: it is empty or only white space.")
	}
	if n := utf8.RuneCountInString(key); n > maxKey {
		return bad("The key is %d characters long after trimming; the limit is %d.", n, maxKey)
	}
	pos := 0
	for _, r := range key {
		pos++
		if r < 0x20 || r == 0x7f {
			return bad("The key contains control character %s at position %d.", codePoint(r), pos)
		}
	}
	return &key, nil
}

// mint is idem_mint with SQL NULL parts as nil: the checks in the server's
// order, then SHA-256 of the length-prefixed parts.
func mint(namespace string, parts []*string) (string, error) {
	if err := checkEncoding(namespace); err != nil {
		return "", err
	}
	for _, p := range parts {
		if p != nil {
			if err := checkEncoding(*p); err != nil {
				return "", err
			}
		}
	}
	if err := checkNamespace(namespace); err != nil {
		return "", err
	}
	if len(parts) == 0 {
		return "", &KeyError{invalidParameter, "cannot mint an idempotency key from no parts",
			"Pass an array with at least one non-blank part."}
	}
	for i, p := range parts {
		detail := ""
		switch {
		case p == nil:
			detail = "Part %d is null."
		case *p == "":
			detail = "Part %d is empty."
		case strings.TrimFunc(*p, isWhiteSpace) == "":
			detail = "Part %d is blank (only white space)."
		default:
			continue
		}
		return "", &KeyError{invalidParameter, "invalid idempotency key part", fmt.Sprintf(detail, i+1)}
	}
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(parts)))
	h.Write(n[:])
	for _, p := range parts {
		binary.BigEndian.PutUint32(n[:], uint32(len(*p)))
		h.Write(n[:])
		h.Write([]byte(*p))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkNamespace applies the namespace rule in the server's order: empty,
// then the first disallowed character, then the length.
func checkNamespace(ns string) error {
	bad := func(detail string, args ...any) error {
		return &KeyError{invalidParameter, "invalid idempotency namespace", fmt.Sprintf(detail, args...)}
	}
	if ns == "" {
		return bad("The namespace is empty; it must be 1 to %d characters.", maxNamespace)
	}
	pos := 0
	for _, r := range ns {
		pos++
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return bad(`Character %s at position %d is not allowed; use only lower-case a-z, digits 0-9, "-" and "_".`,
				shownCharacter(r), pos)
		}
	}
	if pos > maxNamespace {
		return bad("The namespace is %d characters long; the limit is %d.", pos, maxNamespace)
	}
	return nil
}

// shownCharacter writes a character as the namespace detail does: in double
// quotes when printable ASCII other than the double quote, else U+XXXX.
func shownCharacter(r rune) string {
	if r > 0x20 && r < 0x7f && r != '"' {
		return `"` + string(r) + `"`
	}
	return codePoint(r)
}

// codePoint writes U+XXXX with at least four upper-case hex digits.
func codePoint(r rune) string { return fmt.Sprintf("U+%04X", r) }

// isWhiteSpace is Unicode's White_Space property, the 25 characters the
// server trims (listed, not taken from Go's tables, so that a new Unicode
// version cannot change a key).
func isWhiteSpace(r rune) bool {
	switch {
	case r >= 0x09 && r <= 0x0d, r == 0x20, r == 0x85, r == 0xa0, r == 0x1680,
		r >= 0x2000 && r <= 0x200a, r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}

// checkEncoding refuses what PostgreSQL refuses before any function runs: a
// string that is not valid UTF-8 or holds a NUL byte, with PostgreSQL's own
// message (SQLSTATE 22021), naming the bytes of the first bad character.
func checkEncoding(s string) error {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r != utf8.RuneError || size > 1) && r != 0 {
			i += size
			continue
		}
		n := utf8SequenceLength(s[i])
		n = min(n, len(s)-i, 8)
		shown := make([]string, n)
		for j := range n {
			shown[j] = fmt.Sprintf("0x%02x", s[i+j])
		}
		return &KeyError{badEncoding, `invalid byte sequence for encoding "UTF8": ` + strings.Join(shown, " "), ""}
	}
	return nil
}

// utf8SequenceLength is PostgreSQL's pg_utf_mblen: the length a leading byte
// announces (1 for a byte that starts no sequence).
func utf8SequenceLength(b byte) int {
	switch {
	case b&0x80 == 0:
		return 1
	case b&0xe0 == 0xc0:
		return 2
	case b&0xf0 == 0xe0:
		return 3
	case b&0xf8 == 0xf0:
		return 4
	}
	return 1
}
