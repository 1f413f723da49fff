package org.idempotency.core

import kotlinx.serialization.KSerializer
import kotlinx.serialization.SerializationException
import kotlinx.serialization.Serializable
import kotlinx.serialization.descriptors.SerialDescriptor
import kotlinx.serialization.descriptors.buildClassSerialDescriptor
import kotlinx.serialization.descriptors.element
import kotlinx.serialization.encoding.Decoder
import kotlinx.serialization.encoding.Encoder
import kotlinx.serialization.json.JsonDecoder
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonEncoder
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonObject
import kotlinx.serialization.json.JsonPrimitive
import kotlinx.serialization.json.booleanOrNull
import kotlinx.serialization.json.contentOrNull
import kotlinx.serialization.json.intOrNull
import kotlinx.serialization.json.jsonPrimitive
import java.math.BigDecimal
import java.time.Duration
import java.time.Instant

/**
 * What the store answered to a begin, on JSON (the specification's five
 * variants; the kind names are the server's). [FreshAttempt] and [InFlight]
 * carry what the store adds: the claim's fence, attempt, lease, and on a
 * takeover the last recovery point. On the wire (it is @Serializable) an
 * outcome is an object with a stable `kind` discriminator: `fresh`,
 * `in_flight`, `prior_result`, `prior_error`, `mismatch`; the fence, the
 * recovery state and the recorded request are never written.
 */
@Serializable(with = IdempotencyOutcomeSerializer::class)
sealed class IdempotencyOutcome {
    /** The server's name of this kind (idem_kind). */
    abstract val kind: String

    /**
     * Go ahead: this transaction holds the key. [fence] is the claim's, passed
     * by commit and the failures; [takeover] is true when the claim was taken
     * from an abandoned attempt, whose last [recoveryPoint] and [recoveryState]
     * say how far it got (the work may have had effects: reconcile first).
     */
    data class FreshAttempt(
        val fence: Long?,
        val attempt: Int,
        val takeover: Boolean,
        val leaseEndsAt: Instant?,
        val recoveryPoint: String?,
        val recoveryState: JsonElement?,
    ) : IdempotencyOutcome() {
        override val kind get() = "fresh"
    }

    /** Another transaction holds the key: [age] since its claim (or last heartbeat), [leaseEndsAt] under a lease. */
    data class InFlight(val age: Duration?, val leaseEndsAt: Instant?) : IdempotencyOutcome() {
        override val kind get() = "in_flight"
    }

    /** The recorded result of the same request, to replay. */
    data class PriorResult(val value: JsonElement) : IdempotencyOutcome() {
        override val kind get() = "prior_result"
    }

    /** The recorded permanent error, replayed through the codec; [stored] is its recorded form. */
    class PriorError(val error: Throwable, val stored: StoredAppError) : IdempotencyOutcome() {
        override val kind get() = "prior_error"
        override fun equals(other: Any?) = other is PriorError && other.stored == stored
        override fun hashCode() = stored.hashCode()
        override fun toString() = "PriorError(stored=$stored)"
    }

    /**
     * The key was used with another request: reject this one. [recordedRequest]
     * is the first request as recorded (JSON null when the namespace keeps no
     * requests: [requestRecorded] is then false); hashes compare by content.
     */
    class Mismatch(
        val recordedRequest: JsonElement,
        val recordedHash: ByteArray,
        val submittedHash: ByteArray,
        val requestRecorded: Boolean = recordedRequest !is JsonNull,
    ) : IdempotencyOutcome() {
        override val kind get() = "mismatch"
        override fun equals(other: Any?) = other is Mismatch && other.recordedRequest == recordedRequest &&
            other.recordedHash.contentEquals(recordedHash) && other.submittedHash.contentEquals(submittedHash)
        override fun hashCode() = 31 * (31 * recordedRequest.hashCode() + recordedHash.contentHashCode()) +
            submittedHash.contentHashCode()
        override fun toString() = "Mismatch(recordedHash=${KeyRules.hex(recordedHash)}, submittedHash=${KeyRules.hex(submittedHash)})"
    }
}

/** The wire form of outcomes: one JSON object per outcome, the server's column names. */
internal object OutcomeWire {
    val descriptor: SerialDescriptor = buildClassSerialDescriptor("org.idempotency.core.IdempotencyOutcome") {
        element<String>("kind")
        element<Int>("attempt", isOptional = true)
        element<Boolean>("takeover", isOptional = true)
        element<String>("lease_ends_at", isOptional = true)
        element<String>("recovery_point", isOptional = true)
        element<Double>("age", isOptional = true)
        element<JsonElement>("result", isOptional = true)
        element<StoredAppError>("error", isOptional = true)
        element<String>("recorded_hash", isOptional = true)
        element<String>("submitted_hash", isOptional = true)
    }

