#!/usr/bin/env python3
"""Known-answer-vector (KAT) generator for the extension's hashing functions.

What this is
    An independent generator of test vectors for
      * the MINT key: SHA-256 over a length-prefixed encoding of a list of
        strings ("parts"), and
      * the CANONICAL JSON text of a JSON value and its SHA-256 request hash,
      * the FINGERPRINT: the canonical text of a JSON value with the parts
        named by RFC 6901 JSON Pointers left out, and its SHA-256.

Independence
    Everything here is derived only from the written specification (restated
    below), using the Python 3.11 standard library.  It was written without
    looking at the C++ implementation, so that agreement between the two is
    real evidence of correctness rather than a copy of the same mistakes.

Specification
    1. MINT key = lowercase hex SHA-256 over:
         uint32 big-endian count of parts, then for each part
         uint32 big-endian UTF-8 byte length followed by the UTF-8 bytes.
    2. CANONICAL JSON:
         * object keys sorted by Unicode code point at every depth
           (NOT UTF-16 order: U+FFFD sorts before U+1F600);
         * array order kept; no whitespace; separators "," and ":";
         * literals true / false / null;
         * strings escaped like PostgreSQL's escape_json:
             "  -> \\"     \\ -> \\\\     U+0008 -> \\b   U+000C -> \\f
             U+000A -> \\n  U+000D -> \\r  U+0009 -> \\t
             other chars < U+0020 -> \\u00xx (lowercase hex),
             everything else (incl. "/", U+007F, non-ASCII) literal UTF-8;
         * numbers in PostgreSQL numeric text form: parsed as decimal.Decimal
           and printed with format(d, 'f'); negative zero loses its sign.
       Request hash = lowercase hex SHA-256 of the canonical text (UTF-8).
    3. FINGERPRINT of a JSON value and a non-empty list of JSON Pointers
       (RFC 6901, UTF-8):
         * a pointer is "/" followed by reference tokens separated by "/";
           in a token "~1" decodes to "/", then "~0" to "~" (so "~01" is
           "~1"); "~" followed by anything else is not a pointer; "" (the
           whole document) is refused and never used here;
         * an object member is left out when a pointer's tokens end exactly
           at it (its key equals the token at that depth along the path);
         * an array element at index i is left out when the token at that
           depth is i in decimal without leading zeros ("01" and "-" never
           match); indices are the ORIGINAL positions and later elements
           close up ([a,b,c] without /0 and /1 is [c]);
         * a pointer whose path goes through a scalar, a missing member or a
           non-index token on an array leaves out nothing; a pointer that is
           a prefix of another makes the longer one redundant; the top-level
           value itself is never left out;
         * the rest is written with the CANONICAL rules above and hashed
           like a request hash.

Output
    vectors.csv next to this script; columns kind,name,input,parts_hex,
    canonical,sha256 (csv module default dialect, QUOTE_MINIMAL, '\\n' line
    terminator, UTF-8, header row).
      kind=mint:      input = parts as compact JSON array, parts_hex = hex of
                      each part's UTF-8 bytes joined with '.', sha256 = key.
      kind=canonical: input = non-canonical JSON text accepted by PostgreSQL
                      jsonb input (no duplicate keys, no \\u0000),
                      canonical = expected canonical text, sha256 = its hash.
      kind=fingerprint: input = JSON text (as for canonical), parts_hex = hex
                      of each pointer's UTF-8 bytes joined with '.',
                      canonical = expected canonical text with the pointed-to
                      parts left out, sha256 = its hash.

    keys.csv next to it, for the KEY rules (the same dialect); columns
    function,name,input,key,message,detail:
      function=namespace: input = the namespace as a JSON string; key =
                      "ok" when valid, else empty with the error.
      function=parse: input = the raw value as a JSON string (or null: an
                      absent header); key = the parsed key as a JSON string,
                      null for a null input, empty on an error.
      function=mint:  input = the parts as a JSON array (null: a SQL NULL
                      part); key = the minted key as a JSON string, empty on
                      an error.
      message and detail: the error (SQLSTATE 22023) when key is empty.
    The KEY rules:
      4. NAMESPACE: 1 to 64 characters, each one of a-z, 0-9, "-", "_".
         Errors, checked in this order: empty ("The namespace is empty; it
         must be 1 to 64 characters."); the first character outside the
         alphabet, by its 1-based position in characters ("Character "X" at
         position P is not allowed; use only lower-case a-z, digits 0-9,
         "-" and "_"." where X is the character itself when it is printable
         ASCII other than space and double quote, else U+XXXX with at least
         four upper-case hex digits); too long ("The namespace is N
         characters long; the limit is 64.").
      5. PARSE: remove Unicode White_Space (U+0009-U+000D, U+0020, U+0085,
         U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F,
         U+3000) from both ends; errors, in this order: nothing left ("The
         key is blank: it is empty or only white space."), more than 255
         code points ("The key is N characters long after trimming; the
         limit is 255."), a control character (below U+0020, or U+007F)
         ("The key contains control character U+XXXX at position P.", the
         first one, P its 1-based code point position in the trimmed key).
         Message: "invalid idempotency key".
      6. MINT errors: no parts ("cannot mint an idempotency key from no
         parts" / "Pass an array with at least one non-blank part."); else
         the first part, by 1-based position, that is NULL ("Part P is
         null."), empty ("Part P is empty.") or only White_Space ("Part P
         is blank (only white space)."), message "invalid idempotency key
         part".

How to run
    python3 test/kat/vectors.py           # (re)write test/kat/vectors.csv and keys.csv
    python3 test/kat/vectors.py --check   # exit 1 if either is stale
"""

