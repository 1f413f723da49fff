package org.idempotency.core

import java.security.MessageDigest

/**
 * The extension's rules for namespaces, caller keys and key parts, run in the
 * JVM: the same checks in the same order, with the same messages and details
 * as idem_parse and idem_mint (test/kat/keys.csv is the reference).
 */
internal object KeyRules {
    const val MAX_NAMESPACE = 64
    const val MAX_KEY = 255

    /** A broken rule: the server's message and detail. */
    data class Violation(val message: String, val detail: String)

    /** Unicode White_Space, the 25 characters that idem_parse trims and mint calls blank. */
    fun isWhiteSpace(cp: Int): Boolean = when (cp) {
        in 0x09..0x0D, 0x20, 0x85, 0xA0, 0x1680, in 0x2000..0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000 -> true
        else -> false
    }

    /** A code point as the server's details write it: printable ASCII quoted, else U+XXXX. */
    fun describe(cp: Int): String =
        if (cp in 0x21..0x7E && cp != 0x22) "\"${cp.toChar()}\"" else "U+%04X".format(cp)

    /** Length in code points, as every limit of the extension counts. */
    fun codePoints(s: String): Int = s.codePointCount(0, s.length)

    /** The namespace rule: empty, then the first disallowed character, then length. */
    fun checkNamespace(value: String): Violation? {
        if (value.isEmpty()) {
            return Violation("invalid idempotency namespace", "The namespace is empty; it must be 1 to 64 characters.")
        }
        var position = 0
        var i = 0
        while (i < value.length) {
            val cp = value.codePointAt(i)
            position++
            val allowed = cp in 'a'.code..'z'.code || cp in '0'.code..'9'.code || cp == '-'.code || cp == '_'.code
            if (!allowed) {
                return Violation(
                    "invalid idempotency namespace",
                    "Character ${describe(cp)} at position $position is not allowed; " +
                        "use only lower-case a-z, digits 0-9, \"-\" and \"_\".",
                )
            }
            i += Character.charCount(cp)
        }
        if (position > MAX_NAMESPACE) {
            return Violation("invalid idempotency namespace", "The namespace is $position characters long; the limit is 64.")
        }
        return null
    }

    /** Trims White_Space from both ends, as idem_parse does (every such character is in the BMP). */
    fun trim(raw: String): String {
        var start = 0
        var end = raw.length
        while (start < end && isWhiteSpace(raw[start].code)) start++
        while (end > start && isWhiteSpace(raw[end - 1].code)) end--
        return raw.substring(start, end)
    }

    /** The checks on a trimmed key: blank, then length, then control characters. */
    fun checkTrimmedKey(key: String): Violation? {
        if (key.isEmpty()) return Violation("invalid idempotency key", "The key is blank: it is empty or only white space.")
        val length = codePoints(key)
        if (length > MAX_KEY) {
            return Violation("invalid idempotency key", "The key is $length characters long after trimming; the limit is 255.")
        }
        var position = 0
        var i = 0
        while (i < key.length) {
            val cp = key.codePointAt(i)
            position++
            if (cp < 0x20 || cp == 0x7F) {
                return Violation(
                    "invalid idempotency key",
                    "The key contains control character ${"U+%04X".format(cp)} at position $position.",
                )
            }
            i += Character.charCount(cp)
        }
        return null
    }

    /** The part rules of idem_mint: at least one part; each non-null, non-empty, not blank. */
    fun checkParts(parts: List<String?>): Violation? {
        if (parts.isEmpty()) {
            return Violation("cannot mint an idempotency key from no parts", "Pass an array with at least one non-blank part.")
        }
        parts.forEachIndexed { index, part ->
            val n = index + 1
            when {
                part == null -> return Violation("invalid idempotency key part", "Part $n is null.")
                part.isEmpty() -> return Violation("invalid idempotency key part", "Part $n is empty.")
                part.all { isWhiteSpace(it.code) } -> return Violation("invalid idempotency key part", "Part $n is blank (only white space).")
            }
        }
        return null
    }

    /** The byte string idem_mint hashes: a big-endian count, then each part's UTF-8 length and bytes. */
    fun mintEncoding(parts: List<String>): ByteArray {
        val encoded = parts.map { it.toByteArray(Charsets.UTF_8) }
        val out = java.io.ByteArrayOutputStream(4 + encoded.sumOf { 4 + it.size })
        fun u32(v: Int) {
            out.write(v ushr 24); out.write(v ushr 16); out.write(v ushr 8); out.write(v)
        }
        u32(encoded.size)
        for (bytes in encoded) {
            u32(bytes.size)
            out.write(bytes)
        }
        return out.toByteArray()
    }

    /** The minted key: lowercase hex SHA-256 of the encoding. */
    fun mint(parts: List<String>): String = hex(MessageDigest.getInstance("SHA-256").digest(mintEncoding(parts)))

    /** Lowercase hex of bytes. */
    fun hex(bytes: ByteArray): String {
        val digits = "0123456789abcdef"
        val sb = StringBuilder(bytes.size * 2)
        for (b in bytes) {
            sb.append(digits[(b.toInt() ushr 4) and 0xF]).append(digits[b.toInt() and 0xF])
        }
        return sb.toString()
    }
}
