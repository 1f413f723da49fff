package org.idempotency.service

import kotlinx.serialization.KSerializer
import kotlinx.serialization.SerializationException
import kotlinx.serialization.json.Json
import org.idempotency.core.IdempotencyErrorCodec
import org.idempotency.core.IdempotencyErrors
import org.idempotency.core.IdempotencyKey

/** The typed store: encodes with the serializers captured once, delegates to [raw]. */
@PublishedApi
internal class IdempotencyStoreImpl<Req, Res>(
    override val raw: RawIdempotencyStore,
    private val json: Json,
    private val req: KSerializer<Req>,
    private val res: KSerializer<Res>,
) : IdempotencyStore<Req, Res> {
    private val errors: IdempotencyErrorCodec get() = (raw as? ExposedRawIdempotencyStore)?.errors ?: IdempotencyErrors.codec

    // Encoding a request or result is the caller's data meeting its serializer: a failure, not a throw.
    private fun <T> encode(serializer: KSerializer<T>, value: T, what: String) = try {
        Result.success(json.encodeToJsonElement(serializer, value))
    } catch (e: SerializationException) {
        Result.failure(errors.implementation("the $what does not encode: ${e.message}", e))
    }

    override fun begin(key: IdempotencyKey, request: Req): Result<TypedIdempotencyOutcome<Req, Res>> =
        encode(req, request, "request").mapCatching { element ->
            val outcome = raw.begin(key, element).getOrThrow()
            typed(outcome, { json.decodeFromJsonElement(req, it) }, { json.decodeFromJsonElement(res, it) }, errors).getOrThrow()
        }

    override fun commit(key: IdempotencyKey, result: Res, fence: Long?): Result<Unit> =
        encode(res, result, "result").mapCatching { raw.commit(key, it, fence).getOrThrow() }

    override fun beginBatch(requests: List<Pair<IdempotencyKey, Req>>): Result<List<TypedIdempotencyOutcome<Req, Res>>> =
        runCatching { requests.map { (k, r) -> k to encode(req, r, "request").getOrThrow() } }.mapCatching { encoded ->
            raw.beginBatch(encoded).getOrThrow().map { outcome ->
                typed(outcome, { json.decodeFromJsonElement(req, it) }, { json.decodeFromJsonElement(res, it) }, errors).getOrThrow()
            }
        }
}
