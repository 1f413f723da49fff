// header.hpp: the Idempotency-Key HTTP header field, as the IETF draft
// (draft-ietf-httpapi-idempotency-key-header) defines it: a Structured Field
// Item whose value is a String (RFC 9651 sf-string), and, as Stripe-style
// APIs send it, a bare value.
#pragma once

#include "utf8.hpp"

namespace idem::core {

// The key in an Idempotency-Key field value. A value whose first character
// (after optional white space) is a double quote is an sf-string: printable
// ASCII (0x20-0x7E) between double quotes, with \" and \\ the only escapes,
// and nothing after the closing quote but white space (no parameters, no
// second value). Its unescaped content, written to buffer (header.size
// bytes), is then a key under parse_key's rules. Any other value is a bare
// key, taken literally under the same rules, so "abc" and abc are the same
// key; a bare value holding a comma (a list) or a double quote is refused.
// Throws Error(22023) whose detail names the rule that failed.
Slice header_key(Slice header, char* buffer);

}  // namespace idem::core
