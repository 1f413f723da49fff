package org.idempotency.core

/**
 * Deterministic keys from natural-key parts, bound to one namespace: the
 * lowercase hex SHA-256 of the parts' length-prefixed UTF-8 encoding, exactly
 * idem_mint's answer, computed here without a round trip.
 */
class IdempotencyKeyMinter(
    val namespace: ConsumerNamespace,
    private val errors: IdempotencyErrorCodec? = null,
) {
    /** The key of [parts] (same parts in the same order, same key); GeneralValidation for no parts or a bad one. */
    fun mint(parts: List<String?>): Result<IdempotencyKey> {
        KeyRules.checkParts(parts)?.let {
            return Result.failure((errors ?: IdempotencyErrors.codec).generalValidation(it.message, it.detail))
        }
        @Suppress("UNCHECKED_CAST")
        return Result.success(IdempotencyKey(namespace, KeyRules.mint(parts as List<String>)))
    }

    /** [mint] of the parts given as arguments. */
    fun mint(vararg parts: String): Result<IdempotencyKey> = mint(parts.asList())
}