import csv
import hashlib
import io
import json
import os
import re
import struct
import sys
from decimal import Decimal

HERE = os.path.dirname(os.path.abspath(__file__))
CSV_PATH = os.path.join(HERE, "vectors.csv")
KEYS_PATH = os.path.join(HERE, "keys.csv")
KEY_COLUMNS = ["function", "name", "input", "key", "message", "detail"]
COLUMNS = ["kind", "name", "input", "parts_hex", "canonical", "sha256"]


# --------------------------------------------------------------------------
# 1. MINT key
# --------------------------------------------------------------------------

def mint_bytes(parts):
    if not parts:
        raise ValueError("empty parts list is not a valid MINT input")
    out = bytearray(struct.pack(">I", len(parts)))
    for p in parts:
        if not isinstance(p, str):
            raise TypeError("parts must be str")
        b = p.encode("utf-8")  # raises on lone surrogates: good
        out += struct.pack(">I", len(b))
        out += b
    return bytes(out)


def mint_key(parts):
    return hashlib.sha256(mint_bytes(parts)).hexdigest()


# --------------------------------------------------------------------------
# 2. Canonical JSON
# --------------------------------------------------------------------------

_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def canon_string(s):
    out = ['"']
    for ch in s:
        esc = _SHORT_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def canon_number(d):
    assert isinstance(d, Decimal) and d.is_finite()
    if d.is_zero() and d.is_signed():
        d = d.copy_abs()
    return format(d, "f")


def canonical(v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, str):
        return canon_string(v)
    if isinstance(v, Decimal):
        return canon_number(v)
    if isinstance(v, list):
        return "[" + ",".join(canonical(x) for x in v) + "]"
    if isinstance(v, dict):
        # Python str comparison is code-point order.
        return "{" + ",".join(
            canon_string(k) + ":" + canonical(v[k]) for k in sorted(v)
        ) + "}"
    raise TypeError("unexpected JSON value type %r" % type(v))


def _no_dup_pairs(pairs):
    d = {}
    for k, val in pairs:
        if k in d:
            raise ValueError("duplicate key %r (jsonb would drop one)" % k)
        d[k] = val
    return d


def _reject_constant(name):
    raise ValueError("non-JSON constant %s" % name)


def parse_json(text):
    """Parse strictly enough to be sure PostgreSQL jsonb accepts the text."""
    v = json.loads(
        text,
        parse_float=Decimal,
        parse_int=Decimal,
        parse_constant=_reject_constant,
        object_pairs_hook=_no_dup_pairs,
    )
    _check_pg_safe(v)
    return v