    /** The JSON object of a raw outcome ([result] overrides the prior result's value). */
    fun toJson(outcome: IdempotencyOutcome, result: JsonElement? = null): JsonObject {
        val m = linkedMapOf<String, JsonElement>("kind" to JsonPrimitive(outcome.kind))
        when (outcome) {
            is IdempotencyOutcome.FreshAttempt -> {
                m["attempt"] = JsonPrimitive(outcome.attempt)
                m["takeover"] = JsonPrimitive(outcome.takeover)
                outcome.leaseEndsAt?.let { m["lease_ends_at"] = JsonPrimitive(it.toString()) }
                outcome.recoveryPoint?.let { m["recovery_point"] = JsonPrimitive(it) }
            }
            is IdempotencyOutcome.InFlight -> {
                outcome.age?.let { m["age"] = JsonPrimitive(BigDecimal(seconds(it))) }
                outcome.leaseEndsAt?.let { m["lease_ends_at"] = JsonPrimitive(it.toString()) }
            }
            is IdempotencyOutcome.PriorResult -> m["result"] = result ?: outcome.value
            is IdempotencyOutcome.PriorError -> m["error"] = storedJson(outcome.stored)
            is IdempotencyOutcome.Mismatch -> {
                m["recorded_hash"] = JsonPrimitive(KeyRules.hex(outcome.recordedHash))
                m["submitted_hash"] = JsonPrimitive(KeyRules.hex(outcome.submittedHash))
            }
        }
        return JsonObject(m)
    }

    /** A raw outcome from its JSON object; a decoded FreshAttempt has no fence (null: this transaction's claim). */
    fun fromJson(o: JsonObject, codec: IdempotencyErrorCodec = IdempotencyErrors.codec): IdempotencyOutcome {
        fun str(name: String) = (o[name] as? JsonPrimitive)?.contentOrNull
        return when (val kind = str("kind")) {
            "fresh" -> IdempotencyOutcome.FreshAttempt(
                fence = null,
                attempt = o["attempt"]?.jsonPrimitive?.intOrNull ?: 1,
                takeover = o["takeover"]?.jsonPrimitive?.booleanOrNull ?: false,
                leaseEndsAt = str("lease_ends_at")?.let(Instant::parse),
                recoveryPoint = str("recovery_point"),
                recoveryState = null,
            )
            "in_flight" -> IdempotencyOutcome.InFlight(str("age")?.let(::duration), str("lease_ends_at")?.let(Instant::parse))
            "prior_result" -> IdempotencyOutcome.PriorResult(o["result"] ?: JsonNull)
            "prior_error" -> {
                val stored = storedFrom(o["error"] as? JsonObject ?: throw SerializationException("prior_error without its error"))
                IdempotencyOutcome.PriorError(IdempotencyErrors.replay(stored, codec), stored)
            }
            "mismatch" -> IdempotencyOutcome.Mismatch(
                JsonNull,
                unhex(str("recorded_hash") ?: ""),
                unhex(str("submitted_hash") ?: ""),
                requestRecorded = false,
            )
            else -> throw SerializationException("unknown idempotency outcome kind: $kind")
        }
    }

    /** The stored error's JSON, without a null cause (the server refuses one). */
    fun storedJson(s: StoredAppError): JsonObject = JsonObject(
        buildMap {
            put("class_tag", JsonPrimitive(s.classTag))
            put("message", JsonPrimitive(s.message))
            s.cause?.let { put("cause", JsonPrimitive(it)) }
        },
    )

    /** A stored error read leniently from JSON. */
    fun storedFrom(o: JsonObject): StoredAppError = StoredAppError(
        (o["class_tag"] as? JsonPrimitive)?.contentOrNull ?: "",
        (o["message"] as? JsonPrimitive)?.contentOrNull ?: "",
        (o["cause"] as? JsonPrimitive)?.contentOrNull,
    )

    /** Seconds, as decimal text (the server's interval, exactly). */
    fun seconds(d: Duration): String = BigDecimal.valueOf(d.seconds).add(BigDecimal.valueOf(d.nano.toLong(), 9))
        .stripTrailingZeros().toPlainString()

    /** A duration from decimal seconds. */
    fun duration(s: String): Duration {
        val bd = BigDecimal(s)
        val whole = bd.toBigInteger().toLong()
        return Duration.ofSeconds(whole, bd.subtract(BigDecimal.valueOf(whole)).movePointRight(9).toLong())
    }

    /** Bytes from lowercase or upper-case hex. */
    fun unhex(s: String): ByteArray = ByteArray(s.length / 2) { s.substring(2 * it, 2 * it + 2).toInt(16).toByte() }

    /** The JSON encoder, or a clear error: outcomes are written as JSON only. */
    fun json(encoder: Encoder) = encoder as? JsonEncoder
        ?: throw SerializationException("an idempotency outcome is serialized with kotlinx.serialization.json only")

    /** The JSON decoder, or a clear error. */
    fun json(decoder: Decoder) = decoder as? JsonDecoder
        ?: throw SerializationException("an idempotency outcome is deserialized with kotlinx.serialization.json only")
}

/** Writes an [IdempotencyOutcome] as one JSON object with its `kind` (JSON formats only). */
object IdempotencyOutcomeSerializer : KSerializer<IdempotencyOutcome> {
    override val descriptor: SerialDescriptor get() = OutcomeWire.descriptor

    override fun serialize(encoder: Encoder, value: IdempotencyOutcome) {
        OutcomeWire.json(encoder).encodeJsonElement(OutcomeWire.toJson(value))
    }

    override fun deserialize(decoder: Decoder): IdempotencyOutcome {
        val element = OutcomeWire.json(decoder).decodeJsonElement()
        return OutcomeWire.fromJson(element as? JsonObject ?: throw SerializationException("an outcome is a JSON object"))
    }
}
