package org.idempotency.service

import kotlinx.serialization.KSerializer
import kotlinx.serialization.SerializationException
import kotlinx.serialization.Serializable
import kotlinx.serialization.descriptors.SerialDescriptor
import kotlinx.serialization.encoding.Decoder
import kotlinx.serialization.encoding.Encoder
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonObject
import org.idempotency.core.ConsumerNamespace
import org.idempotency.core.IdempotencyErrors
import org.idempotency.core.IdempotencyKey
import org.idempotency.core.IdempotencyOutcome
import org.idempotency.core.OutcomeWire
import org.idempotency.core.StoredAppError
import java.time.Duration
import java.time.Instant

/**
 * The store typed by the request and result types, made by
 * [typedAs]. Requests and results go through the serializers resolved once,
 * with the Json given there; a stored result that no longer decodes is a
 * failure made by the codec's incompatibleState.
 */
interface IdempotencyStore<Req, Res> {
    /** The raw store this one delegates to. */
    val raw: RawIdempotencyStore

    /** The namespace this store serves. */
    val namespace: ConsumerNamespace get() = raw.namespace

    /** idem_begin on the encoded request. */
    fun begin(key: IdempotencyKey, request: Req): Result<TypedIdempotencyOutcome<Req, Res>>

    /** idem_commit of the encoded result. */
    fun commit(key: IdempotencyKey, result: Res, fence: Long? = null): Result<Unit>

    /** idem_fail_permanent of [error] through the codec. */
    fun failPermanent(key: IdempotencyKey, error: Throwable, fence: Long? = null): Result<Unit> =
        raw.failPermanent(key, error, fence)

    /** idem_fail_transient. */
    fun failTransient(key: IdempotencyKey, fence: Long? = null): Result<Unit> = raw.failTransient(key, fence)

    /** idem_purge of every store's expired records. */
    fun purgeExpired(): Result<Int> = raw.purgeExpired()

    /** idem_begin_batch on the encoded requests. */
    fun beginBatch(requests: List<Pair<IdempotencyKey, Req>>): Result<List<TypedIdempotencyOutcome<Req, Res>>>

    /** idem_extend_lease. */
    fun extendLease(key: IdempotencyKey, fence: Long? = null): Result<Instant> = raw.extendLease(key, fence)

    /** idem_save_point. */
    fun savePoint(key: IdempotencyKey, point: String, state: JsonElement?, fence: Long? = null): Result<Instant> =
        raw.savePoint(key, point, state, fence)

    /** idem_http_response for a typed outcome. */
    fun httpResponse(outcome: TypedIdempotencyOutcome<Req, Res>, retryAfterSeconds: Int = 1, docsUri: String? = null) =
        raw.httpResponse(outcome.raw, retryAfterSeconds, docsUri)
}

/**
 * The typed twin of [IdempotencyOutcome]: the same five variants, with the
 * result decoded as [Res] and the recorded request as a [Result] of [Req] (a
 * request that no longer decodes is a failure there, not a failed begin).
 * [raw] is the store's answer as JSON. On the wire it is written as
 * [IdempotencyOutcome] is, with the result encoded as [Res].
 */
@Serializable(with = TypedIdempotencyOutcomeSerializer::class)
sealed class TypedIdempotencyOutcome<out Req, out Res> {
    /** The store's answer as JSON. */
    abstract val raw: IdempotencyOutcome

    /** The server's name of this kind. */
    val kind: String get() = raw.kind

    /** Go ahead; see [IdempotencyOutcome.FreshAttempt]. */
    class FreshAttempt(override val raw: IdempotencyOutcome.FreshAttempt) : TypedIdempotencyOutcome<Nothing, Nothing>() {
        val fence: Long? get() = raw.fence
        val attempt: Int get() = raw.attempt
        val takeover: Boolean get() = raw.takeover
        val leaseEndsAt: Instant? get() = raw.leaseEndsAt
        val recoveryPoint: String? get() = raw.recoveryPoint
        val recoveryState: JsonElement? get() = raw.recoveryState
        override fun equals(other: Any?) = other is FreshAttempt && other.raw == raw
        override fun hashCode() = raw.hashCode()
        override fun toString() = raw.toString()
    }

    /** Another transaction holds the key. */
    class InFlight(override val raw: IdempotencyOutcome.InFlight) : TypedIdempotencyOutcome<Nothing, Nothing>() {
        val age: Duration? get() = raw.age
        val leaseEndsAt: Instant? get() = raw.leaseEndsAt
        override fun equals(other: Any?) = other is InFlight && other.raw == raw
        override fun hashCode() = raw.hashCode()
        override fun toString() = raw.toString()
    }