def _check_pg_safe(v):
    def chk_str(s):
        if "\x00" in s:
            raise ValueError("\\u0000 is rejected by jsonb")
        s.encode("utf-8")  # lone surrogates would raise here
    if isinstance(v, str):
        chk_str(v)
    elif isinstance(v, list):
        for x in v:
            _check_pg_safe(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            chk_str(k)
            _check_pg_safe(x)


def request_hash(canon_text):
    return hashlib.sha256(canon_text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------
# 3. Fingerprint: canonical JSON with parts named by JSON Pointers left out
# --------------------------------------------------------------------------

def pointer_tokens(pointer):
    """The reference tokens of an RFC 6901 pointer (section 3 and 4)."""
    if not isinstance(pointer, str):
        raise TypeError("a pointer is a str")
    pointer.encode("utf-8")  # lone surrogates would raise here
    if pointer == "":
        raise ValueError('"" (the whole document) is refused')
    if not pointer.startswith("/"):
        raise ValueError("a pointer starts with '/': %r" % pointer)
    tokens = pointer[1:].split("/")
    for t in tokens:
        if re.search(r"~(?![01])", t):
            raise ValueError("'~' not followed by 0 or 1 in %r" % pointer)
    # RFC 6901 section 4: first "~1" -> "/", then "~0" -> "~".
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def _array_index_token(i):
    # RFC 6901 array-index: "0" or a digit 1-9 followed by digits.
    return str(i)


def ignore_parts(value, pointers):
    """value with every part named by one of pointers left out."""
    if not pointers:
        raise ValueError("an empty pointer list is not a valid input")
    # A trie of token paths; None marks a path where a pointer ends (all
    # below it goes with it, so longer pointers under it are redundant).
    root = {}
    for p in pointers:
        node = root
        toks = pointer_tokens(p)
        for depth, t in enumerate(toks):
            last = depth == len(toks) - 1
            if last:
                node[t] = None
                break
            nxt = node.get(t, {})
            if nxt is None:  # a shorter pointer already leaves this out
                break
            node[t] = nxt
            node = nxt

    def walk(v, node):
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if k in node:
                    child = node[k]
                    if child is None:
                        continue
                    out[k] = walk(x, child)
                else:
                    out[k] = x
            return out
        if isinstance(v, list):
            out = []
            for i, x in enumerate(v):
                tok = _array_index_token(i)
                if tok in node:
                    child = node[tok]
                    if child is None:
                        continue
                    out.append(walk(x, child))
                else:
                    out.append(x)
            return out
        return v  # a scalar: nothing below it to leave out

    return walk(value, root)  # the top-level value itself always stays


def fingerprint_text(value, pointers):
    return canonical(ignore_parts(value, pointers))


# --------------------------------------------------------------------------
# Vectors
# --------------------------------------------------------------------------

MINT_VECTORS = [
    ("single_a", ["a"]),
    ("ab_c", ["ab", "c"]),
    ("a_bc", ["a", "bc"]),
    ("c_ab_order", ["c", "ab"]),
    ("a_a_two_parts", ["a", "a"]),
    ("spaces_kept", [" a b "]),
    ("spaces_kept_trimmed_variant", ["a b"]),
    ("latin_e_acute", ["é"]),
    ("e_plus_combining_acute", ["e\u0301"]),
    ("cjk_nihongo", ["日本語"]),
    ("mixed_ascii_nonascii_parts", ["tenant", "café", "日本語"]),
    ("emoji_grinning", ["😀"]),
    ("part_1000_chars", ["x" * 1000]),
    ("part_1000_chars_multibyte", ["é" * 1000]),
    ("twenty_parts", ["p%02d" % i for i in range(20)]),
    ("part_with_tab", ["a\tb"]),
    ("part_with_u0001", ["a\x01b"]),
    ("part_with_newline", ["line1\nline2"]),
    ("part_u_fffd", ["\ufffd"]),
    ("part_u_1f600_embedded", ["x\U0001F600y"]),
    ("part_u_fffd_embedded", ["x\ufffdy"]),
    ("part_u_fffd_then_u_1f600", ["\ufffd", "\U0001F600"]),
    ("part_u_1f600_then_u_fffd", ["\U0001F600", "\ufffd"]),
    ("quote_backslash_comma", ['a"b\\c,d']),
    ("dot_in_part", ["a.b"]),
    ("dot_split_variant", ["a", "b"]),
]

_DEEP50_INPUT = ('{ "a" : [ ' * 50) + '"leaf"' + (' ] }' * 50)
# Unpadded numbers give keys of length 2 and 3, so code-point order
# (k0, k1, k10, ..., k19, k2, k20, ...) differs from jsonb's shortest-first.
_KEYS30 = ["k%d" % i for i in range(30)]
# Reverse order + a multi-line layout so the input is far from canonical.
_OBJ30_INPUT = "{\n" + ",\n".join(
    '  "%s" : %d' % (k, 30 - i) if i % 3 else '  "%s" : [ %d , "v%s" ]' % (k, i, k)
    for i, k in reversed(list(enumerate(_KEYS30)))
) + "\n}"

CANONICAL_VECTORS = [
    # empty containers
    ("empty_object", "{ }"),
    ("empty_array", "[ ]"),
    ("nested_empty_containers", '{ "b" : [ { } , [ ] , [ [ ] ] ] , "a" : { "x" : { } } }'),
    # top-level scalars
    ("top_string", ' "hello" '),
    ("top_number", " 42 "),
    ("top_true", " true "),
    ("top_false", "\nfalse\n"),
    ("top_null", "\tnull "),
    # key ordering
    ("keys_out_of_order_flat", '{"c": 3, "a": 1, "b": 2}'),
    ("keys_out_of_order_nested",
     '{"z": {"y": {"b": 1, "a": 2}, "x": [ {"d": 4, "c": 3} ]}, "a": {"n": null, "m": true}}'),
    ("keys_length_vs_codepoint", '{"b": 1, "ab": 2, "a": 3, "aa": 4, "": 5}'),
    ("keys_fffd_vs_emoji", '{"😀": "emoji", "\ufffd": "replacement"}'),
    ("keys_fffd_vs_emoji_escaped",
     '{"\\ud83d\\ude00": 1, "\\ufffd": 2}'),
    ("keys_e_acute_z_upper_z", '{"é": 1, "z": 2, "Z": 3}'),
    ("keys_case_and_digits", '{"b": 1, "B": 2, "1": 3, "_": 4, "a": 5}'),
    ("keys_bmp_high_vs_supplementary",
     '{"\U00010000": 1, "\uffee": 2, "\ue000": 3, "\u00ff": 4}'),
    # arrays
    ("array_order_preserved", '[3, 1, 2, "b", "a"]'),
    ("array_of_objects_keys_sorted",
     '[ {"b": 1, "a": 2}, {"d": [ {"z": 0, "y": 1} ], "c": null} ]'),
    ("array_mixed_types", '[ null , true , false , "s" , 1.0 , [ ] , { } ]'),
    # string escapes
    ("string_all_short_escapes", r' [ "quote\" backslash\\ b\b f\f n\n r\r t\t" ] '),
    ("string_short_escapes_as_u", r'"\u0022\u005c\u0008\u000c\u000a\u000d\u0009"'),
    ("string_control_u0001_u001f", r'"x\u0001y\u001Fz"'),
    ("string_all_controls",
     '"' + "".join("\\u%04X" % c for c in range(1, 0x20)) + '"'),
    ("string_u007f_literal", '"del\\u007Fdel"'),
    ("string_slash_literal", r'"a\/b/c"'),
    ("string_non_ascii_literal", '{ "s" : "café 日本語" }'),
    ("string_non_ascii_escaped", r'"caf\u00e9 \u65E5\u672c\u8a9E"'),
    ("string_emoji_literal", ' "😀"\n'),
    ("string_emoji_surrogate_pair", r'"\ud83d\ude00"'),
    ("string_u2028_u2029", r'"a\u2028b\u2029c"'),
    ("string_key_escapes", r'{"k\"\\\n": "v\t", "k": "plain"}'),
    # numbers
    ("number_zero", "[ 0 ]"),
    ("number_neg_zero", "[ -0 ]"),
    ("number_neg_zero_point_zero", "[ -0.0 ]"),
    ("number_one_point_zero", " 1.0"),
    ("number_trailing_zero_kept", " 1.50"),
    ("number_exp_1e2", " 1e2"),
    ("number_exp_1e_minus_2_upper_e", " 1E-2"),
    ("number_exp_1_5e1", " 1.5e1"),
    ("number_exp_1_50e1", " 1.50e1"),
    ("number_negative_scale", " -12.3400"),
    ("number_big_integer", " 123456789012345678901234567890"),
    ("number_small_fraction", " 0.000001"),
    ("number_exp_plus_sign", " 2.5E+3"),
    ("numbers_in_object",
     '{"n": -0, "m": 1.50, "l": 1e2, "k": 1E-2, "j": 1.5e1, "i": 1.50e1, '
     '"h": -12.3400, "g": 123456789012345678901234567890, "f": 0.000001, '
     '"e": -0.0, "d": 0, "c": 1.0}'),
    # bigger values
    ("deep_nested_50", _DEEP50_INPUT),
    ("object_30_keys", _OBJ30_INPUT),
]

# (name, JSON text, pointers, leaves_out): leaves_out=False marks the
# vectors whose pointers deliberately match nothing ("no effect").
FINGERPRINT_VECTORS = [
    ("ignore_top_level_member",
     '{"nonce": "n-1", "amount": 10, "currency": "EUR"}', ["/nonce"], True),
    ("ignore_nested_member",
     '{"meta": {"ts": 1700000000, "id": "r1"}, "amount": 10}', ["/meta/ts"], True),
    ("ignore_member_in_array_element",
     '{"items": [{"nonce": 1, "sku": "a"}, {"nonce": 2, "sku": "b"}]}',
     ["/items/0/nonce"], True),
    ("ignore_array_element_middle",
     '{"a": ["x", "y", "z", "w"]}', ["/a/1"], True),
    ("ignore_two_elements_original_indices",
     '{"a": ["x", "y", "z"]}', ["/a/0", "/a/1"], True),
    ("ignore_elements_one_and_three",
     '{"a": [0, 1, 2, 3, 4]}', ["/a/3", "/a/1"], True),
    ("ignore_index_leading_zero_no_effect",
     '{"a": [0, 1, 2]}', ["/a/01"], False),
    ("ignore_index_dash_no_effect",
     '{"a": [0, 1, 2]}', ["/a/-"], False),
    ("ignore_index_out_of_range_no_effect",
     '{"a": [0, 1, 2]}', ["/a/3", "/a/99"], False),
    ("ignore_through_scalar_no_effect",
     '{"a": 1, "s": "str", "n": null}', ["/a/b", "/s/0", "/n/x"], False),
    ("ignore_missing_member_no_effect",
     '{"a": {"b": 1}}', ["/zz", "/a/c", "/a/b/c"], False),
    ("ignore_non_index_token_on_array_no_effect",
     '{"a": [{"x": 1}]}', ["/a/x", "/a/ 0", "/a/+0", "/a/0x"], False),
    ("ignore_top_level_scalar_no_effect", ' 42 ', ["/a", "/0"], False),
    ("ignore_tilde0_in_name",
     '{"a~b": 1, "a/b": 2, "ab": 3}', ["/a~0b"], True),
    ("ignore_tilde1_in_name",
     '{"a~b": 1, "a/b": 2, "ab": 3}', ["/a~1b"], True),
    ("ignore_tilde01_is_tilde_one",
     '{"~1": 1, "/": 2, "~": 3, "~/": 4}', ["/~01"], True),
    ("ignore_tilde10_is_slash_zero",
     '{"/0": 1, "~0": 2, "/": {"0": 3}}', ["/~10"], True),
    ("ignore_empty_name_member",
     '{"": 1, "a": {"": 2, "b": 3}}', ["/"], True),
    ("ignore_empty_name_nested",
     '{"": 1, "a": {"": 2, "b": 3}}', ["/a/"], True),
    ("ignore_prefix_makes_longer_redundant",
     '{"a": {"b": 1, "c": 2}, "d": 3}', ["/a/b", "/a", "/a/c/zz"], True),
    ("ignore_key_order_after_removal",
     '{"😀": 6, "b": 1, "�": 5, "ab": 2, "aa": 4, "a": 3}', ["/ab"], True),
    ("ignore_non_ascii_names",
     '{"é": 1, "😀": {"x": 1, "é": 2}, "e": 3}', ["/é", "/😀/x"], True),
    ("ignore_top_level_array_element",
     ' [ "a" , "b" , "c" ] ', ["/1"], True),
    ("ignore_nested_arrays",
     '[[1, 2], [3, 4]]', ["/1/0"], True),
    ("ignore_leaves_object_empty",
     '{"a": {"t": 1}}', ["/a/t"], True),
    ("ignore_every_member",
     '{"a": 1, "b": [2], "c": {"d": 3}}', ["/c", "/a", "/b"], True),
    ("ignore_every_element",
     '[1, 2]', ["/0", "/1"], True),
    ("ignore_number_like_object_key",
     '{"0": 1, "1": 2, "00": 3}', ["/0"], True),
    ("ignore_leading_zero_object_key",
     '{"0": 1, "1": 2, "00": 3}', ["/00"], True),
    ("ignore_duplicate_pointer",
     '{"a": 1, "b": 2}', ["/a", "/a"], True),
]


# --------------------------------------------------------------------------
# Build, self-check, write
# --------------------------------------------------------------------------

def build_rows():
    rows = []
    for name, parts in MINT_VECTORS:
        assert parts, "an empty parts list must never be emitted"
        rows.append({
            "kind": "mint",
            "name": name,
            "input": json.dumps(parts, ensure_ascii=False, separators=(",", ":")),
            "parts_hex": ".".join(p.encode("utf-8").hex() for p in parts),
            "canonical": "",
            "sha256": mint_key(parts),
        })
    for name, text in CANONICAL_VECTORS:
        value = parse_json(text)
        canon = canonical(value)
        assert canon != text, "input of %s is already canonical" % name
        # canonical form is a fixed point and round-trips to the same value
        assert canonical(parse_json(canon)) == canon, name
        assert parse_json(canon) == value, name
        rows.append({
            "kind": "canonical",
            "name": name,
            "input": text,
            "parts_hex": "",
            "canonical": canon,
            "sha256": request_hash(canon),
        })
    for name, text, pointers, leaves_out in FINGERPRINT_VECTORS:
        assert pointers, "an empty pointer list must never be emitted"
        assert "" not in pointers, '"" is refused by the product'
        value = parse_json(text)
        whole = canonical(value)
        canon = fingerprint_text(value, pointers)
        if leaves_out:
            assert canon != whole, "%s leaves nothing out" % name
        else:
            assert canon == whole, "%s is marked 'no effect'" % name
        assert canonical(parse_json(canon)) == canon, name
        rows.append({
            "kind": "fingerprint",
            "name": name,
            "input": text,
            "parts_hex": ".".join(p.encode("utf-8").hex() for p in pointers),
            "canonical": canon,
            "sha256": request_hash(canon),
        })
    names = [r["name"] for r in rows]
    assert len(names) == len(set(names)), "duplicate vector names"
    for n in names:
        assert re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)*", n), "bad name %r" % n
    hashes = [r["sha256"] for r in rows if r["kind"] == "mint"]
    assert len(hashes) == len(set(hashes)), "MINT key collision among vectors"
    return rows


def self_checks():
    # length prefixing separates part boundaries
    assert mint_key(["ab", "c"]) != mint_key(["a", "bc"])
    assert mint_key(["c", "ab"]) != mint_key(["ab", "c"])
    assert mint_key(["a", "b"]) != mint_key(["a.b"])
    # the exact byte layout, checked by hand
    assert mint_bytes(["a"]) == b"\x00\x00\x00\x01" b"\x00\x00\x00\x01" b"a"
    assert mint_bytes(["é"]) == b"\x00\x00\x00\x01\x00\x00\x00\x02\xc3\xa9"
    assert mint_bytes(["😀"])[4:8] == b"\x00\x00\x00\x04"
    # empty parts list is rejected (and so never emitted)
    try:
        mint_key([])
    except ValueError:
        pass
    else:
        raise AssertionError("empty parts list accepted")
    assert all(parts for _, parts in MINT_VECTORS)
    # code-point key order, not UTF-16 order
    assert sorted(["\U0001F600", "\ufffd"]) == ["\ufffd", "\U0001F600"]
    assert canonical({"\U0001F600": Decimal(1), "\ufffd": Decimal(2)}) == \
        '{"\ufffd":2,"\U0001F600":1}'
    assert canonical(parse_json('{"b":1,"ab":2,"a":3,"aa":4,"":5}')) == \
        '{"":5,"a":3,"aa":4,"ab":2,"b":1}'
    # string escaping, hand-written expectations
    assert canon_string('"\\\b\f\n\r\t') == r'"\"\\\b\f\n\r\t"'
    assert canon_string("\x01\x1f\x7f/") == '"\\u0001\\u001f\x7f/"'
    assert canon_string("é😀") == '"é😀"'
    # cross-check against the stdlib encoder (same rules for strings)
    for c in range(0, 0x300):
        s = chr(c)
        assert canon_string(s) == json.dumps(s, ensure_ascii=False), hex(c)
    # numbers
    for src, want in [("0", "0"), ("-0", "0"), ("-0.0", "0.0"), ("1.0", "1.0"),
                      ("1.50", "1.50"), ("1e2", "100"), ("1E-2", "0.01"),
                      ("1.5e1", "15"), ("1.50e1", "15.0"),
                      ("-12.3400", "-12.3400"), ("0.000001", "0.000001"),
                      ("123456789012345678901234567890",
                       "123456789012345678901234567890")]:
        assert canonical(parse_json(src)) == want, (src, want)
    # parser guards
    for bad in ['{"a":1,"a":2}', '"\\u0000"', "NaN", '"\\ud83d"']:
        try:
            parse_json(bad)
        except (ValueError, UnicodeEncodeError):
            pass
        else:
            raise AssertionError("accepted %r" % bad)
    # JSON Pointer decoding, hand-written expectations (RFC 6901 sections 3-5)
    assert pointer_tokens("/") == [""]
    assert pointer_tokens("/a/b") == ["a", "b"]
    assert pointer_tokens("/a~1b") == ["a/b"]
    assert pointer_tokens("/m~0n") == ["m~n"]
    assert pointer_tokens("/~01") == ["~1"]
    assert pointer_tokens("/~10") == ["/0"]
    assert pointer_tokens("//") == ["", ""]
    assert pointer_tokens("/é/😀") == ["é", "😀"]
    for bad in ["", "a", "/~", "/~2", "/a~"]:
        try:
            pointer_tokens(bad)
        except ValueError:
            pass
        else:
            raise AssertionError("accepted pointer %r" % bad)
    # fingerprints, hand-written expectations
    def fp(text, pointers):
        return fingerprint_text(parse_json(text), pointers)
    assert fp('{"nonce":"n","amount":10}', ["/nonce"]) == '{"amount":10}'
    assert fp('{"a":["x","y","z"]}', ["/a/1"]) == '{"a":["x","z"]}'
    assert fp('{"a":["x","y","z"]}', ["/a/0", "/a/1"]) == '{"a":["z"]}'
    assert fp('{"a":["x","y","z"]}', ["/a/01", "/a/-", "/a/3"]) == \
        '{"a":["x","y","z"]}'
    assert fp('{"items":[{"nonce":1,"sku":"a"},{"nonce":2}]}',
              ["/items/0/nonce"]) == '{"items":[{"sku":"a"},{"nonce":2}]}'
    assert fp('[[1,2],[3,4]]', ["/1/0"]) == '[[1,2],[4]]'
    assert fp('["a","b","c"]', ["/1"]) == '["a","c"]'
    assert fp('{"a":{"t":1}}', ["/a/t"]) == '{"a":{}}'
    assert fp('{"a":1,"b":2}', ["/a", "/b"]) == '{}'
    assert fp('{"0":1,"1":2}', ["/0"]) == '{"1":2}'
    assert fp('{"~1":1,"/":2,"~":3}', ["/~01"]) == '{"/":2,"~":3}'
    assert fp('{"a~b":1,"a/b":2}', ["/a~1b"]) == '{"a~b":1}'
    assert fp('{"":1,"a":2}', ["/"]) == '{"a":2}'
    assert fp('{"a":{"b":1,"c":2},"d":3}', ["/a/b", "/a"]) == '{"d":3}'
    assert fp('{"a":1,"s":"x"}', ["/a/b", "/s/0"]) == '{"a":1,"s":"x"}'
    assert fp('{"é":1,"😀":{"x":1,"y":2},"e":3}', ["/é", "/😀/x"]) == \
        '{"e":3,"😀":{"y":2}}'
    assert fp('{"😀":1,"ab":2,"�":3,"b":4}', ["/ab"]) == \
        '{"b":4,"�":3,"😀":1}'
    assert fp('5', ["/a"]) == '5'
    try:
        ignore_parts(parse_json("{}"), [])
    except ValueError:
        pass
    else:
        raise AssertionError("empty pointer list accepted")
    assert all(ptrs and "" not in ptrs for _, _, ptrs, _ in FINGERPRINT_VECTORS)
    # known SHA-256 values
    assert request_hash("{}") == \
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


def render(rows):
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    text = buf.getvalue()
    # the CSV must read back to exactly the rows written
    back = list(csv.DictReader(io.StringIO(text, newline="")))
    assert back == rows, "CSV round-trip mismatch"
    return text.encode("utf-8")


# --------------------------------------------------------------------------
# Keys: namespace, parse and mint rules (4, 5, 6 above)
# --------------------------------------------------------------------------

WHITE_SPACE = set(range(0x09, 0x0E)) | {0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F,
                                        0x205F, 0x3000} | set(range(0x2000, 0x200B))
NAMESPACE_ALPHABET = set("abcdefghijklmnopqrstuvwxyz0123456789-_")


def code_point_label(ch):
    return "U+%04X" % ord(ch)


def check_namespace(ns):
    """None when valid, else (message, detail)."""
    bad = "invalid idempotency namespace"
    if ns == "":
        return bad, "The namespace is empty; it must be 1 to 64 characters."
    for pos, ch in enumerate(ns, 1):
        if ch not in NAMESPACE_ALPHABET:
            shown = '"%s"' % ch if 0x20 < ord(ch) < 0x7F and ch != '"' else code_point_label(ch)
            return bad, ("Character %s at position %d is not allowed; use only lower-case a-z, "
                         'digits 0-9, "-" and "_".' % (shown, pos))
    if len(ns) > 64:
        return bad, "The namespace is %d characters long; the limit is 64." % len(ns)
    return None


def parse_key(raw):
    """(key, None) or (None, (message, detail))."""
    bad = "invalid idempotency key"
    chars = list(raw)
    while chars and ord(chars[0]) in WHITE_SPACE:
        chars.pop(0)
    while chars and ord(chars[-1]) in WHITE_SPACE:
        chars.pop()
    if not chars:
        return None, (bad, "The key is blank: it is empty or only white space.")
    if len(chars) > 255:
        return None, (bad, "The key is %d characters long after trimming; the limit is 255." % len(chars))
    for pos, ch in enumerate(chars, 1):
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return None, (bad, "The key contains control character %s at position %d." % (code_point_label(ch), pos))
    return "".join(chars), None


def mint_checked(parts):
    """(key, None) or (None, (message, detail))."""
    if not parts:
        return None, ("cannot mint an idempotency key from no parts",
                      "Pass an array with at least one non-blank part.")
    for pos, part in enumerate(parts, 1):
        what = None
        if part is None:
            what = "null"
        elif part == "":
            what = "empty"
        elif all(ord(c) in WHITE_SPACE for c in part):
            what = "blank (only white space)"
        if what:
            return None, ("invalid idempotency key part", "Part %d is %s." % (pos, what))
    return mint_key(parts), None


NAMESPACE_KEY_VECTORS = [
    ("ns_simple", "payments"),
    ("ns_alphabet", "a-z_0-9"),
    ("ns_max_64", "n" * 64),
    ("ns_empty", ""),
    ("ns_too_long", "n" * 65),
    ("ns_upper_case", "Payments"),
    ("ns_space", "pay ments"),
    ("ns_dot", "pay.ments"),
    ("ns_double_quote", 'pay"ments'),
    ("ns_non_ascii", "paymënts"),
    ("ns_emoji_position", "a\U0001F600b"),
    ("ns_tab", "pay\tments"),
    ("ns_bad_char_before_length", "N" * 70),
]

PARSE_KEY_VECTORS = [
    ("parse_null", None),
    ("parse_plain", "order-1001"),
    ("parse_trimmed", "  order-1001  "),
    ("parse_inner_space_kept", "\t\n order 1001 \r"),
    ("parse_unicode_spaces_trimmed", "\u00a0\u3000key\u2003\u0085"),
    ("parse_zero_width_space_kept", "\u200bkey"),
    ("parse_file_separator_is_control", "\u001ckey"),
    ("parse_empty", ""),
    ("parse_blank", "  \t "),
    ("parse_ascii_255", "k" * 255),
    ("parse_two_byte_255", "\u00e9" * 255),
    ("parse_four_byte_255", "\U0001F600" * 255),
    ("parse_padded_255", " " + "k" * 255 + " "),
    ("parse_ascii_256", "k" * 256),
    ("parse_two_byte_256", "\u00e9" * 256),
    ("parse_newline_inside", "order\n1001"),
    ("parse_control_soh", "order\u0001"),
    ("parse_delete", "\u007f"),
    ("parse_unit_separator_then", "ok \u001f then"),
    ("parse_c1_kept", "a\u009bb"),
    ("parse_long_and_control_reports_length", "\u0001" + "k" * 300),
]

MINT_KEY_VECTORS = [
    ("mint_no_parts", []),
    ("mint_null_part", ["a", None]),
    ("mint_empty_part", ["a", ""]),
    ("mint_blank_part", ["a", " \u3000"]),
    ("mint_first_bad_part_reported", ["", None]),
    ("mint_spaces_kept_inside", [" a "]),
    ("mint_zero_width_space_not_blank", ["\u200b"]),
]


def build_key_rows():
    rows = []
    for name, ns in NAMESPACE_KEY_VECTORS:
        err = check_namespace(ns)
        rows.append({"function": "namespace", "name": name, "input": json.dumps(ns),
                     "key": "" if err else "ok", "message": err[0] if err else "",
                     "detail": err[1] if err else ""})
    for name, raw in PARSE_KEY_VECTORS:
        if raw is None:
            key, err = None, None
        else:
            key, err = parse_key(raw)
        rows.append({"function": "parse", "name": name, "input": json.dumps(raw),
                     "key": "" if err else json.dumps(key), "message": err[0] if err else "",
                     "detail": err[1] if err else ""})
    for name, parts in MINT_KEY_VECTORS:
        key, err = mint_checked(parts)
        rows.append({"function": "mint", "name": name, "input": json.dumps(parts),
                     "key": "" if err else json.dumps(key), "message": err[0] if err else "",
                     "detail": err[1] if err else ""})
    names = [r["name"] for r in rows]
    assert len(names) == len(set(names)), "duplicate key vector names"
    return rows


def render_keys(rows):
    out = io.StringIO(newline="")
    w = csv.DictWriter(out, fieldnames=KEY_COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return out.getvalue().encode("utf-8")


def main(argv):
    check = "--check" in argv[1:]
    unknown = [a for a in argv[1:] if a != "--check"]
    if unknown:
        print("usage: vectors.py [--check]", file=sys.stderr)
        return 2
    self_checks()
    outputs = [(CSV_PATH, render(build_rows())), (KEYS_PATH, render_keys(build_key_rows()))]
    if check:
        stale = 0
        for path, data in outputs:
            try:
                with open(path, "rb") as f:
                    current = f.read()
            except FileNotFoundError:
                current = None
            if current != data:
                print("%s is missing or out of date; regenerate with: python3 %s"
                      % (path, argv[0]), file=sys.stderr)
                stale += 1
            else:
                print("%s is up to date" % path)
        return 1 if stale else 0
    for path, data in outputs:
        with open(path, "wb") as f:
            f.write(data)
        print("wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
