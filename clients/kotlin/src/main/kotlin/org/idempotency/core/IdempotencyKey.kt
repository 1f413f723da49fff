package org.idempotency.core

/**
 * A validated idempotency key of one namespace. Only [IdempotencyKeyMinter]
 * and [parseIdempotencyKey] make keys, so a key always holds the server's
 * rules: not blank, at most 255 characters (code points), no control characters.
 */
@ConsistentCopyVisibility
data class IdempotencyKey internal constructor(val namespace: ConsumerNamespace, val value: String) {
    init {
        KeyRules.checkTrimmedKey(KeyRules.trim(value))?.let { throw IllegalArgumentException("${it.message}: ${it.detail}") }
        require(KeyRules.trim(value) == value) { "invalid idempotency key: a key has no white space at its ends" }
    }
}
