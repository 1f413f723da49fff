package org.idempotency.core

/**
 * A caller-supplied key (an Idempotency-Key header's value) checked as
 * idem_parse checks it, without a round trip: success(null) when absent, the
 * trimmed key when valid, GeneralValidation (the server's message and detail)
 * when blank, over 255 characters or holding a control character.
 */
fun parseIdempotencyKey(namespace: ConsumerNamespace, rawValue: String?): Result<IdempotencyKey?> =
    parseIdempotencyKey(namespace, rawValue, IdempotencyErrors.codec)

/** [parseIdempotencyKey] with the errors made by [errors]. */
fun parseIdempotencyKey(namespace: ConsumerNamespace, rawValue: String?, errors: IdempotencyErrorCodec): Result<IdempotencyKey?> {
    if (rawValue == null) return Result.success(null)
    val trimmed = KeyRules.trim(rawValue)
    KeyRules.checkTrimmedKey(trimmed)?.let { return Result.failure(errors.generalValidation(it.message, it.detail)) }
    return Result.success(IdempotencyKey(namespace, trimmed))
}