    /** The recorded result, decoded. */
    class PriorResult<out Res>(val value: Res, override val raw: IdempotencyOutcome.PriorResult) :
        TypedIdempotencyOutcome<Nothing, Res>() {
        override fun equals(other: Any?) = other is PriorResult<*> && other.value == value
        override fun hashCode() = value.hashCode()
        override fun toString() = "PriorResult(value=$value)"
    }

    /** The recorded permanent error, replayed through the codec. */
    class PriorError(override val raw: IdempotencyOutcome.PriorError) : TypedIdempotencyOutcome<Nothing, Nothing>() {
        val error: Throwable get() = raw.error
        val stored: StoredAppError get() = raw.stored
        override fun equals(other: Any?) = other is PriorError && other.raw == raw
        override fun hashCode() = raw.hashCode()
        override fun toString() = raw.toString()
    }

    /** The key was used with another request; hashes compare by content. */
    class Mismatch<out Req>(val recordedRequest: Result<Req>, override val raw: IdempotencyOutcome.Mismatch) :
        TypedIdempotencyOutcome<Req, Nothing>() {
        val recordedHash: ByteArray get() = raw.recordedHash
        val submittedHash: ByteArray get() = raw.submittedHash
        override fun equals(other: Any?) = other is Mismatch<*> && other.recordedRequest == recordedRequest && other.raw == raw
        override fun hashCode() = raw.hashCode()
        override fun toString() = raw.toString()
    }
}

/** Writes a [TypedIdempotencyOutcome] as [IdempotencyOutcome] is written, the result through [res] (JSON only). */
class TypedIdempotencyOutcomeSerializer<Req, Res>(
    private val req: KSerializer<Req>,
    private val res: KSerializer<Res>,
) : KSerializer<TypedIdempotencyOutcome<Req, Res>> {
    override val descriptor: SerialDescriptor get() = OutcomeWire.descriptor

    override fun serialize(encoder: Encoder, value: TypedIdempotencyOutcome<Req, Res>) {
        val json = OutcomeWire.json(encoder)
        val result = (value as? TypedIdempotencyOutcome.PriorResult<Res>)?.let { json.json.encodeToJsonElement(res, it.value) }
        json.encodeJsonElement(OutcomeWire.toJson(value.raw, result))
    }

    override fun deserialize(decoder: Decoder): TypedIdempotencyOutcome<Req, Res> {
        val json = OutcomeWire.json(decoder)
        val element = json.decodeJsonElement() as? JsonObject ?: throw SerializationException("an outcome is a JSON object")
        val raw = OutcomeWire.fromJson(element)
        return typed(raw, { json.json.decodeFromJsonElement(req, it) }, { json.json.decodeFromJsonElement(res, it) }).getOrElse {
            throw SerializationException("the outcome's result does not decode", it)
        }
    }
}

/**
 * The typed outcome of a raw one: the result decoded by [decodeRes] (a failure
 * made by the codec's incompatibleState when it no longer decodes), the recorded
 * request by [decodeReq] into the Mismatch's own Result.
 */
internal fun <Req, Res> typed(
    raw: IdempotencyOutcome,
    decodeReq: (JsonElement) -> Req,
    decodeRes: (JsonElement) -> Res,
    errors: org.idempotency.core.IdempotencyErrorCodec = IdempotencyErrors.codec,
): Result<TypedIdempotencyOutcome<Req, Res>> = when (raw) {
    is IdempotencyOutcome.FreshAttempt -> Result.success(TypedIdempotencyOutcome.FreshAttempt(raw))
    is IdempotencyOutcome.InFlight -> Result.success(TypedIdempotencyOutcome.InFlight(raw))
    is IdempotencyOutcome.PriorError -> Result.success(TypedIdempotencyOutcome.PriorError(raw))
    is IdempotencyOutcome.PriorResult -> try {
        Result.success(TypedIdempotencyOutcome.PriorResult(decodeRes(raw.value), raw))
    } catch (e: IllegalArgumentException) {   // kotlinx's SerializationException is one
        Result.failure(errors.incompatibleState("incompatible stored state: the recorded result no longer decodes: ${e.message}", e))
    }
    is IdempotencyOutcome.Mismatch -> {
        val request: Result<Req> = if (!raw.requestRecorded) {
            Result.failure(errors.incompatibleState("the recorded request is not available (the namespace keeps no requests, or the outcome came from the wire)", null))
        } else {
            try {
                Result.success(decodeReq(raw.recordedRequest))
            } catch (e: IllegalArgumentException) {
                Result.failure(errors.incompatibleState("incompatible stored state: the recorded request no longer decodes: ${e.message}", e))
            }
        }
        Result.success(TypedIdempotencyOutcome.Mismatch(request, raw))
    }
}
