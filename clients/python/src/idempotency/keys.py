"""idem_mint, idem_parse and the namespace rules, computed in the client.

They give exactly the extension's answers and errors (the known-answer
vectors in test/kat/ are the reference) without a round trip."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

from .errors import InvalidArgument

# The 25 Unicode White_Space code points, which parse trims and mint calls blank.
WHITE_SPACE = "".join(
    chr(c)
    for c in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
              0x202F, 0x205F, 0x3000)
)
_NAMESPACE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
_NAMESPACE_RULE = 'use only lower-case a-z, digits 0-9, "-" and "_".'
NAMESPACE_MAX = 64
KEY_MAX = 255


def _code_point(c: str) -> str:
    """U+XXXX, as the extension's details write a code point."""
    return f"U+{ord(c):04X}"


def _shown(c: str) -> str:
    """A character as the namespace detail shows it: quoted when printable
    ASCII other than space and double quote, else U+XXXX."""
    return f'"{c}"' if "!" <= c <= "~" and c != '"' else _code_point(c)


def validate_namespace(namespace: str | None) -> str:
    """Returns the namespace when it is valid, else raises InvalidArgument as
    the extension does: NULL, empty, the first disallowed character, length."""
    if namespace is None:
        raise InvalidArgument("idempotency namespace must not be null",
                              'Pass a namespace of 1 to 64 characters: a-z, 0-9, "-" and "_".')
    if not isinstance(namespace, str):
        raise TypeError(f"a namespace is a str, not {type(namespace).__name__}")
    if namespace == "":
        raise InvalidArgument("invalid idempotency namespace",
                              f"The namespace is empty; it must be 1 to {NAMESPACE_MAX} characters.")
    for position, c in enumerate(namespace, start=1):
        if c not in _NAMESPACE_CHARS:
            raise InvalidArgument("invalid idempotency namespace",
                                  f"Character {_shown(c)} at position {position} is not allowed; {_NAMESPACE_RULE}")
    if len(namespace) > NAMESPACE_MAX:
        raise InvalidArgument("invalid idempotency namespace",
                              f"The namespace is {len(namespace)} characters long; the limit is {NAMESPACE_MAX}.")
    return namespace


def parse(namespace: str, raw: str | None) -> str | None:
    """idem_parse: the caller's key trimmed of white space, None for None;
    raises InvalidArgument for a blank, over-long or control-character key."""
    validate_namespace(namespace)
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise TypeError(f"a key is a str, not {type(raw).__name__}")
    key = raw.strip(WHITE_SPACE)
    if key == "":
        raise InvalidArgument("invalid idempotency key", "The key is blank: it is empty or only white space.")
    if len(key) > KEY_MAX:
        raise InvalidArgument("invalid idempotency key",
                              f"The key is {len(key)} characters long after trimming; the limit is {KEY_MAX}.")
    for position, c in enumerate(key, start=1):
        if c < " " or c == "\x7f":
            raise InvalidArgument("invalid idempotency key",
                                  f"The key contains control character {_code_point(c)} at position {position}.")
    return key


def _dimensions(parts: Sequence[object]) -> int:
    """How many dimensions a nested list would have as a PostgreSQL array."""
    depth = 1
    first: object = parts
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
        if isinstance(first, (list, tuple)):
            depth += 1
    return depth


def mint(namespace: str, parts: Sequence[str | None]) -> str:
    """idem_mint: the key of these parts, the lowercase hex SHA-256 of their
    count and each part's UTF-8 bytes, each with a 4-byte big-endian length;
    raises InvalidArgument for no parts or a null, empty or blank part."""
    validate_namespace(namespace)
    if parts is None:
        raise InvalidArgument("idempotency key parts must not be null",
                              "Pass a text[] with at least one non-blank part.")
    if isinstance(parts, (str, bytes)):
        raise TypeError("parts is a sequence of str (a str alone would be split into characters)")
    dimensions = _dimensions(parts)
    if dimensions > 1:
        raise InvalidArgument("idempotency key parts must be a one-dimensional array",
                              f"The array has {dimensions} dimensions.")
    if len(parts) == 0:
        raise InvalidArgument("cannot mint an idempotency key from no parts",
                              "Pass an array with at least one non-blank part.")
    digest = hashlib.sha256(struct.pack(">I", len(parts)))
    for position, part in enumerate(parts, start=1):
        if part is None:
            raise InvalidArgument("invalid idempotency key part", f"Part {position} is null.")
        if not isinstance(part, str):
            raise TypeError(f"part {position} is a str, not {type(part).__name__}")
        if part == "":
            raise InvalidArgument("invalid idempotency key part", f"Part {position} is empty.")
        if part.strip(WHITE_SPACE) == "":
            raise InvalidArgument("invalid idempotency key part", f"Part {position} is blank (only white space).")
        data = part.encode("utf-8")
        digest.update(struct.pack(">I", len(data)))
        digest.update(data)
    return digest.hexdigest()
